"""The MetaWorld suite (envs/metaworld/): task lists, conformance, exact init-state restore, success from
MetaWorld's own flag, actions in metres, upright images, soft resets without leaks, the scripted experts."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pytest
from omegaconf import OmegaConf

from envs.base import INSTRUCTION_CHARSET
from envs.checks import CHECKS, run_checks
from envs.metaworld.tasks import INSTRUCTIONS, METAWORLD_TASKS, MT10_TASKS
from envs.registry import make
from vla_rl.config.loading import config_dir

needs_metaworld = pytest.mark.skipif(
    importlib.util.find_spec("metaworld") is None, reason="metaworld is not installed (pip install --no-deps metaworld==3.1.1; make venv does)"
)


def _equal(first: dict, second: dict) -> bool:
    return (
        first["instruction"] == second["instruction"]
        and np.array_equal(first["state"], second["state"])
        and set(first["images"]) == set(second["images"])
        and all(np.array_equal(first["images"][k], second["images"][k]) for k in first["images"])
    )


def test_instructions_are_one_per_task_in_the_allowed_characters():
    assert len(METAWORLD_TASKS) == 50 and len(set(METAWORLD_TASKS)) == 50
    for task, instruction in INSTRUCTIONS.items():
        assert instruction and set(instruction) <= INSTRUCTION_CHARSET, task
    assert len(set(INSTRUCTIONS.values())) == 50, "two tasks share an instruction"


def test_mt10_config_lists_the_mt10_tasks_and_mt50_all():
    mt10 = OmegaConf.load(config_dir() / "env" / "metaworld_mt10.yaml")
    assert tuple(mt10.tasks) == MT10_TASKS
    assert OmegaConf.load(config_dir() / "env" / "metaworld_mt50.yaml").tasks == "all"


def test_observe_goal_is_off_and_unlisted_so_earlier_data_folders_keep_their_settings(tmp_path):
    """A data folder records its env kwargs; listing ``observe_goal: false`` in the env file would make every
    folder collected before the option existed differ from the run's settings and be refused."""
    from vla_rl.config import env_kwargs
    from vla_rl.config.loading import load_config
    from vla_rl.stages.collect import check_collection_settings

    kwargs = env_kwargs(load_config(["env=metaworld_mt10", "run_dir=x"]).env)
    assert "observe_goal" not in kwargs and "variations_seed" not in kwargs
    earlier = json.loads(json.dumps({"env_id": "metaworld", "env_kwargs": kwargs, "noise_std": 0.0}))
    (tmp_path / "collection.json").write_text(json.dumps(earlier))
    check_collection_settings(tmp_path, "metaworld", kwargs, 0.0)  # the same folder, reused
    with pytest.raises(ValueError, match="observe_goal"):
        check_collection_settings(tmp_path, "metaworld", {**kwargs, "observe_goal": True}, 0.0)
    with pytest.raises(ValueError, match="variations_seed"):
        check_collection_settings(tmp_path, "metaworld", {**kwargs, "variations_seed": 0}, 0.0)


def test_a_missing_metaworld_names_the_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "metaworld", None)  # `import metaworld...` now raises ImportError
    monkeypatch.setitem(sys.modules, "metaworld.env_dict", None)
    with pytest.raises(ImportError, match=r"pip install --no-deps metaworld==3\.1\.1"):
        make("metaworld/reach-v3")


@needs_metaworld
def test_task_names_are_metaworlds_own():
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS, MT10_V3

    assert METAWORLD_TASKS == tuple(ALL_V3_ENVIRONMENTS)
    assert MT10_TASKS == tuple(MT10_V3)


@needs_metaworld
def test_reach_with_both_cameras_passes_the_conformance_kit():
    passed: list[str] = []
    run_checks(lambda: make("metaworld/reach-v3", image_size=32), report=lambda r: passed.append(r.name) if r.passed else None)
    assert passed == ["spec", "observation", "gymnasium", "determinism", "success", "reset-options", "json", "bad-action"]


@needs_metaworld
@pytest.mark.slow  # about 15 s a task on 2 busy cores; `vla-rl envs check metaworld --all-tasks` checks all 50
@pytest.mark.parametrize("task", ["pick-place-v3", "door-open-v3", "peg-insert-side-v3"])
def test_other_tasks_pass_the_conformance_kit(task):
    passed: list[str] = []
    run_checks(lambda: make(f"metaworld/{task}", image_size=16), report=lambda r: passed.append(r.name) if r.passed else None)
    assert len(passed) == len(CHECKS)


@needs_metaworld
def test_init_state_restores_the_episode_exactly_after_a_json_round_trip():
    env = make("metaworld/pick-place-v3", image_size=24)
    try:
        actions = np.random.default_rng(0).uniform(env.action_space.low, env.action_space.high, size=(6, 4))
        first, info = env.reset(seed=1)
        assert first["instruction"] == INSTRUCTIONS["pick-place-v3"]
        trajectory = [env.step(action)[0] for action in actions]
        other, other_info = env.reset(seed=2)
        assert other_info["init_state"]["rand_vec"] != info["init_state"]["rand_vec"]
        restored, restored_info = env.reset(seed=2, options={"init_state": json.loads(json.dumps(info["init_state"]))})
        assert _equal(first, restored) and not _equal(first, other)
        assert restored_info["init_state"] == info["init_state"]
        # MetaWorld's goal (which decides success) follows the restored placement, not the seed-2 episode.
        np.testing.assert_array_equal(env.metaworld_env._target_pos, info["init_state"]["rand_vec"][-3:])
        for expected, action in zip(trajectory, actions, strict=True):
            assert _equal(expected, env.step(action)[0])
        with pytest.raises(ValueError, match="init_state must be a dict"):
            env.reset(options={"init_state": [1.0]})
    finally:
        env.close()


@needs_metaworld
def test_actions_move_the_hand_target_by_metres_and_success_is_metaworlds_reach_distance():
    env = make("metaworld/reach-v3", image_size=16, cameras=("corner",))
    try:
        assert env.env_spec.action_names == ("dx", "dy", "dz", "gripper")
        np.testing.assert_allclose(env.action_space.high, [0.01, 0.01, 0.01, 1.0])
        env.reset(seed=0)
        mocap = env.data.mocap_pos[0].copy()
        env.step(np.array([0.004, -0.002, 0.0, 0.0]))
        np.testing.assert_allclose(env.data.mocap_pos[0] - mocap, [0.004, -0.002, 0.0], atol=1e-9)
        # Drive the hand at the goal: success exactly when MetaWorld's tcp-to-goal distance is within 5 cm.
        observation, _ = env.reset(seed=3)
        inner = env.metaworld_env
        for _ in range(env.max_episode_steps):
            delta = np.clip(inner._target_pos - inner.tcp_center, -0.01, 0.01)
            observation, reward, terminated, truncated, info = env.step(np.append(delta, 0.0))
            distance = np.linalg.norm(inner.tcp_center - inner._target_pos)
            assert info["is_success"] == bool(distance <= 0.05) == terminated
            assert reward == float(terminated)
            if terminated or truncated:
                break
        assert terminated and observation["state"].dtype == np.float32
    finally:
        env.close()


@needs_metaworld
@pytest.mark.parametrize("task", ["reach-v3", "push-v3"])
def test_observe_goal_appends_the_goal_metaworld_scores_against(task):
    env = make(f"metaworld/{task}", image_size=16, cameras=("corner",), observe_goal=True)
    plain = make(f"metaworld/{task}", image_size=16, cameras=("corner",))
    try:
        assert env.env_spec.state_dim == 7 and env.observation_space["state"].shape == (7,)
        assert plain.env_spec.state_dim == 4
        goals = []
        for seed in (0, 1):
            observation, _ = env.reset(seed=seed)
            plain_observation, _ = plain.reset(seed=seed)
            for _ in range(3):
                np.testing.assert_array_equal(observation["state"][:4], plain_observation["state"])
                np.testing.assert_allclose(observation["state"][4:], env.metaworld_env._target_pos, atol=1e-6)
                action = np.array([0.01, -0.01, 0.005, 1.0])
                observation = env.step(action)[0]
                plain_observation = plain.step(action)[0]
            goals.append(observation["state"][4:])
        assert not np.allclose(goals[0], goals[1])  # the goal moves with the placement, the state follows it
    finally:
        env.close()
        plain.close()
    run_checks(lambda: make(f"metaworld/{task}", image_size=16, cameras=("corner",), observe_goal=True))


@needs_metaworld
def test_variations_seed_draws_placements_from_metaworlds_mt1_list_as_its_own_env_sets_them():
    import metaworld

    from envs.metaworld.variations import mt1_variations

    table = mt1_variations("reach-v3", 0)
    assert table.shape == (50, 6) and len(np.unique(table, axis=0)) == 50
    assert not np.array_equal(table, mt1_variations("reach-v3", 1))
    env = make("metaworld/reach-v3", image_size=16, cameras=("corner",), variations_seed=0)
    try:
        drawn = []
        for seed in range(60):
            _, info = env.reset(seed=seed)
            (match,) = np.flatnonzero((table == np.array(info["init_state"]["rand_vec"])).all(axis=1))
            drawn.append(int(match))
        assert len(set(drawn)) > 25  # 60 draws among 50 show about 35 of them
        # The variation of seed 5 is the one MetaWorld's own env is set to with that Task: the same observation.
        benchmark = metaworld.MT1("reach-v3", seed=0)
        official = benchmark.train_classes["reach-v3"]()
        official.set_task(benchmark.train_tasks[drawn[5]])
        expected, _ = official.reset()
        official.close()
        env.reset(seed=5)
        np.testing.assert_array_equal(env.metaworld_observation, expected)
        np.testing.assert_array_equal(env.metaworld_env._target_pos, table[drawn[5]][-3:])
    finally:
        env.close()
    with pytest.raises(ValueError, match="variations_seed"):
        make("metaworld/reach-v3", variations_seed="zero")
    run_checks(lambda: make("metaworld/reach-v3", image_size=16, cameras=("corner",), variations_seed=0))


@needs_metaworld
def test_dense_reward_is_success_plus_the_change_of_metaworlds_shaped_reward():
    """reward_t = success_t + 0.5 (shaped_t - shaped_{t-1}) / 10, shaped recomputed by MetaWorld's own
    compute_reward; the first step's shaping is 0, so an episode's rewards sum to its success plus the
    telescoped difference, and the dense env's episode is the sparse env's step for step."""
    from envs.metaworld.env import DENSE_REWARD_SCALE, SHAPED_REWARD_MAX

    dense = make("metaworld/reach-v3", cameras=(), dense_reward=True)
    sparse = make("metaworld/reach-v3", cameras=())
    try:
        dense.reset(seed=3)
        sparse.reset(seed=3)
        inner = dense.metaworld_env
        shaped, rewards = [], []
        for _ in range(dense.max_episode_steps):
            action = np.append(np.clip(inner._target_pos - inner.tcp_center, -0.01, 0.01) * 0.5, 0.0)
            _, reward, terminated, truncated, _ = dense.step(action)
            _, sparse_reward, sparse_terminated, _, _ = sparse.step(action)
            native_action = (action * dense._native_scale).astype(np.float32)
            shaped.append(float(inner.compute_reward(native_action, dense._last_obs)[0]) / SHAPED_REWARD_MAX)
            expected = sparse_reward + (DENSE_REWARD_SCALE * (shaped[-1] - shaped[-2]) if len(shaped) > 1 else 0.0)
            assert reward == pytest.approx(expected, abs=1e-9)
            assert terminated == sparse_terminated
            rewards.append(reward)
            if terminated or truncated:
                break
        assert terminated and len(rewards) > 5 and shaped[-1] > shaped[0]  # the hand came closer: progress
        assert sum(rewards) == pytest.approx(1.0 + DENSE_REWARD_SCALE * (shaped[-1] - shaped[0]), abs=1e-9)
    finally:
        dense.close()
        sparse.close()


def _project(model, data, camera: str, point: np.ndarray, size: int) -> tuple[int, int]:
    """Pixel (row, col) of a world point in the camera's own image (its y axis up): the pinhole model."""
    camera_id = model.camera(camera).id
    rotation = data.cam_xmat[camera_id].reshape(3, 3)
    x, y, z = rotation.T @ (point - data.cam_xpos[camera_id])
    focal = (size / 2) / np.tan(np.deg2rad(model.cam_fovy[camera_id]) / 2)
    return int(round(size / 2 - focal * y / -z)), int(round(size / 2 + focal * x / -z))


@needs_metaworld
def test_corner_image_is_turned_upright_the_goal_is_where_the_turned_camera_projects_it():
    size = 96
    env = make("metaworld/reach-v3", image_size=size, cameras=("corner",), mesh_cell=None)
    try:
        env.reset(seed=1)
        camera_up = env.data.cam_xmat[env.model.camera("corner").id].reshape(3, 3)[:, 1]
        assert camera_up[2] < 0, "MetaWorld's corner camera looks at the table upside down"
        row, col = _project(env.model, env.data, "corner", env.data.site("goal").xpos.copy(), size)
        turned = np.array([size - 1 - row, size - 1 - col])  # where world-up points up in the image
        assert np.abs(turned - [row, col]).max() > 10, "the goal must be far from the middle for this test"
        with_goal = env.observe()["images"]["corner"].astype(int)
        env.model.site("goal").rgba[3] = 0.0  # hide the goal: the pixels that change are the goal's
        without_goal = env.observe()["images"]["corner"].astype(int)
        rows, cols = np.nonzero(np.abs(with_goal - without_goal).max(-1) > 30)
        assert len(rows) > 0
        np.testing.assert_allclose([rows.mean(), cols.mean()], turned, atol=2.5)
    finally:
        env.close()


@needs_metaworld
def test_coarse_meshes_look_like_the_full_ones_and_leave_the_model_alone():
    full = make("metaworld/pick-place-v3", image_size=64, mesh_cell=None)
    coarse = make("metaworld/pick-place-v3", image_size=64)
    try:
        faces = coarse.model.mesh_face.copy()
        a, _ = full.reset(seed=4)
        b, _ = coarse.reset(seed=4)
        np.testing.assert_array_equal(coarse.model.mesh_face, faces)
        np.testing.assert_array_equal(coarse.data.qpos, full.data.qpos)
        for camera in a["images"]:
            difference = np.abs(a["images"][camera].astype(int) - b["images"][camera].astype(int)).max(-1)
            assert (difference > 40).mean() < 0.03, camera  # a few edge pixels of the arm
    finally:
        full.close()
        coarse.close()


@needs_metaworld
def test_soft_resets_and_chunk_end_images_do_not_leak_memory():
    psutil = pytest.importorskip("psutil")
    env = make("metaworld/push-v3", image_size=32)
    try:
        env.reset(seed=0)
        process = psutil.Process()

        def episodes(count: int) -> None:
            for seed in range(count):
                env.reset(seed=seed)
                for step in range(8):
                    env.unwrapped.skip_images = step % 4 != 3
                    env.step(env.action_space.sample())
                env.unwrapped.skip_images = False
                env.observe()

        episodes(10)
        before = process.memory_info().rss
        episodes(60)  # a reset simulates 500 MuJoCo steps (MetaWorld settles the hand twice)
        assert process.memory_info().rss - before < 8 * 2**20
    finally:
        env.close()


@needs_metaworld
@pytest.mark.parametrize("task", ["pick-place-v3", "drawer-open-v3"])
def test_metaworlds_scripted_policy_is_the_expert_and_succeeds(task):
    from envs.experts import get_expert

    env = make(f"metaworld/{task}", cameras=())
    try:
        expert = get_expert("metaworld", task, env, noise_std=0.0, seed=0)
        for seed in range(3):
            observation, _ = env.reset(seed=seed)
            expert.reset(seed=seed)
            for _ in range(env.max_episode_steps):
                action = expert.act(observation)
                assert env.action_space.contains(action)
                observation, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            assert info["is_success"], (task, seed)
    finally:
        env.close()
