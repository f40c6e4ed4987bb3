"""Advantage estimators over the rollout batch, selectable by name from the config.

Layout: every per-step tensor is ``(N, T)``: ``N = num_envs`` rows, ``T = num_steps`` columns, one
column per action chunk (the chunk is the MDP step). ``mask`` ``(N, T)`` marks valid steps.

Episode ends inside a row. ``terminated[i, t]`` says the episode reached a terminal state at step t
(its future value is zero); ``truncated[i, t]`` says it was cut (time limit) and would have gone on.
Two collection styles are supported by the same code:

- *no auto-reset*: after an episode ends the row is padding, ``mask`` is False there;
- *auto-reset* (continuing envs): a new episode starts at step t+1 of the same row, ``mask`` stays True.

In both, bootstrapping never crosses an episode end: the recursion is cut after a terminated or
truncated step. ``next_value[i, t]`` is the critic's value of the observation that followed step t:
the next column's observation, or, where the episode ended at t, the episode's *final* observation
(before any auto-reset), or, at the last column, the observation after the rollout. On truncation the
estimator bootstraps from it; on termination it does not. :func:`next_values_from` builds it.

Outcome estimators (GRPO, Dr. GRPO, RLOO, REINFORCE++-baseline) score each row as one sample
(``score = sum of its valid rewards``) and compare rows of one group (envs sharing an initial state),
so they need one episode per row (collect without auto-reset); they check it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from vla_rl.algos.groups import group_statistics
from vla_rl.algos.masked import masked_whiten


@dataclass(frozen=True)
class AdvantageResult:
    """``advantages`` and ``returns`` (the value-function target), both ``(N, T)``, zero on invalid steps."""

    advantages: torch.Tensor
    returns: torch.Tensor


def next_values_from(
    values: torch.Tensor,
    last_value: torch.Tensor,
    final_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
) -> torch.Tensor:
    """Value of the observation after each step ``(N, T)``.

    ``values`` ``(N, T)``: V(s_t). ``last_value`` ``(N,)``: V of the observation after the last column.
    ``final_values`` ``(N, T)``: V of the final observation where an episode ended at t (read only there).
    """
    following = torch.cat([values[:, 1:], last_value.reshape(-1, 1).to(values.dtype)], dim=1)
    ended = terminated.bool() | truncated.bool()
    return torch.where(ended, final_values.to(values.dtype), following)


def gae_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 0.99,
    lam: float = 0.95,
) -> AdvantageResult:
    """Generalised advantage estimation (Schulman et al., 2016) over chunk steps; all inputs ``(N, T)``.

    ``delta_t = r_t + gamma * (1 - terminated_t) * next_value_t - value_t`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * valid_{t+1} * A_{t+1}``, ``done = terminated | truncated``.
    ``gamma`` (default 0.99) discounts per chunk step; ``lam`` (default 0.95) is the GAE lambda.
    Returns ``returns = advantages + values``; both are zero on invalid steps.
    """
    valid = mask.to(rewards.dtype)
    not_done = 1.0 - (terminated.bool() | truncated.bool()).to(rewards.dtype)
    # where() rather than a product so that a NaN next_value after a termination cannot leak in
    bootstrap = torch.where(terminated.bool(), torch.zeros_like(next_values), next_values)
    deltas = rewards + gamma * bootstrap - values
    advantages = torch.zeros_like(rewards)
    carry = torch.zeros_like(rewards[:, 0])
    next_valid = torch.ones_like(carry)
    for step in reversed(range(rewards.shape[1])):
        carry = deltas[:, step] + gamma * lam * not_done[:, step] * next_valid * carry
        carry = torch.where(valid[:, step] > 0, carry, torch.zeros_like(carry))
        advantages[:, step] = carry
        next_valid = valid[:, step]
    returns = torch.where(valid > 0, advantages + values, torch.zeros_like(values))
    return AdvantageResult(advantages=advantages, returns=returns)


def discounted_returns(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 0.99,
) -> torch.Tensor:
    """Reward-to-go ``G_t = r_t + gamma * (1 - done_t) * valid_{t+1} * G_{t+1}`` without bootstrapping ``(N, T)``."""
    valid = mask.to(rewards.dtype)
    not_done = 1.0 - (terminated.bool() | truncated.bool()).to(rewards.dtype)
    returns = torch.zeros_like(rewards)
    carry = torch.zeros_like(rewards[:, 0])
    next_valid = torch.ones_like(carry)
    for step in reversed(range(rewards.shape[1])):
        carry = rewards[:, step] + gamma * not_done[:, step] * next_valid * carry
        carry = torch.where(valid[:, step] > 0, carry, torch.zeros_like(carry))
        returns[:, step] = carry
        next_valid = valid[:, step]
    return returns


def check_one_episode_per_row(terminated: torch.Tensor, truncated: torch.Tensor, mask: torch.Tensor) -> None:
    """Raise if a row holds a valid step after an episode end (outcome estimators need one episode per row)."""
    ended = (terminated.bool() | truncated.bool()) & mask.bool()
    ended_before = (ended.long().cumsum(dim=1) - ended.long()) > 0
    offending = (ended_before & mask.bool()).nonzero()
    if offending.numel() > 0:
        row, step = offending[0].tolist()
        raise ValueError(
            f"row {row} has a valid step {step} after its episode ended: outcome-level estimators (GRPO, RLOO, "
            "REINFORCE++-baseline) score each row as one episode. Collect without auto-reset and set "
            "mask=False on the steps after an episode ends, or use 'gae' / 'reinforce_plus_plus'."
        )


def trajectory_scores(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Score of each row ``(N,)``: the sum of its rewards over valid steps."""
    return torch.where(mask.bool(), rewards, torch.zeros_like(rewards)).sum(dim=1)


def grpo_advantages(
    scores: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6, scale_by_std: bool = True
) -> torch.Tensor:
    """GRPO (Shao et al., 2024): ``(R - group mean) / (group std + eps)``, per sample ``(N,)``.

    The std is Bessel-corrected. ``scale_by_std=False`` is Dr. GRPO (Liu et al., 2025): ``R - group mean``.
    A group whose scores are all equal gets advantage exactly 0. ``eps`` defaults to 1e-6.
    """
    stats = group_statistics(scores, group_ids)
    centred = scores - stats.mean
    return centred / (stats.std + eps) if scale_by_std else centred


def rloo_advantages(scores: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """REINFORCE leave-one-out (Ahmadian et al., 2024): ``R_i - mean_{j != i} R_j`` over the group ``(N,)``."""
    stats = group_statistics(scores, group_ids)
    return stats.size / (stats.size - 1.0) * (scores - stats.mean)


def broadcast_over_steps(per_row: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Copy a per-row value ``(N,)`` onto every valid step ``(N, T)``; zero elsewhere."""
    return per_row.reshape(-1, 1) * mask.to(per_row.dtype)


# ---------------------------------------------------------------- registry -------------------------------

EstimatorFn = Callable[..., AdvantageResult]


@dataclass(frozen=True)
class AdvantageEstimator:
    """A named estimator: ``fn(inputs, **hyper_parameters)`` reads the batch keys ``required_keys``."""

    name: str
    fn: EstimatorFn
    required_keys: tuple[str, ...]
    uses_critic: bool


ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {}
_STEP_KEYS = ("reward", "terminated", "truncated", "mask")


def register_advantage_estimator(
    name: str, required_keys: tuple[str, ...], uses_critic: bool = False
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator that adds an estimator under ``name``; external packages register theirs the same way."""

    def decorator(fn: EstimatorFn) -> EstimatorFn:
        if name in ADVANTAGE_ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        ADVANTAGE_ESTIMATORS[name] = AdvantageEstimator(name, fn, required_keys, uses_critic)
        return fn

    return decorator


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    """Look an estimator up by name; the error lists the valid names."""
    if name not in ADVANTAGE_ESTIMATORS:
        raise ValueError(
            f"unknown advantage estimator {name!r}; valid names: {', '.join(sorted(ADVANTAGE_ESTIMATORS))}"
        )
    return ADVANTAGE_ESTIMATORS[name]


def compute_advantages(
    inputs: Mapping[str, torch.Tensor], name: str, **hyper_parameters: float
) -> AdvantageResult:
    """Run estimator ``name`` on ``inputs`` (a rollout TensorDict or a dict of ``(N, T)`` tensors)."""
    estimator = get_advantage_estimator(name)
    present = set(inputs.keys())
    missing = [key for key in estimator.required_keys if key not in present]
    if missing:
        raise KeyError(
            f"advantage estimator {name!r} needs batch keys {missing}, which are missing; "
            f"it reads {list(estimator.required_keys)}"
        )
    return estimator.fn(inputs, **hyper_parameters)


def _row_group_ids(inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    group_ids = inputs["group_id"]
    return group_ids[:, 0] if group_ids.dim() == 2 else group_ids


def _outcome_scores(inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    check_one_episode_per_row(inputs["terminated"], inputs["truncated"], inputs["mask"])
    return trajectory_scores(inputs["reward"], inputs["mask"])


@register_advantage_estimator("gae", _STEP_KEYS + ("value", "next_value"), uses_critic=True)
def _gae(
    inputs: Mapping[str, torch.Tensor], gamma: float = 0.99, lam: float = 0.95, whiten: bool = False
) -> AdvantageResult:
    """GAE; ``whiten`` (default False) normalises advantages over valid steps (returns stay unwhitened)."""
    result = gae_advantages(
        inputs["reward"],
        inputs["value"],
        inputs["next_value"],
        inputs["terminated"],
        inputs["truncated"],
        inputs["mask"],
        gamma=gamma,
        lam=lam,
    )
    if not whiten:
        return result
    return AdvantageResult(masked_whiten(result.advantages, inputs["mask"]), result.returns)


@register_advantage_estimator("grpo", _STEP_KEYS + ("group_id",))
def _grpo(inputs: Mapping[str, torch.Tensor], eps: float = 1e-6) -> AdvantageResult:
    advantages = broadcast_over_steps(
        grpo_advantages(_outcome_scores(inputs), _row_group_ids(inputs), eps), inputs["mask"]
    )
    return AdvantageResult(advantages, advantages)


@register_advantage_estimator("dr_grpo", _STEP_KEYS + ("group_id",))
def _dr_grpo(inputs: Mapping[str, torch.Tensor]) -> AdvantageResult:
    scores = _outcome_scores(inputs)
    advantages = broadcast_over_steps(
        grpo_advantages(scores, _row_group_ids(inputs), scale_by_std=False), inputs["mask"]
    )
    return AdvantageResult(advantages, advantages)


@register_advantage_estimator("rloo", _STEP_KEYS + ("group_id",))
def _rloo(inputs: Mapping[str, torch.Tensor]) -> AdvantageResult:
    advantages = broadcast_over_steps(
        rloo_advantages(_outcome_scores(inputs), _row_group_ids(inputs)), inputs["mask"]
    )
    return AdvantageResult(advantages, advantages)


@register_advantage_estimator("reinforce_plus_plus", _STEP_KEYS)
def _reinforce_plus_plus(inputs: Mapping[str, torch.Tensor], gamma: float = 0.99) -> AdvantageResult:
    """REINFORCE++ (Hu, 2025): reward-to-go per step, whitened over all valid steps of the batch.

    Works with auto-reset rows (the reward-to-go stops at each episode end). ``gamma`` defaults to 0.99.
    """
    returns = discounted_returns(
        inputs["reward"], inputs["terminated"], inputs["truncated"], inputs["mask"], gamma
    )
    return AdvantageResult(masked_whiten(returns, inputs["mask"]), returns)


@register_advantage_estimator("reinforce_plus_plus_baseline", _STEP_KEYS + ("group_id",))
def _reinforce_plus_plus_baseline(inputs: Mapping[str, torch.Tensor]) -> AdvantageResult:
    """REINFORCE++-baseline: ``R - group mean`` per row, broadcast to steps, whitened over the batch."""
    scores = _outcome_scores(inputs)
    centred = grpo_advantages(scores, _row_group_ids(inputs), scale_by_std=False)
    advantages = masked_whiten(broadcast_over_steps(centred, inputs["mask"]), inputs["mask"])
    return AdvantageResult(advantages, advantages)
