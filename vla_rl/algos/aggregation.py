"""Loss aggregation: how a tensor of per-token losses becomes one scalar.

Vocabulary (borrowed from LLM RL, made concrete for action chunks):

- A **token** is one log-prob entry at the granularity the algorithm chose (see
  ``policies.heads.base.reduce_log_prob``): one action dimension ("dimension", log-probs
  ``(..., H, A)``), one action of the chunk ("action", ``(..., H)``), or the whole chunk ("chunk").
- A **sequence** is what dim 0 of the loss indexes. Pass the loss with its rows laid out as the
  sequences you mean: ``(num_envs, num_steps, ...)`` makes a sequence one env's trajectory (one row of
  the rollout batch; its tokens are all its steps' entries), a flat mini-batch ``(B, H, A)`` makes a
  sequence one chunk step.

Modes (``loss`` ``(S, ...)``, ``mask`` a prefix-shaped or equal-shaped 0/1 tensor):

- ``token-mean``: every valid token weighs the same; ``sum(loss * mask) / num_valid_tokens``.
- ``seq-mean-token-sum``: sum the tokens of each sequence, then average over sequences.
- ``seq-mean-token-mean``: average the tokens of each sequence, then average over sequences
  (every sequence weighs the same, whatever its length; the original GRPO choice).
- ``seq-mean-token-sum-norm``: sum of all valid tokens divided by ``S * tokens_per_sequence`` (the
  padded length, a constant): the length-unbiased choice of Dr. GRPO (Liu et al., 2025).

Sequences without any valid token are left out of the sequence means. With gradient accumulation
or data parallelism, pass ``normalizer`` (the global token count for ``token-mean``, the global number
of sequences with a valid token for the ``seq-mean-*`` modes, or ``S * tokens_per_sequence`` for
``seq-mean-token-sum-norm``) so that summing the micro-batch losses gives the full-batch loss exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from vla_rl.algos.masked import expand_trailing, masked_count, masked_sum

AggregationFn = Callable[..., torch.Tensor]


def _token_dims(loss: torch.Tensor) -> tuple[int, ...]:
    return tuple(range(1, loss.dim()))


def _per_sequence_sum_and_count(loss: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if loss.dim() == 1:
        return masked_sum(loss.unsqueeze(1), mask.unsqueeze(1), 1), masked_count(
            loss.unsqueeze(1), mask.unsqueeze(1), 1
        )
    dims = _token_dims(loss)
    return masked_sum(loss, mask, dims), masked_count(loss, mask, dims)


def token_mean(
    loss: torch.Tensor, mask: torch.Tensor, normalizer: float | torch.Tensor | None = None
) -> torch.Tensor:
    """Mean over all valid tokens; ``normalizer`` replaces the local valid-token count."""
    denominator = masked_count(loss, mask).clamp(min=1.0) if normalizer is None else normalizer
    return masked_sum(loss, mask) / denominator


def seq_mean_token_sum(
    loss: torch.Tensor, mask: torch.Tensor, normalizer: float | torch.Tensor | None = None
) -> torch.Tensor:
    """Per-sequence token sum, averaged over sequences with a valid token (or divided by ``normalizer``)."""
    sums, counts = _per_sequence_sum_and_count(loss, mask)
    present = counts > 0
    denominator = present.sum().clamp(min=1) if normalizer is None else normalizer
    return torch.where(present, sums, torch.zeros_like(sums)).sum() / denominator


def seq_mean_token_mean(
    loss: torch.Tensor, mask: torch.Tensor, normalizer: float | torch.Tensor | None = None
) -> torch.Tensor:
    """Per-sequence token mean, averaged over sequences with a valid token (or divided by ``normalizer``)."""
    sums, counts = _per_sequence_sum_and_count(loss, mask)
    present = counts > 0
    per_sequence = torch.where(present, sums / counts.clamp(min=1.0), torch.zeros_like(sums))
    denominator = present.sum().clamp(min=1) if normalizer is None else normalizer
    return per_sequence.sum() / denominator


def seq_mean_token_sum_norm(
    loss: torch.Tensor, mask: torch.Tensor, normalizer: float | torch.Tensor | None = None
) -> torch.Tensor:
    """Sum of valid tokens over ``S * tokens_per_sequence`` (constant; ``normalizer`` replaces it)."""
    tokens_per_sequence = loss[0].numel() if loss.dim() > 1 else 1
    denominator = loss.shape[0] * tokens_per_sequence if normalizer is None else normalizer
    return masked_sum(loss, mask) / denominator


LOSS_AGGREGATIONS: dict[str, AggregationFn] = {
    "token-mean": token_mean,
    "seq-mean-token-sum": seq_mean_token_sum,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum-norm": seq_mean_token_sum_norm,
}


def aggregate_loss(
    loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token-mean",
    normalizer: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduce per-token ``loss`` ``(S, ...)`` under ``mask`` (same shape or a prefix of it) to a scalar.

    ``mode`` (default "token-mean") is one of :data:`LOSS_AGGREGATIONS`; see the module docstring.
    """
    if mode not in LOSS_AGGREGATIONS:
        raise ValueError(
            f"unknown loss aggregation mode {mode!r}; valid modes: {', '.join(sorted(LOSS_AGGREGATIONS))}"
        )
    expand_trailing(mask, loss)  # validates that the mask lines up with the loss
    return LOSS_AGGREGATIONS[mode](loss, mask, normalizer)
