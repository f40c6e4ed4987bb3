"""Proprioception: an MLP on the normalised robot state."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def mlp(input_dim: int, hidden_dims: Sequence[int], output_dim: int) -> nn.Sequential:
    """Linear layers with GELU between them (none after the last)."""
    layers: list[nn.Module] = []
    sizes = [input_dim, *hidden_dims]
    for size_in, size_out in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [nn.Linear(size_in, size_out), nn.GELU()]
    layers.append(nn.Linear(sizes[-1], output_dim))
    return nn.Sequential(*layers)


class StateEncoder(nn.Module):
    """``forward(state (B, S) normalised) -> (B, output_dim)``."""

    def __init__(self, state_dim: int, hidden_dims: Sequence[int], output_dim: int) -> None:
        super().__init__()
        self.output_dim = output_dim
        self.mlp = mlp(state_dim, hidden_dims, output_dim)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.mlp(state)
