"""Fixed scenes of the tabletop suite: one nominal layout per task, jittered at each reset."""

from __future__ import annotations

import numpy as np
import pytest

from envs.builtin.tabletop import make_tabletop_env
from envs.builtin.tasks.base import MIN_SPACING
from envs.builtin.tasks.fixed_scenes import EE_HOME
from envs.experts import get_expert
from vla_rl.stages.collect import run_expert_episode

JITTER = 0.03


def _points(layout):
    return [("bowl", layout["bowl_position"])] + [("block", p[:2]) for p in layout["block_poses"]] + [
        ("zone", z) for z in layout["zone_positions"]
    ]


@pytest.mark.parametrize("task", ["reach", "lift", "push", "open_drawer"])
def test_resets_keep_the_scene_and_move_objects_within_the_jitter(task):
    env = make_tabletop_env(task=task, cameras=(), fixed_scenes=True, scene_jitter=JITTER)
    layouts = [env.reset(seed=seed)[1]["init_state"] for seed in range(20)]
    first = layouts[0]
    for layout in layouts:
        for key in ("block_colors", "zone_colors", "drawer_color", "target", "instruction"):
            assert layout[key] == first[key]
        np.testing.assert_array_less(np.abs(np.array(layout["ee_start"]) - EE_HOME), JITTER + 1e-9)
        points = _points(layout)
        for i, (kind, point) in enumerate(points):
            for other_kind, other in points[:i]:
                assert np.linalg.norm(np.subtract(point, other)) >= max(MIN_SPACING[kind], MIN_SPACING[other_kind])
    # every object moves, but no further than twice the jitter between two resets (each is within the jitter)
    xy = np.array([[p for _, xy in _points(layout) for p in xy] for layout in layouts])
    spread = xy.max(axis=0) - xy.min(axis=0)
    assert np.all(spread > 0.2 * JITTER) and np.all(spread <= 2 * JITTER + 1e-9)
    env.close()


def test_the_nominal_scene_depends_on_the_seed_and_the_task_and_zero_jitter_repeats_it():
    def layout(task, scene_seed, seed, jitter=JITTER):
        env = make_tabletop_env(task=task, cameras=(), fixed_scenes=True, scene_seed=scene_seed, scene_jitter=jitter)
        return env.reset(seed=seed)[1]["init_state"]

    assert layout("reach", 0, 0, 0.0) == layout("reach", 0, 1, 0.0)
    assert layout("reach", 0, 0)["block_poses"] != layout("reach", 0, 1)["block_poses"]
    assert layout("reach", 0, 0, 0.0) != layout("reach", 1, 0, 0.0)
    assert layout("reach", 0, 0, 0.0)["block_poses"] != layout("lift", 0, 0, 0.0)["block_poses"]
    assert layout("lift", 0, 0) == layout("lift", 0, 0)  # same reset seed, same jitter


def test_random_layouts_are_the_default():
    env = make_tabletop_env(task="reach", cameras=())
    instructions = {env.reset(seed=seed)[0]["instruction"] for seed in range(20)}
    assert len(instructions) > 5


@pytest.mark.parametrize("jitter", [-0.01, 0.5])
def test_a_bad_jitter_names_the_option(jitter):
    with pytest.raises(ValueError, match="scene_jitter"):
        make_tabletop_env(task="reach", cameras=(), fixed_scenes=True, scene_jitter=jitter)


@pytest.mark.parametrize("task", ["reach", "lift", "open_drawer", "stack"])
def test_the_scripted_experts_solve_jittered_scenes(task):
    env = make_tabletop_env(task=task, cameras=(), fixed_scenes=True, scene_jitter=JITTER)
    expert = get_expert("tabletop", task, env)
    successes = sum(run_expert_episode(env, expert, seed).success for seed in range(10))
    assert successes == 10
    env.close()
