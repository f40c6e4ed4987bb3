"""The shared RL core: advantages, losses, KL and batch handling as pure functions on tensors.

Nothing here knows a robot or a model. Estimators and policy losses are looked up by name
(:func:`get_advantage_estimator`, :func:`get_policy_loss`) so the config selects them.
"""

from __future__ import annotations

from vla_rl.algos.advantages import (
    ADVANTAGE_ESTIMATORS,
    AdvantageEstimator,
    AdvantageResult,
    compute_advantages,
    discounted_returns,
    gae_advantages,
    get_advantage_estimator,
    grpo_advantages,
    next_values_from,
    register_advantage_estimator,
    rloo_advantages,
    trajectory_scores,
)
from vla_rl.algos.aggregation import LOSS_AGGREGATIONS, aggregate_loss
from vla_rl.algos.batch import (
    minibatch_indices,
    pad_to_multiple,
    shard_for_rank,
    split_microbatches,
    valid_steps,
)
from vla_rl.algos.dynamic_sampling import DynamicSamplingAccumulator, DynamicSamplingError
from vla_rl.algos.groups import check_group_sizes, filter_groups_by_success_rate
from vla_rl.algos.kl import KL_ESTIMATORS, kl_estimate, kl_loss, kl_penalized_rewards
from vla_rl.algos.losses import (
    POLICY_LOSSES,
    LossOutput,
    PolicyLossConfig,
    entropy_bonus_loss,
    get_policy_loss,
    ppo_clip_loss,
    value_loss,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "KL_ESTIMATORS",
    "LOSS_AGGREGATIONS",
    "POLICY_LOSSES",
    "AdvantageEstimator",
    "AdvantageResult",
    "DynamicSamplingAccumulator",
    "DynamicSamplingError",
    "LossOutput",
    "PolicyLossConfig",
    "aggregate_loss",
    "check_group_sizes",
    "compute_advantages",
    "discounted_returns",
    "entropy_bonus_loss",
    "filter_groups_by_success_rate",
    "gae_advantages",
    "get_advantage_estimator",
    "get_policy_loss",
    "grpo_advantages",
    "kl_estimate",
    "kl_loss",
    "kl_penalized_rewards",
    "minibatch_indices",
    "next_values_from",
    "pad_to_multiple",
    "ppo_clip_loss",
    "register_advantage_estimator",
    "rloo_advantages",
    "shard_for_rank",
    "split_microbatches",
    "trajectory_scores",
    "valid_steps",
    "value_loss",
]
