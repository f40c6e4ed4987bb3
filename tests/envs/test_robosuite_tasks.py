"""Every robosuite environment by name: the registered list, generic and configured instructions and
episode lengths, other robots, and two-arm tasks with the action space of both arms."""

from __future__ import annotations

import numpy as np
import pytest

from envs.checks import CHECKS, run_checks
from envs.registry import make
from envs.robosuite import ROBOSUITE_TASKS, TASKS
from envs.robosuite.tasks import GENERIC_EPISODE_STEPS, REGISTERED_ENVS, get_task, instruction_from_name
from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config


def test_every_environment_robosuite_registers_is_a_task():
    from robosuite.environments.base import REGISTERED_ENVS as registered

    # robosuite's own environments: packages built on it (LIBERO's BDDL domains) register theirs in the same table
    installed = {name for name, cls in registered.items() if cls.__module__.startswith("robosuite.")}
    assert set(REGISTERED_ENVS) == set(installed)
    assert set(ROBOSUITE_TASKS) == set(installed) and ROBOSUITE_TASKS[:5] == (
        "Lift", "Stack", "PickPlaceCan", "Door", "NutAssemblySquare",
    )  # fmt: skip
    assert TASKS["Lift"].instructions[0] == "lift the red cube"  # the written ones keep theirs


def test_generic_instruction_and_length_and_config_overrides():
    assert instruction_from_name("TwoArmPegInHole") == "complete the two arm peg in hole task"
    assert TASKS["ToolHang"].instructions == ("complete the tool hang task",)
    assert TASKS["Wipe"].max_episode_steps == GENERIC_EPISODE_STEPS
    wipe = get_task("Wipe", {"Wipe": ["wipe the table", "clean the marks off the table"]}, {"Wipe": 321})
    assert wipe.instructions == ("wipe the table", "clean the marks off the table") and wipe.max_episode_steps == 321
    lift = get_task("Lift", {"Wipe": "wipe"}, 40)  # another task's instructions; one length for all
    assert lift.instructions == TASKS["Lift"].instructions and lift.max_episode_steps == 40
    with pytest.raises(ValueError, match="instructions names unknown task 'Wype'"):
        get_task("Wipe", {"Wype": "wipe"})
    with pytest.raises(ValueError, match=r"instructions.Wipe: 'wipe the table\\n'"):
        get_task("Wipe", {"Wipe": "wipe the table\n"})
    with pytest.raises(ValueError, match="max_episode_steps for Wipe: 0"):
        get_task("Wipe", None, {"Wipe": 0})


def test_a_config_names_any_task_robot_instructions_and_lengths():
    cfg = load_config(["env=robosuite", "env.tasks=[Wipe]", "env.kwargs.robot=Sawyer",
                       "env.kwargs.instructions={Wipe: [wipe the table]}", "env.kwargs.max_episode_steps=77"])  # fmt: skip
    assert list(cfg.env.tasks) == ["Wipe"] and cfg.env.kwargs.robot == "Sawyer"
    with pytest.raises(ConfigError, match="has no task 'Wype'"):
        load_config(["env=robosuite", "env.tasks=[Wype]"])


def test_wipe_with_a_sawyer_takes_the_configured_instruction_and_length():
    env = make("robosuite/Wipe", image_size=16, cameras=("agentview",), robot="Sawyer",
               instructions={"Wipe": ["wipe the table"]}, max_episode_steps=3)  # fmt: skip
    try:
        observation, _ = env.reset(seed=0)
        assert observation["instruction"] == "wipe the table" and env.env_spec.extra["robot"] == ["Sawyer"]
        assert env.env_spec.action_names == ("dx", "dy", "dz", "dax", "day", "daz")  # Wipe's gripper has no dof
        truncated = [env.step(np.zeros(6))[3] for _ in range(3)]
        assert truncated == [False, False, True]
    finally:
        env.close()


def test_two_arm_task_gets_both_arms_actions_and_states():
    env = make("robosuite/TwoArmLift", image_size=16, cameras=("agentview",))
    try:
        assert env.env_spec.extra["robot"] == ["Panda", "Panda"]
        names = env.env_spec.action_names
        assert len(names) == 14 and names[7:] == tuple(f"robot1_{n}" for n in names[:7])
        np.testing.assert_allclose(env.action_space.high[7:], env.action_space.high[:7])
        observation, _ = env.reset(seed=0)
        assert observation["state"].shape == (32,)  # per Panda: eef (3) + quat (4) + fingers (2) + joints (7)
        robots = env.robosuite_env.robots
        second_eef = env.data.site_xpos[robots[1].eef_site_id["right"]]
        np.testing.assert_allclose(observation["state"][16:19], second_eef, atol=1e-6)
        start = second_eef.copy()
        for _ in range(8):  # move only the second arm up
            observation, *_ = env.step(np.r_[np.zeros(7), [0.0, 0.0, 0.04, 0, 0, 0, 0]])
        first_moved = np.linalg.norm(observation["state"][:3] - env.data.site_xpos[robots[0].eef_site_id["right"]])
        assert observation["state"][18] - start[2] > 0.05 and first_moved < 1e-6
    finally:
        env.close()


def test_coarse_meshes_in_images_look_like_the_full_ones_and_leave_the_model_alone():
    full = make("robosuite/Lift", image_size=64)
    coarse = make("robosuite/Lift", image_size=64, mesh_cell=0.01)
    try:
        faces = coarse.model.mesh_face.copy()
        a, b = full.reset(seed=4)[0], coarse.reset(seed=4)[0]
        np.testing.assert_array_equal(coarse.model.mesh_face, faces)
        np.testing.assert_array_equal(a["state"], b["state"])
        for camera in a["images"]:
            difference = np.abs(a["images"][camera].astype(int) - b["images"][camera].astype(int)).max(-1)
            assert 0 < (difference > 40).mean() < 0.02, camera  # some edge pixels of the Panda change
    finally:
        full.close()
        coarse.close()


@pytest.mark.slow  # about 10-20 s a task on 2 busy cores; `vla-rl envs check robosuite --all-tasks` checks all
@pytest.mark.parametrize("task, robot", [("Wipe", "Panda"), ("TwoArmHandover", "Baxter"), ("ToolHang", "Panda")])
def test_other_environments_pass_the_conformance_kit(task, robot):
    passed: list[str] = []
    run_checks(lambda: make(f"robosuite/{task}", image_size=16, cameras=("agentview",), robot=robot),
               report=lambda r: passed.append(r.name) if r.passed else None)  # fmt: skip
    assert len(passed) == len(CHECKS)
