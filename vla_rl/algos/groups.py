"""GRPO groups: envs that share an initial state, and the per-group statistics of their scores.

A group id is an integer per env (row of the rollout batch); envs with the same id started from the
same initial state, so their scores are comparable. Group baselines need at least two samples per
group: with one, the sample is its own baseline and its advantage is always zero (or undefined).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GroupStatistics:
    """Per-sample view of its group's statistics, all ``(N,)``."""

    mean: torch.Tensor
    std: torch.Tensor  # unbiased (Bessel-corrected) standard deviation
    size: torch.Tensor  # number of members, float


def check_group_sizes(group_ids: torch.Tensor, min_size: int = 2) -> None:
    """Raise, naming the offending group ids, if any group has fewer than ``min_size`` members."""
    if group_ids.dim() != 1:
        raise ValueError(f"group_ids must be 1-D (one id per env), got shape {tuple(group_ids.shape)}")
    unique_ids, counts = torch.unique(group_ids, return_counts=True)
    small = unique_ids[counts < min_size]
    if small.numel() > 0:
        shown = small[:10].tolist()
        raise ValueError(
            f"groups {shown}{' ...' if small.numel() > 10 else ''} have fewer than {min_size} samples; a group "
            "baseline (GRPO/RLOO) needs >= 2 envs per initial state: set algo.group_size >= 2 (num_envs a "
            "multiple of it) and keep whole groups when filtering."
        )


def group_statistics(scores: torch.Tensor, group_ids: torch.Tensor) -> GroupStatistics:
    """Mean, unbiased std and size of each sample's group. ``scores`` and ``group_ids`` are ``(N,)``."""
    check_group_sizes(group_ids)
    if scores.shape != group_ids.shape:
        raise ValueError(
            f"scores {tuple(scores.shape)} and group_ids {tuple(group_ids.shape)} must both be (N,)"
        )
    _, inverse = torch.unique(group_ids, return_inverse=True)
    num_groups = int(inverse.max()) + 1
    scores64 = scores.to(torch.float64)
    sizes = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, inverse, torch.ones_like(scores64))
    sums = torch.zeros(num_groups, dtype=torch.float64).index_add_(0, inverse, scores64)
    means = sums / sizes
    squared = torch.zeros(num_groups, dtype=torch.float64).index_add_(
        0, inverse, (scores64 - means[inverse]) ** 2
    )
    stds = (squared / (sizes - 1.0)).sqrt()
    return GroupStatistics(
        mean=means[inverse].to(scores.dtype),
        std=stds[inverse].to(scores.dtype),
        size=sizes[inverse].to(scores.dtype),
    )


def group_success_rates(success: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Success rate of every group: returns ``(unique_group_ids (G,), rates (G,))``. ``success`` is ``(N,)``."""
    unique_ids, inverse = torch.unique(group_ids, return_inverse=True)
    successes = torch.zeros(len(unique_ids), dtype=torch.float64).index_add_(
        0, inverse, success.to(torch.float64)
    )
    sizes = torch.zeros(len(unique_ids), dtype=torch.float64).index_add_(
        0, inverse, torch.ones_like(success, dtype=torch.float64)
    )
    return unique_ids, successes / sizes


def filter_groups_by_success_rate(
    success: torch.Tensor,
    group_ids: torch.Tensor,
    min_success_rate: float = 0.1,
    max_success_rate: float = 0.9,
) -> torch.Tensor:
    """Keep-mask ``(N,)`` that drops whole groups whose success rate is outside the bounds.

    A group is kept when ``min_success_rate <= rate <= max_success_rate`` (inclusive). The defaults
    (0.1, 0.9; the accuracy bounds of SimpleVLA-RL) drop groups that all failed or all succeeded: their
    group-normalised advantages are zero, so they only dilute the batch. ``success`` is ``(N,)`` bool or
    0/1; ``group_ids`` is ``(N,)``.
    """
    if not 0.0 <= min_success_rate <= max_success_rate <= 1.0:
        raise ValueError(
            f"success-rate bounds [{min_success_rate}, {max_success_rate}] must satisfy 0 <= min <= max <= 1"
        )
    unique_ids, rates = group_success_rates(success, group_ids)
    kept_ids = unique_ids[(rates >= min_success_rate) & (rates <= max_success_rate)]
    return torch.isin(group_ids, kept_ids)
