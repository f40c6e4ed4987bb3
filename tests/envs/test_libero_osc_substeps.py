"""The LIBERO env's fast OSC substeps (envs/libero/osc_substeps.py) give robosuite's trajectories to the bit.

Skipped when LIBERO is not installed (``make libero`` installs it; CI runs these tests).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("envs.libero", reason="LIBERO is not installed; `make libero` installs it", exc_type=ImportError)

from envs.experts.libero import LiberoPickPlaceExpert
from envs.libero import osc_substeps
from envs.libero.env import make_libero_env

TASK = "libero_spatial/0"
INIT_STATE = 2
MAX_STEPS = 220


@pytest.fixture(scope="module")
def env():
    built = make_libero_env(task=TASK, cameras=())
    yield built
    built.close()


def _use_fast_substeps(env, on: bool) -> None:
    inner = env.libero_env
    if on:
        inner._pre_action = env.fast_substeps
    else:
        vars(inner).pop("_pre_action", None)  # robosuite's own _pre_action (the class's) again


def _rollout(env, actions=None):
    """(actions, qpos, qvel, ctrl, arm torques, successes) of one episode from INIT_STATE: the expert's
    actions where ``actions`` is None, else these."""
    env.reset(options={"init_state": INIT_STATE})
    expert = LiberoPickPlaceExpert(env) if actions is None else None
    if expert is not None:
        expert.reset()
    taken, qpos, qvel, ctrl, torques, successes = [], [], [], [], [], []
    for step in range(MAX_STEPS if actions is None else len(actions)):
        action = expert.act() if expert is not None else actions[step]
        _, _, terminated, _, info = env.step(action)
        arm = env.libero_env.robots[0].composite_controller.part_controllers["right"]
        taken.append(np.asarray(action, dtype=np.float64).copy())
        qpos.append(env.data.qpos.copy())
        qvel.append(env.data.qvel.copy())
        ctrl.append(env.data.ctrl.copy())
        torques.append(np.array(arm.torques))
        successes.append(info["is_success"])
        if terminated:
            break
    return taken, *(np.array(values) for values in (qpos, qvel, ctrl, torques, successes))


def test_expert_episode_is_bit_identical_with_and_without_fast_substeps(env):
    """The expert's episode from an official init state (settle steps included) with the fast substeps,
    replayed through robosuite's own controller code: every qpos, qvel, ctrl and torque equal to the bit,
    and the same success at the same step."""
    assert env.fast_substeps is not None
    try:
        _use_fast_substeps(env, True)
        before = env.fast_substeps.substeps
        actions, *fast = _rollout(env)
        assert env.fast_substeps.substeps - before >= 24 * len(actions)  # the fast path ran the substeps
        _use_fast_substeps(env, False)
        before = env.fast_substeps.substeps
        _, *robosuite = _rollout(env, actions)
        assert env.fast_substeps.substeps == before  # and robosuite's code ran these
    finally:
        _use_fast_substeps(env, True)
    assert fast[-1][-1], "the expert should solve libero_spatial/0 from this init state"
    for name, mine, theirs in zip(
        ("qpos", "qvel", "ctrl", "torques", "success"), fast, robosuite, strict=True
    ):
        assert mine.shape == theirs.shape, name
        np.testing.assert_array_equal(mine, theirs, err_msg=name)


def test_other_controllers_keep_robosuites_path(env):
    """Options the fast substeps do not reproduce are refused by name, and install changes nothing then."""
    inner = env.libero_env
    assert osc_substeps._supported(inner) is None
    arm = inner.robots[0].composite_controller.part_controllers["right"]
    arm.uncoupling = False
    try:
        assert osc_substeps._supported(inner) == "OSC options"

        class Plain:  # an env object whose _pre_action install would replace
            pass

        plain = Plain()
        plain.__dict__.update(robots=inner.robots, lite_physics=True)
        assert osc_substeps.install(plain) is None and "_pre_action" not in vars(plain)
    finally:
        arm.uncoupling = True
    inner.lite_physics = False
    try:
        assert "lite_physics" in osc_substeps._supported(inner)
    finally:
        inner.lite_physics = True
