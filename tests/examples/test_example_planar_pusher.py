"""The external example env plugs in by import path: conformance, expert, collect, bench, config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from envs.experts import get_expert
from envs.registry import make, registered
from vla_rl.cli import main
from vla_rl.stages.sft.datasets import load_demonstrations

ENV_ID = "planar_pusher.env:make"
CONFIGS = str(Path(__file__).resolve().parents[2] / "examples" / "planar_pusher" / "planar_pusher" / "configs")  # the package's own


def test_the_conformance_kit_passes_by_import_path_for_every_task(capsys):
    assert main(["envs", "check", ENV_ID, "--all-tasks"]) == 0
    out = capsys.readouterr().out
    assert f"{ENV_ID}/push" in out and f"{ENV_ID}/reach" in out and "all checks passed" in out
    assert "planar_pusher" not in registered() and ENV_ID not in registered()  # not in the framework


def test_the_expert_reached_through_the_factory_succeeds():
    from planar_pusher.env import make as factory

    for task in ("push", "reach"):
        env = make(f"{ENV_ID}/{task}", image_size=16)
        expert = get_expert(ENV_ID, task, env, factory=factory, noise_std=0.002, seed=0)
        successes = []
        for seed in range(8):
            observation, _ = env.reset(seed=seed)
            expert.reset(seed=seed)
            for _ in range(env.env_spec.max_episode_steps):
                observation, _, terminated, truncated, info = env.step(expert.act(observation))
                if terminated or truncated:
                    break
            successes.append(info["is_success"])
        env.close()
        assert all(successes), (task, successes)


def test_push_success_is_the_goal_distance_and_the_puck_moves_only_when_pushed():
    env = make(f"{ENV_ID}/push", image_size=16)
    _, info = env.reset(seed=4)
    puck = np.array(info["init_state"]["puck"])
    np.testing.assert_allclose(env.puck_position, puck, atol=1e-9)
    for _ in range(3):  # move away from the puck: it must not move
        env.step(np.array([-0.03, 0.0]))
    np.testing.assert_allclose(env.puck_position, puck, atol=1e-6)
    state = dict(info["init_state"], puck=list(np.array(info["init_state"]["goal"]) + [0.02, 0.0]))
    env.reset(options={"init_state": state})
    *_, terminated, _, step_info = env.step(np.zeros(2))  # puck 2 cm from the goal: < 3 cm tolerance
    assert terminated and step_info["is_success"]
    env.close()


def test_collect_and_bench_work_on_it_through_its_own_config_folder(tmp_path, capsys):
    code = main(["collect", "--config-dir", CONFIGS, "env=planar_pusher", "env.tasks=[push,reach]", "env.kwargs.image_size=16",
                 "collect.episodes_per_task=2", f"collect.output={tmp_path}"])  # fmt: skip
    assert code == 0
    episodes, attrs = load_demonstrations(tmp_path / "demos.hdf5")
    assert sorted(e.task for e in episodes) == ["push", "push", "reach", "reach"]
    assert all(e.success for e in episodes) and episodes[0].images["top"].shape[1:] == (16, 16, 3)
    assert episodes[0].actions.shape[1] == 2 and np.abs(np.concatenate([e.actions for e in episodes])).max() <= 0.03
    capsys.readouterr()
    assert main(["bench", "env", "--task", f"{ENV_ID}/push", "--steps", "50"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["env"] == ENV_ID and result["task"] == "push" and result["steps_per_s_camera"] > 0


def test_bench_says_which_envs_have_a_benchmark(capsys):
    assert main(["bench", "env", "--task", "point_env:make/reach_red", "--steps", "5"]) == 2
    err = capsys.readouterr().err
    assert "env 'point_env:make' has no benchmark" in err and "robosuite" in err and "tabletop" in err


def test_get_expert_finds_the_expert_from_the_import_path_alone():
    env = make(f"{ENV_ID}/reach", image_size=16)
    expert = get_expert(f"{ENV_ID}/reach", "reach", env)  # as env workers call it: no factory passed
    env.reset(seed=0)
    expert.reset(seed=0)
    assert expert.act(None).shape == (2,)
    env.close()


def test_eval_with_the_expert_finds_it_through_the_factory(tmp_path, capsys):
    """`vla-rl eval eval.policy=expert` on an env given by import path: the env's spec names it
    'planar_pusher', which is no registered env; the expert comes from the factory's `expert`."""
    code = main(["eval", f"env.id={ENV_ID}", "env.tasks=[reach]", "env.kwargs.image_size=16", "eval.policy=expert",
                 "eval.episodes_per_task=2", "eval.num_envs=2", "eval.video.episodes_per_task=0",
                 "eval.video.grid_envs=0", "eval.trackers=[]", f"eval.output={tmp_path}"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    info = json.loads((tmp_path / "eval_info.json").read_text())
    assert info["policy"]["kind"] == "expert" and info["overall"]["success_rate"] == 1.0
