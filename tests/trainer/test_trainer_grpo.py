"""GRPO end to end at tiny size: groups share their initial state, the fit loop runs critic-free."""

from __future__ import annotations

import json

import torch
from tiny_training import TINY_TRAINING

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from vla_rl.algos.algorithms import GROUPED_EPISODES
from vla_rl.cli import main
from vla_rl.config.loading import load_config
from vla_rl.stages.rl.experiment import plan_rl_run, rl_trainer
from vla_rl.stages.run_plan import read_run_plan

GRPO = [*TINY_TRAINING, "algo=grpo", "algo.group_size=2", "algo.filter_groups=false", "trainer.rollout_steps=2"]


def test_grpo_groups_share_initial_states_and_training_runs(ray_session, tmp_path):
    # One set of workers for both halves: the grouped collection, then an iteration of the fit loop (the
    # `vla-rl train` path of GRPO runs in the next test).
    cfg = load_config([*GRPO, f"run_dir={tmp_path}", "trainer.iterations=1"])
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), tmp_path / "rl") as trainer:
        rollout = trainer.collector.collect(2, seed=0, iteration=0, collection=GROUPED_EPISODES, group_size=2)
        state = trainer.fit()
    batch = rollout.batch
    first_state = batch["observation", "state"][:, 0]
    first_image = batch["observation", "images", "front"][:, 0]
    groups = batch["group_id"][:, 0]
    assert groups.tolist() == [0, 0, 1, 1]  # 2 stages x 2 envs, groups of 2
    for group in range(2):
        rows = (groups == group).nonzero().flatten().tolist()
        assert torch.equal(first_state[rows[0]], first_state[rows[1]])
        assert torch.equal(first_image[rows[0]], first_image[rows[1]])
    assert not torch.equal(first_image[0], first_image[2])  # different groups, different scenes
    # The two envs of a group sample different actions from the same start.
    assert not torch.equal(batch["action_chunk"][0, 0], batch["action_chunk"][1, 0])

    assert state.iteration == 1
    rows = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 1 and "train/loss/policy" in rows[-1] and "train/loss/value" not in rows[-1]


def test_an_iteration_whose_groups_are_all_filtered_skips_its_update(ray_session, tmp_path):
    # Groups of 2 have success rates 0, 0.5 or 1: bounds [0.6, 0.9] filter every group out.
    run_dir = tmp_path / "run"
    overrides = ["algo.filter_groups=true", "algo.min_success_rate=0.6", "algo.max_success_rate=0.9"]
    assert main(["train", *GRPO, *overrides, f"run_dir={run_dir}", "trainer.iterations=1"]) == 0
    row = [json.loads(line) for line in (run_dir / "rl" / "metrics.jsonl").read_text().splitlines()][-1]
    assert row["train/skipped_update"] == 1.0 and row["train/valid_steps"] == 0.0
