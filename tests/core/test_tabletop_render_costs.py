"""research/tabletop_render_costs.py: the phases it times add up, and the rates it implies follow from them."""

from __future__ import annotations

import pytest


def test_render_costs_add_up_to_the_implied_rate(load_script) -> None:
    script = load_script("tabletop_render_costs")
    result = script.main("reach", rounds=1, steps=64)  # one round: each median is that round's value
    # reach ends by time limit after 30 random steps at most, so 64 steps hold at least two resets
    median = {key: value["median"] for key, value in result.items() if isinstance(value, dict)}
    assert result["cameras"] == 2 and result["geoms_drawn"] > 0
    phases = median["image_scene_update_us"] + median["image_draw_us"] + median["image_read_back_us"]
    assert median["image_us"] == pytest.approx(phases, abs=0.2)  # each figure rounded to 0.1 us
    assert median["physics_us_per_step"] > 0 and median["env_python_us_per_step"] > 0
    assert median["reset_us"] > 0 and median["steps_per_reset"] <= 32
    images = 2 * median["image_us"] / script.CHUNK_SIZE
    per_step = median["physics_us_per_step"] + median["env_python_us_per_step"] + images
    per_step += median["reset_us"] / median["steps_per_reset"]
    assert median["implied_steps_per_s_at_chunk_ends"] == pytest.approx(1e6 / per_step, rel=2e-3)
    ceiling = 1e6 / (median["physics_us_per_step"] + images)
    assert median["ceiling_steps_per_s_physics_and_images"] == pytest.approx(ceiling, rel=2e-3)
