"""Small numerical helpers shared by the action heads."""

from __future__ import annotations

import math

import torch

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def gaussian_log_prob(value: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Element-wise log-density of a diagonal Gaussian: ``-((x - mu) / s)^2 / 2 - log s - log sqrt(2 pi)``.

    All arguments broadcast to a common shape, e.g. ``(B, H, A)``; the result has that shape.
    """
    z = (value - mean) / std
    return -0.5 * z.square() - torch.log(std) - LOG_SQRT_2PI


def gaussian_entropy(std: torch.Tensor) -> torch.Tensor:
    """Element-wise entropy of a Gaussian with standard deviation ``std``: ``1/2 + log sqrt(2 pi) + log s``."""
    return 0.5 + LOG_SQRT_2PI + torch.log(std)


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``values`` ``(B, H, A)`` over the entries whose step is valid in ``mask`` ``(B, H)``.

    With ``mask=None`` this is the plain mean. A mask without any valid step gives 0 (not NaN).
    """
    if mask is None:
        return values.mean()
    if mask.shape != values.shape[:2]:
        raise ValueError(
            f"mask has shape {tuple(mask.shape)} but the action chunks have shape {tuple(values.shape)}; "
            "pass a mask of shape (batch, chunk_size) marking the valid steps"
        )
    weights = mask.to(values.dtype).unsqueeze(-1).expand_as(values)
    return (values * weights).sum() / weights.sum().clamp_min(1.0)


def check_embedding(embedding: torch.Tensor, embedding_dim: int) -> None:
    """Raise a ValueError naming the shapes when ``embedding`` is not ``(B, embedding_dim)``."""
    if embedding.dim() != 2 or embedding.shape[1] != embedding_dim:
        raise ValueError(
            f"the action head expects an observation embedding of shape (batch, {embedding_dim}), "
            f"got {tuple(embedding.shape)}; check the encoder's output size against the head's embedding_dim"
        )


def check_chunks(actions: torch.Tensor, batch_size: int, chunk_size: int, action_dim: int) -> None:
    """Raise a ValueError naming the shapes when ``actions`` is not ``(B, H, A)``."""
    expected = (batch_size, chunk_size, action_dim)
    if tuple(actions.shape) != expected:
        raise ValueError(
            f"the action head expects action chunks of shape {expected} (batch, chunk_size, action_dim), "
            f"got {tuple(actions.shape)}; check the policy's chunk_size and the env's action size"
        )
