"""The LIBERO adapter: task names, official init states, state, images, skipping images, limits, install.

Skipped when LIBERO is not installed (``make libero`` installs it; CI runs these tests).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

try:
    import envs.libero  # noqa: F401
except ImportError as error:
    pytest.skip(f"LIBERO is not installed ({error}); `make libero` installs it", allow_module_level=True)

from scipy.spatial.transform import Rotation

from envs.libero import install
from envs.libero.env import make_libero_env, quat_to_axis_angle
from envs.libero.suites import MAX_EPISODE_STEPS, get_task, official_init_states, suite_tasks, task_ids
from envs.registry import make, registered

TASK = "libero_spatial/0"


@pytest.fixture(scope="module")
def env():
    """One env for the module: building a LIBERO scene takes seconds. Full meshes, as the image test
    compares with MuJoCo's own renderer (test_libero_mesh_default checks the default's coarser meshes)."""
    built = make_libero_env(task=TASK, image_size=64, settle_steps=0, mesh_cell=None)
    yield built
    built.close()


def test_suites_have_liberos_task_counts_and_names_resolve_like_indices():
    assert {suite: len(suite_tasks(suite)) for suite in MAX_EPISODE_STEPS} == {
        "libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90,
    }  # fmt: skip
    task = get_task("libero_object/3")
    assert get_task(f"libero_object/{task.name}") == task
    assert task.instruction == task.name.replace("_", " ")  # LIBERO derives the instruction from the name
    assert "libero_goal/0" in registered()["libero"].tasks and len(task_ids()) == 2 * 130
    with pytest.raises(ValueError, match="tasks 0..9"):
        get_task("libero_goal/10")
    with pytest.raises(ValueError, match="available: libero_spatial"):
        get_task("libero_nothing/0")


def test_official_init_state_is_restored_exactly(env):
    """Without settle steps the env starts at the init file's joint positions and velocities."""
    official = official_init_states(TASK)
    assert official.shape[0] == 50
    _, info = env.reset(options={"init_state": 7})
    model, data = env.model, env.data
    assert info["init_state"] == {"task": TASK, "index": 7}
    np.testing.assert_array_equal(data.qpos, official[7][1 : 1 + model.nq])  # [time, qpos, qvel]
    np.testing.assert_array_equal(data.qvel, official[7][1 + model.nq : 1 + model.nq + model.nv])
    with pytest.raises(ValueError, match="0..49"):
        env.reset(options={"init_state": 50})


def test_seeded_choice_and_returned_init_state_restore_the_same_start(env):
    first, info = env.reset(seed=11)
    again, info_again = env.reset(seed=11)
    assert info["init_state"] == info_again["init_state"]
    env.reset(seed=12)
    restored, _ = env.reset(options={"init_state": info["init_state"]})
    for observation in (again, restored):
        np.testing.assert_array_equal(observation["state"], first["state"])
        for camera in first["images"]:
            np.testing.assert_array_equal(observation["images"][camera], first["images"][camera])
    indices = {env.reset(seed=seed)[1]["init_state"]["index"] for seed in range(12)}
    assert len(indices) > 4  # a seeded choice among the 50, not always the same


def test_state_is_eef_position_axis_angle_and_fingers(env):
    observation, _ = env.reset(options={"init_state": 0})
    data, robot = env.data, env.libero_env.robots[0]
    hand = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, robot.robot_model.eef_name["right"])
    w, x, y, z = data.xquat[hand]
    rotvec = Rotation.from_quat([x, y, z, w] if w >= 0 else [-x, -y, -z, -w]).as_rotvec()
    state = observation["state"]
    np.testing.assert_allclose(state[:3], data.site_xpos[robot.eef_site_id["right"]], atol=1e-6)
    angle = np.linalg.norm(state[3:6])  # robosuite's convention may give the 2 pi - angle twin
    same = np.allclose(state[3:6], rotvec, atol=1e-5)
    twin = np.allclose(state[3:6] / angle * (2 * np.pi - angle), -rotvec, atol=1e-5)
    assert same or twin
    np.testing.assert_allclose(state[6:8], data.qpos[robot._ref_gripper_joint_pos_indexes["right"]], atol=1e-7)


def test_quat_to_axis_angle_matches_scipy():
    rng = np.random.default_rng(0)
    for quat in rng.normal(size=(20, 4)):
        quat = quat / np.linalg.norm(quat)
        quat = quat if quat[0] >= 0 else -quat
        expected = Rotation.from_quat(np.r_[quat[1:], quat[0]]).as_rotvec()
        np.testing.assert_allclose(quat_to_axis_angle(quat), expected, atol=1e-9)
    np.testing.assert_array_equal(quat_to_axis_angle(np.array([1.0, 0, 0, 0])), np.zeros(3))


def test_images_are_robosuites_turned_as_openpi_turns_them(env):
    """agentview equals mujoco.Renderer's upright image mirrored left-right (robosuite's rows and
    columns reversed), with collision geoms hidden and shadows/reflections off as the env renders."""
    observation, _ = env.reset(options={"init_state": 0})
    renderer = mujoco.Renderer(env.model, 64, 64)
    option = mujoco.MjvOption()
    option.geomgroup[0] = 0
    renderer.update_scene(env.data, "agentview", scene_option=option)
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
    upright = renderer.render()
    renderer.close()
    image = observation["images"]["agentview"]
    assert np.abs(image.astype(int) - upright[:, ::-1]).mean() < 1.0
    assert np.abs(image.astype(int) - upright).mean() > 5.0  # the mirror is not a no-op


def test_skipped_images_come_back_from_observe(env):
    actions = np.random.default_rng(0).uniform(-1, 1, size=(3, 7))
    env.reset(options={"init_state": 1})
    for action in actions:
        full, *_ = env.step(action)
    env.reset(options={"init_state": 1})
    env.skip_images = True
    try:
        for action in actions:
            skipped, *_ = env.step(action)
    finally:
        env.skip_images = False
    assert skipped["images"] == {}
    np.testing.assert_array_equal(skipped["state"], full["state"])
    observed = env.observe()
    for camera, image in full["images"].items():
        np.testing.assert_array_equal(observed["images"][camera], image)


def test_settle_steps_and_episode_limit():
    env = make("libero/libero_goal/0", image_size=32, cameras=("agentview",), max_episode_steps=3)
    try:
        assert env.env_spec.extra["settle_steps"] == 10 and env.env_spec.max_episode_steps == 3
        observation, _ = env.reset(options={"init_state": 0})
        official = official_init_states("libero_goal/0")[0]
        assert not np.array_equal(env.data.qpos, official[1 : 1 + env.model.nq])  # 10 no-op steps later
        assert env.data.time == pytest.approx(official[0] + 10 * 0.05)
        assert observation["instruction"] == get_task("libero_goal/0").instruction
        flags = [env.step(np.zeros(7))[3] for _ in range(3)]
        assert flags == [False, False, True]
    finally:
        env.close()
    assert MAX_EPISODE_STEPS["libero_spatial"] == 220 and MAX_EPISODE_STEPS["libero_10"] == 520


def test_install_writes_the_config_inside_the_environment_not_home(tmp_path, monkeypatch):
    monkeypatch.delenv(install.CONFIG_VARIABLE, raising=False)
    assert install.config_dir() == Path(sys.prefix) / "share" / "libero"
    assert not str(install.config_dir()).startswith(os.path.expanduser("~") + "/.libero")
    path = install.write_config(tmp_path / "cfg", install.libero_code_dir())
    lines = dict(line.split(": ", 1) for line in path.read_text().splitlines())
    assert set(lines) == {"assets", "bddl_files", "benchmark_root", "datasets", "init_states"}
    assert Path(lines["bddl_files"], "libero_spatial").is_dir() and Path(lines["assets"], "scenes").is_dir()
    assert install.link_assets().resolve() == install.assets_source_dir().resolve()  # idempotent


@pytest.mark.parametrize(
    ("task", "init_state"),
    [
        ("libero_object/0", 0),  # soup into the basket
        ("libero_spatial/4", 0),  # bowl out of the cabinet's drawer: the gripper turned a quarter
        ("libero_object/1", 1),  # cream cheese lying flat beside the tomato sauce: the gripper turned to clear it
        ("libero_spatial/1", 11),  # bowl beside the ramekin: gripped by its far wall
        ("libero_goal/2", 0),  # wine bottle onto the cabinet's top: a fixture's region (a site)
        ("libero_10/6", 0),  # a mug (gripped by its wall) onto the plate, then the pudding onto a table region
    ],
)
def test_scripted_expert_succeeds(task, init_state):
    from envs.experts import get_expert

    env = make_libero_env(task=task, image_size=32, cameras=("agentview",))
    try:
        env.reset(options={"init_state": init_state})
        expert = get_expert("libero", task, env)
        env.skip_images = True
        for _ in range(env.max_episode_steps):
            _, reward, terminated, truncated, info = env.step(expert.act())
            if terminated or truncated:
                break
        assert info["is_success"] and terminated and reward == 1.0
    finally:
        env.close()


def test_libero_experts_cover_the_listed_pick_and_place_tasks():
    from envs.experts.libero import libero_experts

    experts = libero_experts()
    indexed = {task for task in experts if task.rsplit("/", 1)[1].isdigit()}
    by_suite = {suite: sorted(int(t.rsplit("/", 1)[1]) for t in indexed if t.startswith(f"{suite}/")) for suite in
                ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")}  # fmt: skip
    assert by_suite == {"libero_spatial": list(range(10)), "libero_object": list(range(10)),
                        "libero_goal": [1, 2, 4, 6, 8], "libero_10": [0, 4, 6, 7], "libero_90": []}  # fmt: skip
    assert f"libero_goal/{get_task('libero_goal/8').name}" in experts  # by name as by index


def test_bench_env_takes_a_libero_task_with_its_suite(capsys):
    import json

    from vla_rl.cli import main

    assert main(["bench", "env", "--env", "libero", "--task", "libero_spatial/0", "--steps", "8", "--repeats", "1"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["env"], result["task"]) == ("libero", "libero_spatial/0")
    rates = result["steps_per_cpu_s"]
    assert rates["steps_per_s_no_camera"] > rates["steps_per_s_camera"] > 0
    assert rates["steps_per_s_camera_at_chunk_ends"] > rates["steps_per_s_camera"]
