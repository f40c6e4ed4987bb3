"""The robosuite adapter: instructions, upright images, init_state, seeding, actions, controllers."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest

from envs.registry import make
from envs.robosuite import ROBOSUITE_TASKS, TASKS


def _equal(first: dict, second: dict) -> bool:
    return (
        first["instruction"] == second["instruction"]
        and np.array_equal(first["state"], second["state"])
        and all(np.array_equal(first["images"][k], second["images"][k]) for k in first["images"])
    )


@pytest.mark.parametrize("task", ROBOSUITE_TASKS[:5])  # the tasks with written instructions
def test_init_state_restores_the_episode_exactly_after_a_json_round_trip(task):
    env = make(f"robosuite/{task}", image_size=24, cameras=("agentview",))
    try:
        actions = np.random.default_rng(0).uniform(env.action_space.low, env.action_space.high, size=(4, env.action_space.shape[0]))
        first, info = env.reset(seed=1)
        assert first["instruction"] in TASKS[task].instructions
        trajectory = [env.step(action)[0] for action in actions]
        other, other_info = env.reset(seed=2)
        assert not np.array_equal(other_info["init_state"]["physics"], info["init_state"]["physics"])
        init_state = json.loads(json.dumps(info["init_state"]))
        restored, restored_info = env.reset(seed=2, options={"init_state": init_state})
        assert _equal(first, restored) and not _equal(first, other)
        assert restored_info["init_state"] == info["init_state"]
        for expected, action in zip(trajectory, actions, strict=True):
            assert _equal(expected, env.step(action)[0])
    finally:
        env.close()


def test_instructions_are_seeded_and_vary_across_seeds():
    env = make("robosuite/Lift", image_size=16, cameras=("agentview",))
    try:
        seen = {seed: env.reset(seed=seed)[0]["instruction"] for seed in range(8)}
        assert set(seen.values()) <= set(TASKS["Lift"].instructions) and len(set(seen.values())) > 1
        assert env.reset(seed=5)[0]["instruction"] == seen[5]
    finally:
        env.close()


def _project(model: mujoco.MjModel, data: mujoco.MjData, camera: str, point: np.ndarray, size: int):
    """Pixel (row, col) of a world point in an upright image: the pinhole model of a MuJoCo camera."""
    camera_id = model.camera(camera).id
    rotation = data.cam_xmat[camera_id].reshape(3, 3)  # columns: camera x (right), y (up), z (backwards)
    x, y, z = rotation.T @ (point - data.cam_xpos[camera_id])
    focal = (size / 2) / np.tan(np.deg2rad(model.cam_fovy[camera_id]) / 2)
    return int(round(size / 2 - focal * y / -z)), int(round(size / 2 + focal * x / -z))


def test_images_are_upright_the_red_cube_is_where_the_camera_projects_it():
    size = 96
    env = make("robosuite/Lift", image_size=size, cameras=("agentview",))
    try:
        _, info = env.reset(seed=0)
        # Slide the cube 15 cm towards the camera (its free joint's x in the state vector, after
        # the time entry) so that it is far from the image's middle row, where a flip would show.
        init_state = dict(info["init_state"], physics=list(info["init_state"]["physics"]))
        qpos_address = env.model.joint(env.robosuite_env.cube.joints[0]).qposadr[0]
        init_state["physics"][1 + qpos_address] += 0.15
        observation, _ = env.reset(options={"init_state": init_state})
        cube = env.data.xpos[env.robosuite_env.cube_body_id]
        row, col = _project(env.model, env.data, "agentview", cube, size)
        assert abs(row - (size - 1 - row)) > 20, "the cube must be far from the middle row for this test"
        image = observation["images"]["agentview"].astype(int)

        def is_red(pixels: np.ndarray) -> bool:
            red, green, blue = pixels.reshape(-1, 3).mean(0)
            return bool(red > 1.5 * green and red > 1.5 * blue)

        assert is_red(image[row - 1 : row + 2, col - 1 : col + 2]), (row, col)
        assert not is_red(image[size - 2 - row : size + 1 - row, col - 1 : col + 2])  # where a flip puts it
    finally:
        env.close()


def test_several_envs_in_one_process_each_render_their_own_scene():
    lift = make("robosuite/Lift", image_size=24, cameras=("agentview",))
    door = make("robosuite/Door", image_size=24, cameras=("agentview",))
    try:
        alone = lift.reset(seed=3)[0]["images"]["agentview"]
        door_image = door.reset(seed=3)[0]["images"]["agentview"]
        again = lift.reset(seed=3)[0]["images"]["agentview"]  # rendered right after the door env rendered
        assert np.array_equal(alone, again) and not np.array_equal(alone, door_image)
    finally:
        lift.close()
        door.close()


def test_actions_are_in_robot_units_and_move_the_gripper_by_them():
    env = make("robosuite/Lift", image_size=16, cameras=("agentview",))
    try:
        assert env.env_spec.action_names == ("dx", "dy", "dz", "dax", "day", "daz", "gripper")
        np.testing.assert_allclose(env.action_space.high, [0.05, 0.05, 0.05, 0.5, 0.5, 0.5, 1.0])
        np.testing.assert_allclose(env.scaling.to_robosuite(env.action_space.high), np.ones(7))
        np.testing.assert_allclose(env.scaling.to_robosuite(np.array([0.025, 0, 0, -0.25, 0, 0, 0])),
                                   [0.5, 0, 0, -0.5, 0, 0, 0], atol=1e-12)  # fmt: skip
        observation, _ = env.reset(seed=0)
        start = observation["state"][:3].copy()
        for _ in range(10):
            observation, *_ = env.step(np.array([0.0, 0.03, 0.0, 0, 0, 0, -1.0]))
        moved = observation["state"][:3] - start
        assert moved[1] > 0.05 and abs(moved[0]) < 0.01 and abs(moved[2]) < 0.01, moved
        assert observation["state"].shape == (16,) and env.env_spec.state_dim == 16
    finally:
        env.close()


def test_controller_is_configurable_and_errors_name_the_choices():
    env = make("robosuite/Lift", image_size=16, cameras=("agentview",), controller="OSC_POSITION")
    try:
        assert env.env_spec.action_names == ("dx", "dy", "dz", "gripper")
        np.testing.assert_allclose(env.action_space.high, [0.05, 0.05, 0.05, 1.0])
    finally:
        env.close()
    with pytest.raises(ValueError, match="unknown controller 'OSC'; give one of OSC_POSE"):
        make("robosuite/Lift", controller="OSC")
    with pytest.raises(ValueError, match=r"unknown camera\(s\) \['front'\].*agentview"):
        make("robosuite/Lift", cameras=("front",))
    with pytest.raises(ValueError, match="init_state must be a dict"):
        env = make("robosuite/Lift", image_size=16, cameras=("agentview",))
        try:
            env.reset(options={"init_state": [1.0, 2.0]})
        finally:
            env.close()
