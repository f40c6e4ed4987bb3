"""KL divergence to a reference policy, estimated from samples of the current policy.

With ``x ~ p`` (the actions the current policy took) and ``log_ratio = log p(x) - log q(x)`` (q the
reference), Schulman's estimators of ``KL(p || q)`` (http://joschu.net/blog/kl-approx.html) are

- ``k1 = log_ratio``: unbiased, high variance, can be negative;
- ``k2 = 0.5 * log_ratio**2``: biased (exact to second order when p and q are close), low variance;
- ``k3 = exp(-log_ratio) - 1 + log_ratio``: unbiased and always >= 0, low variance.

The KL can act as a loss term (:func:`kl_loss`) or as a per-step reward penalty
(:func:`kl_penalized_rewards`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from vla_rl.algos.aggregation import aggregate_loss


def kl_k1(log_ratio: torch.Tensor) -> torch.Tensor:
    return log_ratio


def kl_k2(log_ratio: torch.Tensor) -> torch.Tensor:
    return 0.5 * log_ratio**2


def kl_k3(log_ratio: torch.Tensor) -> torch.Tensor:
    return torch.expm1(-log_ratio) + log_ratio


KL_ESTIMATORS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "k1": kl_k1,
    "k2": kl_k2,
    "k3": kl_k3,
}


def kl_estimate(
    log_prob: torch.Tensor, ref_log_prob: torch.Tensor, estimator: str = "k3", clamp: float | None = None
) -> torch.Tensor:
    """Per-entry estimate of KL(current || reference), same shape as the inputs.

    ``estimator`` (default "k3") is one of :data:`KL_ESTIMATORS`. ``clamp`` (default None) bounds the
    log-ratio to ``[-clamp, clamp]`` first, against overflow in k3's exponential. The reference is
    treated as a constant (no gradient flows into it).
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(
            f"unknown KL estimator {estimator!r}; valid names: {', '.join(sorted(KL_ESTIMATORS))}"
        )
    if log_prob.shape != ref_log_prob.shape:
        raise ValueError(
            f"log_prob {tuple(log_prob.shape)} and ref_log_prob {tuple(ref_log_prob.shape)} differ in shape"
        )
    log_ratio = log_prob - ref_log_prob.detach()
    if clamp is not None:
        log_ratio = torch.clamp(log_ratio, -clamp, clamp)
    return KL_ESTIMATORS[estimator](log_ratio)


def kl_loss(
    log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    mask: torch.Tensor,
    estimator: str = "k3",
    aggregation: str = "token-mean",
    clamp: float | None = 20.0,
    normalizer: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """KL to the reference as a loss term (scalar; multiply by the KL coefficient).

    ``log_prob`` ``(S, ...)`` at the chosen granularity, ``mask`` a prefix shape of it; ``clamp`` 20.
    """
    return aggregate_loss(
        kl_estimate(log_prob, ref_log_prob, estimator, clamp), mask, aggregation, normalizer
    )


def kl_penalized_rewards(
    rewards: torch.Tensor,
    log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    mask: torch.Tensor,
    coef: float = 0.0,
    estimator: str = "k1",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Subtract ``coef * KL`` from each step's reward; returns ``(rewards (N, T), kl (N, T))``.

    ``log_prob`` and ``ref_log_prob`` are ``(N, T, ...)``; trailing dims are summed first, so the
    estimate is of the KL between the two distributions over the whole action chunk. ``coef`` defaults
    to 0 and ``estimator`` to "k1" (the classic RLHF reward penalty). Invalid steps get KL 0.
    """
    step_log_prob = log_prob.reshape(*rewards.shape, -1).sum(-1)
    step_ref_log_prob = ref_log_prob.reshape(*rewards.shape, -1).sum(-1)
    kl = kl_estimate(step_log_prob, step_ref_log_prob, estimator).detach()
    kl = torch.where(mask.bool(), kl, torch.zeros_like(kl))
    return rewards - coef * kl, kl
