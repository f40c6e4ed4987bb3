"""Task pools and the success replay in tiny training runs: a run with them resumes to equal an uninterrupted
one, and pools with the replay's weight at 0 change no number of a run.

The env (tests/support/lucky_point_env.py) succeeds by luck, from its seeded generator, so that an untrained
policy fills the success pools of both tasks and the replay trains from the second iteration on."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from test_resume_property import ResumeCase, check_resumed_equals_full, run_with_snapshot, train

from vla_rl.runtime.checkpoint import complete_checkpoints

LUCKY = [
    "experiment=rl_only",
    "env.id=lucky_point_env:make",
    "env.tasks=[reach_red,reach_blue]",
    "env.kwargs.image_size=16",
    "env.kwargs.max_episode_steps=6",
    "trainer.envs_per_stage=2",
    "trainer.num_stages=2",
    "trainer.rollout_steps=3",
    "trainer.trackers=[jsonl]",
    "trainer.time_limit_minutes=null",
    "algo.update.epochs=1",
    "algo.update.num_minibatches=2",
    "algo.update.micro_batch_size=4",
    "algo.critic_warmup_iterations=0",
    "policy.embedding_dim=32",
    "policy.value.hidden_dims=[16]",
]
POOLS = [
    "trainer.task_pools.capacity=6",
    "trainer.task_pools.failure_capacity=3",
    "algo.success_replay_weight=0.5",
    "algo.success_replay_batch_size=4",
    "trainer.task_sampling.mode=failure",
    "trainer.task_sampling.min_envs_per_task=0",
    "trainer.task_sampling.solved_threshold=0.5",
    "trainer.task_sampling.solved_floor=0.6",
]


def metrics(run_dir: Path) -> list[dict]:
    volatile = ("time", "timing/", "memory/")
    rows = [json.loads(line) for line in (run_dir / "rl" / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(volatile)} for row in rows]


def test_a_run_with_pools_and_replay_stopped_between_checkpoints_resumes_to_equal_an_uninterrupted_run(
    ray_session, tmp_path, monkeypatch, load_script
):
    case = ResumeCase(seed=0, overrides=(*LUCKY, *POOLS, "seed=3", "trainer.iterations=5",
                                         "trainer.checkpoint_every=2", "trainer.keep_last=1"),
                      iterations=5, checkpoint_every=2, stop_after=3)  # fmt: skip
    run_with_snapshot(case, tmp_path / "full", tmp_path / "killed", monkeypatch)
    rows = metrics(tmp_path / "full")
    # the pools filled, the replay trained from the second iteration, the metrics were logged every iteration
    assert all("regression/tasks_regressed" in row and "task_pools/reach_red/successes" in row for row in rows)
    assert all(row["train/loss/success_replay_bc"] > 0 for row in rows[1:])
    assert 0 < rows[-1]["task_pools/reach_blue/successes"] <= 6 and rows[-1]["task_pools/reach_red/failures"] <= 3
    checkpoint = complete_checkpoints(tmp_path / "full" / "rl" / "checkpoints")[0]
    saved = torch.load(checkpoint / "task_pools.pt", weights_only=False)
    assert saved["pools"]["success"]["reach_red"]["size"] == rows[-1]["task_pools/reach_red/successes"]
    check_resumed_equals_full(load_script, case, tmp_path / "full", tmp_path / "killed")


def test_pools_with_replay_weight_zero_change_no_number_of_a_run(ray_session, tmp_path):
    common = [*LUCKY, "seed=1", "trainer.iterations=2", "trainer.checkpoint_every=0"]
    train(common, tmp_path / "without")
    train([*common, "trainer.task_pools.capacity=4"], tmp_path / "with_pools")
    without, with_pools = metrics(tmp_path / "without"), metrics(tmp_path / "with_pools")
    assert [{k: row[k] for k in before} for row, before in zip(with_pools, without, strict=True)] == without
    assert "train/loss/policy" in without[-1] and "task_pools/reach_red/successes" in with_pools[-1]
