"""Dynamic sampling (DAPO, Yu et al., 2025): keep collecting until enough informative groups are in.

A group whose envs all succeed or all fail has zero group-normalised advantage: it costs compute and
teaches nothing. The accumulator drops such groups (see
:func:`vla_rl.algos.groups.filter_groups_by_success_rate`) and asks for more rollouts until it holds
``target_num_groups`` groups, or gives up after ``max_attempts`` collections with a message that says
what to change. Group ids are renumbered ``0..`` across attempts, so ids from different collections
never collide.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from vla_rl.algos.groups import filter_groups_by_success_rate


class DynamicSamplingError(RuntimeError):
    """Raised when dynamic sampling cannot fill the batch within its attempt budget."""


class DynamicSamplingAccumulator:
    """Collects whole groups that pass the success-rate filter, attempt after attempt.

    - ``target_num_groups``: groups the training batch needs.
    - ``max_attempts`` (default 10): collections allowed before :class:`DynamicSamplingError`.
    - ``min_success_rate`` / ``max_success_rate`` (0.1 / 0.9): inclusive bounds on a group's success rate.
    """

    def __init__(
        self,
        target_num_groups: int,
        max_attempts: int = 10,
        min_success_rate: float = 0.1,
        max_success_rate: float = 0.9,
    ) -> None:
        if target_num_groups < 1 or max_attempts < 1:
            raise ValueError(
                f"target_num_groups={target_num_groups} and max_attempts={max_attempts} must be >= 1"
            )
        self.target_num_groups = target_num_groups
        self.max_attempts = max_attempts
        self.min_success_rate = min_success_rate
        self.max_success_rate = max_success_rate
        self.attempts = 0
        self.groups_seen = 0
        self.groups_kept = 0
        self._kept: list[TensorDict] = []

    @property
    def is_full(self) -> bool:
        return self.groups_kept >= self.target_num_groups

    @property
    def can_collect(self) -> bool:
        """True while the batch is not full and attempts remain."""
        return not self.is_full and self.attempts < self.max_attempts

    def add(self, batch: TensorDict, success: torch.Tensor) -> None:
        """Add one collection: ``batch`` ``[N, T]`` with ``group_id``, ``success`` ``(N,)`` per env."""
        if "group_id" not in batch.keys():
            raise KeyError("dynamic sampling needs the rollout batch key 'group_id' to keep whole groups")
        self.attempts += 1
        row_group_ids = batch["group_id"][:, 0]
        keep = filter_groups_by_success_rate(
            success, row_group_ids, self.min_success_rate, self.max_success_rate
        )
        self.groups_seen += len(torch.unique(row_group_ids))
        if not bool(keep.any()):
            return
        kept = batch[keep].clone()
        _, local_ids = torch.unique(kept["group_id"][:, 0], return_inverse=True)
        new_ids = local_ids + self.groups_kept
        kept["group_id"] = new_ids.reshape(-1, 1).expand_as(kept["group_id"]).clone()
        self.groups_kept += int(local_ids.max()) + 1
        self._kept.append(kept)

    def result(self) -> TensorDict:
        """The first ``target_num_groups`` kept groups, concatenated along envs ``[N', T]``."""
        if not self.is_full:
            raise DynamicSamplingError(
                f"dynamic sampling kept {self.groups_kept} of the {self.target_num_groups} groups it needs after "
                f"{self.attempts} of {self.max_attempts} attempts ({self.groups_seen} groups collected): the other "
                f"groups' success rates were outside [{self.min_success_rate}, {self.max_success_rate}] (all "
                "succeeded or all failed). Raise max_attempts, widen the success-rate bounds, use larger groups, "
                "or turn dynamic sampling off."
            )
        batch = torch.cat(self._kept, dim=0)
        return batch[batch["group_id"][:, 0] < self.target_num_groups]
