"""Policy, value and entropy losses of PPO/GRPO, with a registry of policy losses by name.

Shapes. ``log_prob`` and ``old_log_prob`` are ``(S, ...)`` at any granularity the algorithm chose
(``(S, H, A)`` per dimension, ``(S, H)`` per action, ``(S,)`` per chunk, or ``(N, T, ...)`` when the
sequences are whole rows). ``advantages`` and ``mask`` have a prefix of that shape (``(S,)``, or
``(N, T)``) and are broadcast over the trailing token dims. See :mod:`vla_rl.algos.aggregation` for
how per-token losses become a scalar.

All losses are to be minimised. Metrics are detached scalars.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from contract.config_reader import check_types, require
from vla_rl.algos.aggregation import LOSS_AGGREGATIONS, aggregate_loss
from vla_rl.algos.masked import expand_trailing, masked_mean


@dataclass(frozen=True)
class PolicyLossConfig:
    """Hyper-parameters of the policy losses.

    - ``clip_low`` (0.2, > 0): the ratio is clipped below at ``1 - clip_low``.
    - ``clip_high`` (0.28, > 0; None = same as ``clip_low``): clipped above at ``1 + clip_high``; a larger value
      than ``clip_low`` is DAPO's clip-higher (Yu et al., 2025), which keeps exploration.
    - ``dual_clip_c`` (3.0; None disables): dual-clip PPO (Ye et al., 2020): for negative advantages
      the loss is capped at ``-c * A``, so a huge ratio cannot blow the update up. Must be > 1.
    - ``log_ratio_clamp`` (20.0, > 0): ``log_prob - old_log_prob`` is clamped to ``[-x, x]`` before ``exp``
      (long chunks sum many per-dimension log-probs; this keeps the ratio finite). No gradient flows
      through a clamped entry.
    - ``aggregation`` ("token-mean"): see :mod:`vla_rl.algos.aggregation`.
    """

    clip_low: float = 0.2
    clip_high: float | None = 0.28
    dual_clip_c: float | None = 3.0
    log_ratio_clamp: float = 20.0
    aggregation: str = "token-mean"

    def __post_init__(self) -> None:
        """Types and ranges of every field (a subclass's too, by annotation); the ranges of the loss's own
        fields are checked here only, also where a subclass (the update's config) extends them.

        Raises:
            FieldError: the first wrong field, e.g. ``clip_low=-0.1: must be > 0``.
        """
        check_types(self)
        for name in ("clip_low", "clip_high", "log_ratio_clamp"):
            require(self, name, low=0, low_open=True)
        require(self, "dual_clip_c", low=1, low_open=True)
        require(self, "aggregation", choices=sorted(LOSS_AGGREGATIONS))


@dataclass(frozen=True)
class LossOutput:
    """A scalar ``loss`` to minimise and detached scalar ``metrics`` for logging."""

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def _log_ratio(log_prob: torch.Tensor, old_log_prob: torch.Tensor, clamp: float) -> torch.Tensor:
    if log_prob.shape != old_log_prob.shape:
        raise ValueError(
            f"log_prob {tuple(log_prob.shape)} and old_log_prob {tuple(old_log_prob.shape)} differ in shape; "
            "reduce both to the same granularity"
        )
    return torch.clamp(log_prob - old_log_prob.detach(), -clamp, clamp)


def ppo_clip_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: PolicyLossConfig = PolicyLossConfig(),  # noqa: B008 (frozen, so sharing the default is safe)
    normalizer: float | torch.Tensor | None = None,
) -> LossOutput:
    """PPO clipped surrogate (Schulman et al., 2017) with clip-higher and dual-clip.

    Per token: ``max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))``, and for ``A < 0`` additionally
    ``min(that, -c A)``. Metrics: ``clip_fraction`` (tokens where the clipped term was taken),
    ``dual_clip_fraction`` (tokens capped by the dual clip), ``approx_kl`` (the k3 estimate of
    KL(old || new), ``(r - 1) - log r``), ``ratio_mean``.
    """
    clip_high = config.clip_low if config.clip_high is None else config.clip_high
    log_ratio = _log_ratio(log_prob, old_log_prob, config.log_ratio_clamp)
    ratio = torch.exp(log_ratio)
    token_advantages = expand_trailing(advantages.detach(), log_prob)
    unclipped = -token_advantages * ratio
    clipped = -token_advantages * torch.clamp(ratio, 1.0 - config.clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    dual_capped = torch.zeros_like(per_token, dtype=torch.bool)
    if config.dual_clip_c is not None:
        cap = -config.dual_clip_c * token_advantages
        dual_capped = (token_advantages < 0) & (per_token > cap)
        per_token = torch.where(dual_capped, cap, per_token)
    loss = aggregate_loss(per_token, mask, config.aggregation, normalizer)
    with torch.no_grad():
        metrics = {
            "clip_fraction": masked_mean((clipped > unclipped).float(), mask),
            "dual_clip_fraction": masked_mean(dual_capped.float(), mask),
            "approx_kl": masked_mean(ratio - 1.0 - log_ratio, mask),
            "ratio_mean": masked_mean(ratio, mask),
        }
    return LossOutput(loss, metrics)


def vanilla_policy_gradient_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: PolicyLossConfig = PolicyLossConfig(),  # noqa: B008
    normalizer: float | torch.Tensor | None = None,
) -> LossOutput:
    """Unclipped importance-weighted policy gradient ``-A * r`` (REINFORCE when ``old == current``).

    Only ``log_ratio_clamp`` and ``aggregation`` of ``config`` apply.
    """
    log_ratio = _log_ratio(log_prob, old_log_prob, config.log_ratio_clamp)
    ratio = torch.exp(log_ratio)
    per_token = -expand_trailing(advantages.detach(), log_prob) * ratio
    loss = aggregate_loss(per_token, mask, config.aggregation, normalizer)
    with torch.no_grad():
        metrics = {
            "approx_kl": masked_mean(ratio - 1.0 - log_ratio, mask),
            "ratio_mean": masked_mean(ratio, mask),
        }
    return LossOutput(loss, metrics)


PolicyLossFn = Callable[..., LossOutput]
POLICY_LOSSES: dict[str, PolicyLossFn] = {
    "ppo_clip": ppo_clip_loss,
    "vanilla": vanilla_policy_gradient_loss,
}


def get_policy_loss(name: str) -> PolicyLossFn:
    """Look a policy loss up by name; the error lists the valid names."""
    if name not in POLICY_LOSSES:
        raise ValueError(f"unknown policy loss {name!r}; valid names: {', '.join(sorted(POLICY_LOSSES))}")
    return POLICY_LOSSES[name]


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_range: float | None = None,
    huber_delta: float | None = None,
    aggregation: str = "token-mean",
    normalizer: float | torch.Tensor | None = None,
) -> LossOutput:
    """Critic loss; all tensors the same shape (``(S,)`` or ``(N, T)``).

    The error is ``0.5 * (V - R)^2``, or the Huber loss with threshold ``huber_delta`` (default None:
    squared), which equals it for ``|V - R| <= delta`` and grows linearly beyond. With ``clip_range``
    (default None: off) the prediction may move at most that far from ``old_values``, PPO2 style:
    ``max(err(V - R), err(old + clamp(V - old, -eps, eps) - R))``. Metric ``value_clip_fraction``.
    """

    def error(prediction: torch.Tensor) -> torch.Tensor:
        if huber_delta is None:
            return 0.5 * (prediction - returns) ** 2
        return F.huber_loss(prediction, returns, reduction="none", delta=huber_delta)

    unclipped = error(values)
    metrics: dict[str, torch.Tensor] = {}
    if clip_range is None:
        per_token = unclipped
    else:
        old = old_values.detach()
        clipped = error(old + torch.clamp(values - old, -clip_range, clip_range))
        per_token = torch.maximum(unclipped, clipped)
        metrics["value_clip_fraction"] = masked_mean((clipped > unclipped).float(), mask).detach()
    loss = aggregate_loss(per_token, mask, aggregation, normalizer)
    metrics["value_mean"] = masked_mean(values.detach(), mask)
    return LossOutput(loss, metrics)


def entropy_bonus_loss(
    entropy: torch.Tensor | None,
    mask: torch.Tensor,
    coef: float = 0.0,
    aggregation: str = "token-mean",
    normalizer: float | torch.Tensor | None = None,
) -> LossOutput:
    """``-coef * aggregate(entropy)``: minimising it raises the entropy. ``coef`` defaults to 0 (off).

    ``entropy`` is what the head's ``log_prob`` returned (same shape as the log-probs), or None where the
    head has no closed form (diffusion, flow): then ``coef`` must be 0.
    """
    if entropy is None:
        if coef != 0.0:
            raise ValueError(
                f"entropy_coef={coef}, but this action head defines no closed-form entropy (its log_prob "
                "returned entropy=None); set entropy_coef=0 for diffusion/flow heads"
            )
        return LossOutput(torch.zeros(()), {})
    mean_entropy = aggregate_loss(entropy, mask, aggregation, normalizer)
    return LossOutput(-coef * mean_entropy, {"entropy": mean_entropy.detach()})
