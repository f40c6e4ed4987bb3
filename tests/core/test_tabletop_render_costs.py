"""scripts/tabletop_render_costs.py: the phases it times add up, and the rate it implies follows from them."""

from __future__ import annotations

import pytest


def test_render_costs_add_up_to_the_implied_rate(load_script) -> None:
    script = load_script("tabletop_render_costs")
    result = script.main("reach", rounds=1, steps=24)  # one round: each median is that round's value
    median = {key: value["median"] for key, value in result.items() if isinstance(value, dict)}
    assert result["cameras"] == 2 and result["geoms_drawn"] > 0
    phases = median["image_scene_update_us"] + median["image_draw_us"] + median["image_read_back_us"]
    assert median["image_us"] == pytest.approx(phases, abs=0.2)  # each figure rounded to 0.1 us
    assert median["physics_us_per_step"] > 0 and median["env_step_without_images_us"] > 0
    per_step = median["env_step_without_images_us"] + 2 * median["image_us"] / script.CHUNK_SIZE
    assert median["implied_steps_per_s_at_chunk_ends"] == pytest.approx(1e6 / per_step, rel=1e-3)
