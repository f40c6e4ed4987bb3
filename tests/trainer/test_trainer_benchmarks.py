"""`vla-rl bench rollout` and `vla-rl bench update` at tiny size: one JSON object with consistent figures."""

from __future__ import annotations

import json

import pytest
from tiny_training import TINY_TRAINING as TINY

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from vla_rl.cli import main

NUM_ENVS, ROLLOUT_STEPS = 4, 3  # TINY: 1 worker x 2 stages x 2 envs, 3 chunk steps


def bench_json(capsys, *argv: str) -> dict:
    assert main(["bench", *argv]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_bench_rollout_prints_raw_and_rollout_throughput_per_stage_count(ray_session, capsys):
    result = bench_json(capsys, "rollout", *TINY, "--repeats", "1")
    assert result["benchmark"] == "rollout"
    assert (result["num_envs"], result["rollout_steps"], result["num_env_workers"]) == (NUM_ENVS, ROLLOUT_STEPS, 1)
    assert sorted(result["stages"]) == ["1", "2"]
    for num_stages, figures in result["stages"].items():
        assert figures["envs_per_stage"] * int(num_stages) == NUM_ENVS  # the same envs, split differently
        assert figures["raw_env_steps_per_s"] > 0 and figures["rollout_env_steps_per_s"] > 0
        ratio = figures["rollout_env_steps_per_s"] / figures["raw_env_steps_per_s"]
        assert figures["ratio"] == pytest.approx(ratio, abs=2e-3)
    best = result["stages"][str(result["best_num_stages"])]
    assert best["rollout_env_steps_per_s"] == max(f["rollout_env_steps_per_s"] for f in result["stages"].values())
    assert (result["raw_env_steps_per_s"], result["rollout_env_steps_per_s"], result["ratio"]) == (
        best["raw_env_steps_per_s"], best["rollout_env_steps_per_s"], best["ratio"],
    )  # fmt: skip


def test_bench_update_prints_samples_per_second_at_world_sizes_one_and_two(ray_session, capsys):
    result = bench_json(capsys, "update", *TINY, "--repeats", "1")
    assert result["benchmark"] == "update"
    # one PPO rollout of the run: every env acts for rollout_steps chunk steps
    assert result["batch_size"] == NUM_ENVS * ROLLOUT_STEPS
    assert (result["epochs"], result["num_minibatches"]) == (1, 2)
    assert sorted(result["world_sizes"]) == ["1", "2"]
    for figures in result["world_sizes"].values():
        expected = result["batch_size"] * result["epochs"] / figures["update_s"]
        assert figures["samples_per_s"] == pytest.approx(expected, rel=1e-3)
    assert result["samples_per_s"] == result["world_sizes"][str(result["best_world_size"])]["samples_per_s"]


def test_bench_env_rejects_config_overrides(capsys):
    assert main(["bench", "env", "trainer.envs_per_stage=8"]) == 2
    error = capsys.readouterr().err
    assert "takes no config overrides (got trainer.envs_per_stage=8)" in error and "rollout and update" in error
