"""``trainer.task_sampling``: envs shared among tasks by their training failure rate.

The pure functions against closed forms; then a tiny multi-task run in which the env workers really run
the assigned tasks and the state that decides the next assignment is in the checkpoint.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
from tiny_training import TINY_TRAINING

from contract.config_reader import FieldError, read_dataclass
from vla_rl.config.loading import load_config
from vla_rl.stages.rl.experiment import plan_rl_run, rl_trainer
from vla_rl.stages.rl.task_sampling import (
    TaskSamplingConfig,
    apportion,
    assign_slots,
    failure_weights,
    next_assignment,
    updated_success,
)
from vla_rl.stages.run_plan import read_run_plan

TASKS = ["reach", "lift", "open_drawer"]


def test_apportion_gives_the_minimum_then_shares_by_largest_remainder():
    assert apportion([1, 1, 2], 8) == [2, 2, 4]  # exact shares
    assert apportion([1, 1, 1], 10) == [4, 3, 3]  # 3.33 each: the one left over goes to the first
    assert apportion([0.1, 1, 1], 8, minimum=1) == [1, 4, 3]  # 5 free: 0.24, 2.38, 2.38 -> floors 0, 2, 2 + 1
    counts = apportion(np.random.default_rng(0).random(7), 64, minimum=2)
    assert sum(counts) == 64 and min(counts) >= 2


def test_apportion_errors_name_the_key_and_the_values():
    with pytest.raises(ValueError, match="min_envs_per_task=2"):
        apportion([1, 1, 1], 5, minimum=2)
    with pytest.raises(ValueError, match="not all 0"):
        apportion([0, 0], 4)
    with pytest.raises(ValueError, match=">= 0"):
        apportion([1, -1], 4)


def test_failure_weights_are_one_minus_success_floored_and_one_for_unseen_tasks():
    weights = failure_weights(TASKS, {"reach": 1.0, "lift": 0.25}, floor=0.1)
    np.testing.assert_allclose(weights, [0.1, 0.75, 1.0])


def test_success_average_is_an_exponential_moving_average_of_finished_episodes():
    episodes = [{"task": "reach", "success": True}, {"task": "reach", "success": False}, {"task": "lift", "success": True}]
    first = updated_success({}, episodes, decay=0.8)
    assert first == {"reach": 0.5, "lift": 1.0}  # a task seen for the first time starts at its mean
    second = updated_success({**first, "open_drawer": 0.3}, [{"task": "reach", "success": True}], decay=0.8)
    assert second["reach"] == pytest.approx(0.8 * 0.5 + 0.2 * 1.0)
    assert second["lift"] == 1.0 and second["open_drawer"] == 0.3  # no finished episode: unchanged


def test_slots_keep_their_task_where_the_new_counts_allow():
    previous = ["reach", "lift", "open_drawer"] * 4
    counts = [1, 6, 5]
    assigned = assign_slots(previous, TASKS, counts)
    assert Counter(assigned) == dict(zip(TASKS, counts, strict=True))
    moved = sum(a != p for a, p in zip(assigned, previous, strict=True))
    assert moved == 3  # reach gives up 3 of its 4 slots; nothing else moves
    with pytest.raises(ValueError, match="12 slots but the counts sum to 11"):
        assign_slots(previous, TASKS, [1, 5, 5])


def test_next_assignment_uniform_keeps_every_env_and_grpo_groups_share_a_task():
    previous = ["reach", "reach", "lift", "lift", "open_drawer", "open_drawer", "reach", "reach"]
    uniform = TaskSamplingConfig()
    assert next_assignment(uniform, TASKS, {"reach": 1.0}, previous, group_size=2) == previous
    failure = TaskSamplingConfig(mode="failure", floor=0.1, min_envs_per_task=0)
    grouped = next_assignment(failure, TASKS, {"reach": 1.0, "lift": 0.0, "open_drawer": 0.0}, previous, group_size=2)
    assert all(grouped[i] == grouped[i + 1] for i in range(0, 8, 2))
    assert Counter(grouped[::2]) == {"lift": 2, "open_drawer": 2}  # 4 groups by weights 0.1, 1, 1


def test_config_errors_name_the_key():
    with pytest.raises(FieldError, match="task_sampling.mode='often'"):
        read_dataclass(TaskSamplingConfig, {"mode": "often"}, "trainer.task_sampling")
    with pytest.raises(FieldError, match="task_sampling.decay"):
        read_dataclass(TaskSamplingConfig, {"decay": 1.0}, "trainer.task_sampling")
    with pytest.raises(FieldError, match="task_sampling.floor"):
        read_dataclass(TaskSamplingConfig, {"floor": 0.0}, "trainer.task_sampling")


def test_envs_run_the_tasks_their_failure_rates_give_them_and_the_checkpoint_keeps_the_state(ray_session, tmp_path):
    overrides = [*TINY_TRAINING, "env.tasks=[reach,lift,open_drawer]", "trainer.envs_per_stage=4",
                 "trainer.iterations=1", "trainer.task_sampling.mode=failure", "trainer.task_sampling.floor=0.1",
                 f"run_dir={tmp_path}"]  # fmt: skip
    cfg = load_config(overrides)
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), tmp_path / "rl") as trainer:
        # as if reach had always succeeded and the others never: weights 0.1, 1, 1 over 8 envs, 1 each at least
        trainer.state.task_success = {"reach": 1.0, "lift": 0.0, "open_drawer": 0.0}
        trainer.state.env_tasks = trainer.collector.initial_env_tasks()
        assert trainer.state.env_tasks == ["reach", "lift", "open_drawer", "reach"] + ["lift", "open_drawer", "reach", "lift"]
        state = trainer.fit()
        assert Counter(state.env_tasks) == {"reach": 1, "lift": 4, "open_drawer": 3}
        group = trainer.collector.env_group
        running = [task for stage in range(group.num_stages) for task in group.get_attr(stage, "tasks")]
        assert running == state.env_tasks
        rows = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
        assert [rows[0][f"task_sampling/{t}/envs"] for t in TASKS] == [1.0, 4.0, 3.0]
    saved = torch.load(tmp_path / "rl" / "checkpoints" / "iter_000001" / "trainer_state.pt", weights_only=False)
    assert saved["env_tasks"] == state.env_tasks and saved["task_success"] == state.task_success
