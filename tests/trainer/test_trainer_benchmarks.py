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
    result = bench_json(capsys, "rollout", *TINY, "--repeats", "2", "--min-seconds", "0.2")
    assert result["benchmark"] == "rollout"
    assert (result["num_envs"], result["rollout_steps"], result["num_env_workers"]) == (NUM_ENVS, ROLLOUT_STEPS, 1)
    assert sorted(result["stages"]) == ["1", "2"]
    for num_stages, figures in result["stages"].items():
        assert figures["envs_per_stage"] * int(num_stages) == NUM_ENVS  # the same envs, split differently
        for key in ("raw_env_steps_per_s", "rollout_env_steps_per_s", "ratio"):
            assert 0 < figures[key]["min"] <= figures[key]["median"] <= figures[key]["max"]
        # ratios are per round: their range lies within the extremes of rollout / raw
        raw, rollout = figures["raw_env_steps_per_s"], figures["rollout_env_steps_per_s"]
        assert rollout["min"] / raw["max"] - 2e-3 <= figures["ratio"]["min"]
        assert figures["ratio"]["max"] <= rollout["max"] / raw["min"] + 2e-3
        profile = figures["profile"]
        assert profile["wall_s"] > 0 and 0 < profile["env_worker0_busy"] <= 1.05
        assert profile["env_worker0_env_step"] + profile["env_worker0_render"] <= profile["env_worker0_busy"] + 1e-3
        assert 0 < profile["rollout_worker_busy"] <= 1.05 and profile["rollout_worker_head_networks"] > 0
    best = result["stages"][str(result["best_num_stages"])]
    medians = [f["rollout_env_steps_per_s"]["median"] for f in result["stages"].values()]
    assert best["rollout_env_steps_per_s"]["median"] == max(medians)
    assert (result["raw_env_steps_per_s"], result["rollout_env_steps_per_s"], result["ratio"]) == (
        best["raw_env_steps_per_s"]["median"], best["rollout_env_steps_per_s"]["median"], best["ratio"]["median"],
    )  # fmt: skip


def test_bench_update_prints_samples_per_second_at_world_sizes_one_and_two(ray_session, capsys):
    # The actor's own thread count wins over the other workers' (one per rank: two ranks of two threads each on
    # two busy cores spin in oneDNN's barriers, docs/platform.md)
    result = bench_json(capsys, "update", *TINY, "trainer.torch_threads=2", "trainer.actor_torch_threads=1",
                        "--repeats", "1")  # fmt: skip
    assert result["benchmark"] == "update"
    assert result["torch_threads"] == 1  # as every actor process reports it
    # one PPO rollout of the run: every env acts for rollout_steps chunk steps
    assert result["batch_size"] == NUM_ENVS * ROLLOUT_STEPS
    assert (result["epochs"], result["num_minibatches"]) == (1, 2)
    assert sorted(result["world_sizes"]) == ["1", "2"]
    for figures in result["world_sizes"].values():
        expected = result["batch_size"] * result["epochs"] / figures["update_s"]
        # samples_per_s is printed to 2 decimals: at a few samples/s (a busy machine) that is more than 1e-3
        assert figures["samples_per_s"] == pytest.approx(expected, rel=1e-3, abs=0.005 + 1e-9)
    assert result["samples_per_s"] == result["world_sizes"][str(result["best_world_size"])]["samples_per_s"]


def test_bench_env_rejects_config_overrides(capsys):
    assert main(["bench", "env", "trainer.envs_per_stage=8"]) == 2
    error = capsys.readouterr().err
    assert "takes no config overrides (got trainer.envs_per_stage=8)" in error and "rollout and update" in error


def test_bench_rollout_variants_run_each_set_of_overrides(ray_session, capsys):
    # the same 4 envs on one env worker (2 per stage) or on two (1 per stage)
    one_worker = "trainer.num_env_workers=1 trainer.envs_per_stage=2"
    two_workers = "trainer.num_env_workers=2 trainer.envs_per_stage=1"
    common = [o for o in TINY if not o.startswith("trainer.envs_per_stage=")]
    result = bench_json(capsys, "rollout", *common, "--repeats", "1", "--min-seconds", "0.1",
                        "--variants", one_worker, two_workers)  # fmt: skip
    assert (result["benchmark"], result["figure"], result["order"]) == (
        "rollout", "rollout_env_steps_per_s", [one_worker, two_workers],
    )  # fmt: skip
    one, two = (result["variants"][v]["results"][0] for v in (one_worker, two_workers))
    assert (one["num_env_workers"], one["num_envs"]) == (1, NUM_ENVS)  # each run composed with its overrides
    assert (two["num_env_workers"], two["num_envs"]) == (2, NUM_ENVS)
    figure = result["variants"][one_worker]["rollout_env_steps_per_s"]["median"]
    assert figure == pytest.approx(one["rollout_env_steps_per_s"], abs=1e-3)
    ratio = two["rollout_env_steps_per_s"] / one["rollout_env_steps_per_s"]
    assert result["variants"][two_workers]["ratio_to_first"]["median"] == pytest.approx(ratio, abs=1e-3)
