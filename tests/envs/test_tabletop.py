"""The built-in tabletop env: determinism, init_state round trip, rendering, errors, tasks."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import imageio.v3 as iio
import mujoco
import numpy as np
import pytest

from envs.base import InvalidActionError
from envs.builtin import arm
from envs.builtin.scene import PALETTE
from envs.builtin.tabletop import WORKSPACE_HIGH, WORKSPACE_LOW, make_tabletop_env
from envs.builtin.tasks import TASKS

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture(scope="module")
def camera_env():
    env = make_tabletop_env(task="place_in_bowl", image_size=64)
    yield env
    env.close()


@pytest.fixture(scope="module")
def state_env():
    env = make_tabletop_env(task="reach", cameras=())
    yield env
    env.close()


def _rollout(env, seed, task, num_steps=8):
    obs, info = env.reset(seed=seed, options={"task": task})
    rng = np.random.default_rng(123)
    frames = [obs]
    for _ in range(num_steps):
        obs, *_ = env.step(rng.uniform(env.action_space.low, env.action_space.high))
        frames.append(obs)
    return info, frames


def _assert_same(frames_a, frames_b):
    for a, b in zip(frames_a, frames_b, strict=True):
        assert a["instruction"] == b["instruction"]
        np.testing.assert_array_equal(a["state"], b["state"])
        assert a["images"].keys() == b["images"].keys()
        for name in a["images"]:
            np.testing.assert_array_equal(a["images"][name], b["images"][name])


def test_same_seed_gives_bit_identical_observations(camera_env):
    info_a, frames_a = _rollout(camera_env, seed=7, task="stack")
    info_b, frames_b = _rollout(camera_env, seed=7, task="stack")
    _assert_same(frames_a, frames_b)
    assert info_a["init_state"] == info_b["init_state"]
    _, frames_c = _rollout(camera_env, seed=8, task="stack")
    assert not np.array_equal(frames_a[0]["images"]["front"], frames_c[0]["images"]["front"])


def test_init_state_round_trip_restores_the_scene(camera_env):
    info, frames = _rollout(camera_env, seed=11, task="push")
    init_state = pickle.loads(pickle.dumps(info["init_state"]))  # what travels between processes
    obs, restored_info = camera_env.reset(seed=999, options={"init_state": init_state})
    rng = np.random.default_rng(123)
    restored = [obs]
    for _ in range(8):
        obs, *_ = camera_env.step(rng.uniform(camera_env.action_space.low, camera_env.action_space.high))
        restored.append(obs)
    _assert_same(frames, restored)
    assert restored_info["init_state"] == info["init_state"]
    assert restored_info["task"] == "push"


def test_init_state_errors_name_the_problem(state_env):
    _, info = state_env.reset(seed=0, options={"task": "lift"})
    broken = dict(info["init_state"])
    del broken["bowl_position"]
    with pytest.raises(ValueError, match="bowl_position"):
        state_env.reset(options={"init_state": broken})
    with pytest.raises(ValueError, match="contradicts"):
        state_env.reset(options={"init_state": info["init_state"], "task": "stack"})


def test_unknown_task_lists_the_tasks(state_env):
    with pytest.raises(ValueError, match="available tasks: reach, push, lift"):
        state_env.reset(seed=0, options={"task": "juggle"})
    assert len(TASKS) >= 6


@pytest.mark.parametrize("task", list(TASKS))
def test_instruction_names_the_target_colours(state_env, task):
    for seed in range(3):
        obs, info = state_env.reset(seed=seed, options={"task": task})
        target = info["init_state"]["target"]
        assert info["task"] == task and state_env.env_spec.task == task
        assert target and all(colour in PALETTE for colour in target.values())
        for colour in target.values():
            assert colour in obs["instruction"]
        assert state_env.observation_space.contains(obs)
        assert not info["is_success"]


def test_bad_actions_raise_and_out_of_bounds_actions_are_clipped(state_env):
    state_env.reset(seed=0, options={"task": "reach"})
    with pytest.raises(InvalidActionError, match="NaN"):
        state_env.step(np.array([0.0, np.nan, 0.0, 0.0]))
    with pytest.raises(InvalidActionError, match=r"expected \(4,\)"):
        state_env.step(np.zeros(5))
    start = state_env.ee_target
    state_env.step(np.array([1.0, 0.0, 0.0, 0.0]))  # 1 m per step: clipped to 5 cm
    np.testing.assert_allclose(state_env.ee_target - start, [0.05, 0.0, 0.0], atol=1e-12)
    for _ in range(30):
        state_env.step(np.array([0.05, 0.05, -0.05, 0.0]))
    np.testing.assert_allclose(state_env.ee_target, [WORKSPACE_HIGH[0], WORKSPACE_HIGH[1], WORKSPACE_LOW[2]])


def test_arm_tracks_the_target_and_state_reports_it(state_env):
    obs, _ = state_env.reset(seed=3, options={"task": "reach"})
    np.testing.assert_allclose(obs["state"][:3], state_env.ee_position, atol=1e-6)
    for _ in range(6):
        obs, *_ = state_env.step(np.array([0.0, 0.03, -0.02, -1.0]))
    for _ in range(3):
        obs, *_ = state_env.step(np.array([0.0, 0.0, 0.0, -1.0]))
    assert np.linalg.norm(state_env.ee_position - state_env.ee_target) < 0.005
    assert obs["state"][5] == pytest.approx(0.09, abs=0.002)  # open gripper: 2 x 4.5 cm
    assert obs["state"][3:5] == pytest.approx([0.0, 1.0], abs=0.02)  # yaw 0: sin, cos


def test_inverse_kinematics_matches_mujoco_forward_kinematics():
    model = mujoco.MjModel.from_xml_path(
        str(Path(arm.__file__).resolve().parents[2] / "assets/tabletop/scene.xml")
    )
    data = mujoco.MjData(model)
    addresses = [model.jnt_qposadr[model.joint(name).id] for name in arm.ARM_JOINTS]
    rng = np.random.default_rng(0)
    for _ in range(20):
        target = rng.uniform(WORKSPACE_LOW, WORKSPACE_HIGH)
        yaw = rng.uniform(-1.0, 1.0)
        data.qpos[addresses] = arm.solve_ik(target, yaw)
        mujoco.mj_kinematics(model, data)
        site = model.site("grip").id
        np.testing.assert_allclose(data.site_xpos[site], target, atol=1e-9)
        rotation = data.site_xmat[site].reshape(3, 3)
        np.testing.assert_allclose(rotation[:, 2], [0.0, 0.0, -1.0], atol=1e-9)  # pointing down
        np.testing.assert_allclose(rotation[:2, 1], [-np.sin(yaw), np.cos(yaw)], atol=1e-9)  # finger axis


def test_moving_a_block_changes_the_front_image_where_the_block_is(camera_env):
    obs, _ = camera_env.reset(seed=5, options={"task": "lift"})
    before = obs["images"]["front"]
    assert before.dtype == np.uint8 and before.shape == (64, 64, 3)
    colour = camera_env.task_target["block"]
    scene = camera_env.scene
    index = scene.block_index(colour)
    address = scene.block_qpos_addr[index]
    old_position = scene.block_position(colour)
    camera_env.data.qpos[address : address + 3] = [0.45, -0.25, 0.25]  # lift it into the air
    mujoco.mj_forward(camera_env.model, camera_env.data)
    after = camera_env._renderer.render(camera_env.data, "front")
    changed = np.abs(after.astype(int) - before.astype(int)).sum(axis=2) > 30
    assert changed.sum() > 3
    rows, cols = np.nonzero(changed)
    # project the old and new block centres into the front camera: changed pixels lie near them
    expected = [_project(camera_env, "front", p, 64) for p in (old_position, np.array([0.45, -0.25, 0.25]))]
    for row, col in zip(rows, cols, strict=True):
        distance = min(np.hypot(row - r, col - c) for r, c in expected)
        assert distance < 8, f"pixel ({row}, {col}) changed far from the block ({expected})"


def _project(env, camera: str, point: np.ndarray, size: int) -> tuple[float, float]:
    """Pixel (row, col) of a world point in a square image, pinhole model of the MuJoCo camera."""
    cam = env.model.camera(camera).id
    position = env.data.cam_xpos[cam]
    rotation = env.data.cam_xmat[cam].reshape(3, 3)  # columns: camera x (right), y (up), z (back)
    local = rotation.T @ (point - position)
    focal = (size / 2) / np.tan(np.deg2rad(env.model.cam_fovy[cam]) / 2)
    col = size / 2 + focal * local[0] / -local[2]
    row = size / 2 - focal * local[1] / -local[2]
    return row, col


def test_cameras_differ_and_pictures_are_saved(camera_env):
    big = make_tabletop_env(task="place_in_bowl", image_size=(96, 128), render_mode="rgb_array")
    try:
        obs, _ = big.reset(seed=2)
        front, wrist = obs["images"]["front"], obs["images"]["wrist"]
        assert front.shape == wrist.shape == (96, 128, 3)
        assert np.abs(front.astype(int) - wrist.astype(int)).mean() > 20
        np.testing.assert_array_equal(big.render(), front)
        # the fingers frame the wrist view: dark finger pixels at the left and right edges of the bottom rows
        bottom = wrist[-10:].astype(int).sum(axis=2)
        assert bottom[:, :10].min() < 150 and bottom[:, -10:].min() < 150
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for name, image in obs["images"].items():
            iio.imwrite(ARTIFACTS / f"tabletop_{name}.png", image)
            assert (ARTIFACTS / f"tabletop_{name}.png").stat().st_size > 0
    finally:
        big.close()
    no_camera = make_tabletop_env(cameras=())
    obs, _ = no_camera.reset(seed=0)
    assert obs["images"] == {}
    no_camera.close()


def test_missing_asset_file_names_its_full_path(tmp_path, monkeypatch):
    source = Path(arm.__file__).resolve().parents[2] / "assets" / "tabletop"
    shutil.copytree(source, tmp_path / "tabletop")
    (tmp_path / "tabletop" / "robot.xml").unlink()
    monkeypatch.setenv("VLA_RL_ASSETS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "tabletop" / "robot.xml")):
        make_tabletop_env(cameras=())


def test_success_terminates_with_sparse_reward_and_truncation_at_the_limit(state_env):
    obs, info = state_env.reset(seed=4, options={"task": "reach"})
    goal = state_env.scene.block_position(state_env.task_target["block"]) + [0.0, 0.0, 0.05]
    for _ in range(state_env.max_episode_steps):
        delta = np.clip(goal - state_env.ee_target, -0.05, 0.05)
        obs, reward, terminated, truncated, info = state_env.step(np.append(delta, -1.0))
        distance = np.linalg.norm(state_env.ee_position - goal)
        assert terminated == (distance < 0.03) == info["is_success"]
        assert reward == (1.0 if terminated else 0.0)
        if terminated:
            break
    assert terminated
    state_env.reset(seed=4, options={"task": "reach"})
    for step in range(state_env.max_episode_steps):
        *_, terminated, truncated, _ = state_env.step(np.array([0.0, 0.0, 0.05, -1.0]))  # straight up
        assert truncated == (step == state_env.max_episode_steps - 1)
    dense = make_tabletop_env(task="reach", cameras=(), dense_reward=True, max_episode_steps=5)
    dense.reset(seed=4)
    scene, target = dense.scene, dense.task_target
    start = dense.task.progress(scene, target)
    total = 0.0
    for _ in range(5):  # potential-based shaping: the shaped rewards telescope to the change of progress
        _, reward, terminated, truncated, info = dense.step(np.array([0.02, 0.0, -0.02, -1.0]))
        total += reward - float(info["is_success"])
        if terminated or truncated:
            break
    assert dense.task.progress(scene, target) != start
    assert total == pytest.approx(0.5 * (dense.task.progress(scene, target) - start), abs=1e-9)
    assert dense.max_episode_steps == 5
    dense.close()


def test_block_colors_fix_the_three_blocks_and_keep_other_colours_apart():
    env = make_tabletop_env(task="lift", cameras=(), block_colors=("red", "green", "blue"))
    seen_targets = set()
    for seed in range(30):
        _, info = env.reset(seed=seed)
        layout = info["init_state"]
        assert sorted(layout["block_colors"]) == ["blue", "green", "red"]
        others = [*layout["zone_colors"], layout["drawer_color"]]
        assert len(set(others)) == len(others) and not set(others) & {"red", "green", "blue"}
        assert layout["target"]["block"] in layout["instruction"]
        seen_targets.add(layout["target"]["block"])
    assert seen_targets == {"red", "green", "blue"}
    env.close()


@pytest.mark.parametrize(
    ("colors", "message"),
    [(("red", "green", "pink"), "unknown colour"), (("red", "green"), "at least 3"), (("red",) * 3, "distinct")],
)
def test_bad_block_colors_name_the_problem(colors, message):
    with pytest.raises(ValueError, match=message):
        make_tabletop_env(task="reach", cameras=(), block_colors=colors)
