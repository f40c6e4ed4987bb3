"""Masked reductions shared by the estimators and losses.

A mask is a boolean or 0/1 float tensor, broadcastable to the values; ``True`` (1) marks an entry that
counts. Entries outside the mask never influence a result, even when they hold NaN or inf.
"""

from __future__ import annotations

import torch


def expand_trailing(tensor: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Append singleton dims to ``tensor`` until it has ``like.dim()`` dims, then broadcast to ``like``.

    Turns a per-sample quantity ``(B,)`` or ``(B, H)`` into one that lines up with per-dimension
    log-probs ``(B, H, A)``. Raises when the leading dims do not match.
    """
    if tensor.dim() > like.dim():
        raise ValueError(
            f"cannot line up a tensor of shape {tuple(tensor.shape)} with one of shape {tuple(like.shape)}: "
            "it has more dims; pass a per-sample tensor whose shape is a prefix of the log-prob shape"
        )
    if tuple(tensor.shape) != tuple(like.shape[: tensor.dim()]):
        raise ValueError(
            f"shape {tuple(tensor.shape)} is not a prefix of {tuple(like.shape)}; advantages and masks "
            "must share the leading (sample) dims of the log-probs"
        )
    view = tensor.reshape(tuple(tensor.shape) + (1,) * (like.dim() - tensor.dim()))
    return view.expand_as(like)


def _as_float_mask(mask: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    return expand_trailing(mask, values).to(values.dtype)


def masked_sum(
    values: torch.Tensor, mask: torch.Tensor, dim: int | tuple[int, ...] | None = None
) -> torch.Tensor:
    """Sum of ``values`` where ``mask`` is set; masked-out entries (even NaN) contribute exactly zero."""
    float_mask = _as_float_mask(mask, values)
    selected = torch.where(float_mask > 0, values, torch.zeros_like(values))
    return selected.sum() if dim is None else selected.sum(dim)


def masked_count(
    values: torch.Tensor, mask: torch.Tensor, dim: int | tuple[int, ...] | None = None
) -> torch.Tensor:
    """Number of set mask entries, broadcast like ``values`` (so a ``(B,)`` mask counts ``H*A`` per row)."""
    float_mask = _as_float_mask(mask, values)
    return float_mask.sum() if dim is None else float_mask.sum(dim)


def masked_mean(
    values: torch.Tensor, mask: torch.Tensor, dim: int | tuple[int, ...] | None = None
) -> torch.Tensor:
    """Mean over set mask entries; 0 (not NaN) where no entry is set."""
    return masked_sum(values, mask, dim) / masked_count(values, mask, dim).clamp(min=1.0)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance over all set entries (a scalar); Bessel-corrected when ``unbiased`` and >= 2 entries."""
    mean = masked_mean(values, mask)
    count = masked_count(values, mask)
    squared = masked_sum((values - mean) ** 2, mask)
    denominator = (count - 1.0) if unbiased and count >= 2 else count.clamp(min=1.0)
    return squared / denominator


def masked_whiten(
    values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8, shift_mean: bool = True
) -> torch.Tensor:
    """Normalise ``values`` to zero mean and unit variance over the set entries; others become 0.

    ``eps`` (default 1e-8) guards the division when all valid entries are equal. With
    ``shift_mean=False`` only the scale changes (the mean is added back).
    """
    mean = masked_mean(values, mask)
    whitened = (values - mean) * torch.rsqrt(masked_var(values, mask) + eps)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(_as_float_mask(mask, values) > 0, whitened, torch.zeros_like(values))
