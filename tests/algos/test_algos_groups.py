from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from vla_rl.algos import (
    DynamicSamplingAccumulator,
    DynamicSamplingError,
    check_group_sizes,
    filter_groups_by_success_rate,
)


def test_group_sizes_below_two_are_refused_by_name():
    check_group_sizes(torch.tensor([0, 0, 1, 1, 1]))
    with pytest.raises(ValueError, match=r"groups \[1, 7\] have fewer than 2 samples.*algo.group_size >= 2"):
        check_group_sizes(torch.tensor([0, 0, 1, 7, 3, 3]))


def test_filter_groups_by_success_rate():
    group_ids = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    success = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 1])  # all fail, all succeed, mixed
    assert filter_groups_by_success_rate(success, group_ids).tolist() == [False] * 8 + [True] * 4
    keep_failures = filter_groups_by_success_rate(
        success, group_ids, min_success_rate=0.0, max_success_rate=0.5
    )
    assert keep_failures.tolist() == [True] * 4 + [False] * 4 + [True] * 4
    with pytest.raises(ValueError, match=r"bounds \[0.8, 0.2\] must satisfy"):
        filter_groups_by_success_rate(success, group_ids, 0.8, 0.2)


def fake_collect(success_pattern: list[list[int]], num_steps: int = 2):
    """A collector whose attempt k returns groups of 2 envs with the given per-env successes."""

    def collect(attempt: int) -> tuple[TensorDict, torch.Tensor]:
        success = torch.tensor(success_pattern[attempt])
        num_envs = len(success)
        group_ids = torch.arange(num_envs // 2).repeat_interleave(2) + 100 * attempt
        batch = TensorDict(
            {
                "group_id": group_ids.reshape(-1, 1).expand(num_envs, num_steps).clone(),
                "origin": (torch.arange(num_envs) + 1000 * attempt)
                .reshape(-1, 1)
                .expand(num_envs, num_steps)
                .clone(),
            },
            batch_size=[num_envs, num_steps],
        )
        return batch, success

    return collect


def collect_with_dynamic_sampling(collect, accumulator: DynamicSamplingAccumulator) -> TensorDict:
    """The trainer's loop (``Trainer.collect_rollout``): collect until the accumulator is full or out of attempts."""
    while accumulator.can_collect:
        accumulator.add(*collect(accumulator.attempts))
    return accumulator.result()


def test_dynamic_sampling_fills_the_batch_with_whole_informative_groups():
    pattern = [[0, 0, 1, 0, 1, 1], [1, 0, 0, 0, 0, 0], [0, 1, 1, 0, 1, 1], [1, 0, 1, 0, 1, 0]]
    accumulator = DynamicSamplingAccumulator(
        target_num_groups=3, max_attempts=5, min_success_rate=0.1, max_success_rate=0.9
    )
    batch = collect_with_dynamic_sampling(fake_collect(pattern), accumulator)
    assert accumulator.attempts == 3  # stops as soon as it is full
    # mixed groups in order: attempt 0 envs 2-3, attempt 1 envs 0-1, attempt 2 envs 0-1 (envs 2-3 left over)
    assert batch["origin"][:, 0].tolist() == [2, 3, 1000, 1001, 2000, 2001]
    assert batch["group_id"][:, 0].tolist() == [0, 0, 1, 1, 2, 2]


def test_dynamic_sampling_fails_with_a_message_after_max_attempts():
    pattern = [[0, 0, 1, 1], [1, 1, 0, 0], [0, 1, 0, 0]]
    accumulator = DynamicSamplingAccumulator(target_num_groups=2, max_attempts=3)
    with pytest.raises(
        DynamicSamplingError,
        match=r"kept 1 of the 2 groups it needs after 3 of 3 attempts"
        r" \(6 groups collected\).*Raise max_attempts, widen the success-rate bounds",
    ):
        collect_with_dynamic_sampling(fake_collect(pattern), accumulator)
