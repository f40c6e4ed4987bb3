"""The second example env, not a tabletop: a differential-drive rover with velocity commands in its own
units (an asymmetric Box beyond [-1, 1]) and one overhead camera. It plugs in by import path and its own
config folder, passes the conformance kit, and trains end to end with a named experiment."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import policies  # noqa: F401  (before any rendering in this process: see docs/platform.md)
from envs.experts import get_expert
from envs.registry import make, registered
from vla_rl.cli import main

ENV_ID = "rover_nav.env:make"
CONFIGS = str(Path(__file__).resolve().parents[2] / "examples" / "rover_nav" / "rover_nav" / "configs")


def test_the_conformance_kit_passes_for_every_task(capsys):
    assert main(["envs", "check", ENV_ID, "--all-tasks"]) == 0
    out = capsys.readouterr().out
    assert f"{ENV_ID}/go_to_red" in out and f"{ENV_ID}/go_to_blue" in out and "all checks passed" in out
    assert "rover_nav" not in registered()


def test_commands_are_in_robot_units_and_the_expert_reaches_the_named_pad():
    env = make(f"{ENV_ID}/go_to_red", image_size=16)
    _, info = env.reset(seed=0)
    start = dict(info["init_state"], rover=[0.0, 0.0, np.pi / 2])  # at the centre, facing +y
    env.reset(options={"init_state": start})
    for _ in range(10):  # 1 s at 0.3 m/s, forward = +y: 0.3 m less the servo's lag
        observation, *_ = env.step(np.array([0.3, 0.0]))
    np.testing.assert_allclose(env.pose, [0.0, 0.285, np.pi / 2], atol=2e-3)
    np.testing.assert_allclose(observation["state"][4], 0.3, atol=1e-3)  # forward speed, odometry
    env.reset(options={"init_state": start})
    for _ in range(10):  # reversing is capped at 0.1 m/s
        env.step(np.array([-0.5, 0.0]))
    np.testing.assert_allclose(env.pose, [0.0, -0.095, np.pi / 2], atol=2e-3)
    env.reset(options={"init_state": start})
    for _ in range(10):  # the turn rate is rad/s, counter-clockwise
        env.step(np.array([0.0, 1.0]))
    np.testing.assert_allclose(env.pose, [0.0, 0.0, np.pi / 2 + 0.95], atol=2e-3)
    for task in ("go_to_red", "go_to_blue"):
        expert = get_expert(ENV_ID, task, env, noise_std=0.02, seed=0)  # found through the factory
        for seed in range(6):
            observation, info = env.reset(seed=seed, options={"task": task})
            expert.reset(seed=seed)
            for _ in range(env.env_spec.max_episode_steps):
                observation, reward, terminated, truncated, info = env.step(expert.act(observation))
                if terminated or truncated:
                    break
            assert info["is_success"] and reward == 1.0 and env.distance_to_target() < 0.08, (task, seed)
            other = "blue" if task == "go_to_red" else "red"
            assert np.linalg.norm(env.pose[:2] - info_pad(env, other)) > 0.08  # it went to the named pad
    env.close()


def info_pad(env, colour: str) -> np.ndarray:
    return env.model.site_pos[env.model.site(f"{colour}_pad").id, :2]


def test_a_named_experiment_trains_it_end_to_end(ray_session, tmp_path, capsys):
    """collect -> SFT -> residual PPO -> eval with videos, with flow_residual_ppo unchanged: its tabletop
    defaults are replaced by the rover's env file, and the rollout window follows the rover's 60-step episodes."""
    run_dir = tmp_path / "run"
    code = main([
        "train", "--config-dir", CONFIGS, "env=rover_nav", "experiment=flow_residual_ppo", "env.kwargs.image_size=32",
        f"run_dir={run_dir}", f"collect.output={tmp_path / 'demos'}", "collect.episodes_per_task=2",
        "sft.max_steps=4", "sft.valid_every=4", "sft.show_progress=false",
        "trainer.iterations=1", "trainer.envs_per_stage=2", "trainer.trackers=[jsonl]", "trainer.checkpoint_every=1",
        "algo.update.epochs=1", "algo.update.num_minibatches=2", "policy.embedding_dim=64", "policy.value.hidden_dims=[32]",
        "+policy.head.options.base.options.hidden_dim=64", "+policy.head.options.base.options.num_blocks=1",
        "eval.episodes_per_task=1", "eval.num_envs=2", "eval.trackers=[]", "eval.video.grid_envs=0",
    ])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "[rl] trainer.rollout_steps=15: the longest episode (60 env steps) in chunks of 4 actions" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["policies"]) == {"sft", "final"} and summary["rl_iterations"] == 1
    assert summary["env_steps"] > 2 * 2 * 8 * 4  # longer than the former fixed 8-chunk window could run
    info = json.loads((run_dir / "eval" / "final" / "eval_info.json").read_text())
    assert set(info["tasks"]) == {"go_to_red", "go_to_blue"} and info["env"]["control_hz"] == 10.0
    assert all((run_dir / "eval" / "final" / s["videos"]["episodes"][0]).is_file() for s in info["tasks"].values())
