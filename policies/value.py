"""The critic: an MLP from the observation embedding to a scalar value."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from policies.encoders.state import mlp


class ValueHead(nn.Module):
    """``forward(embedding (B, D)) -> value (B,)``.

    Args:
        embedding_dim: D.
        hidden_dims: hidden layer sizes.
        detach_input: stop value-loss gradients at the embedding, so that only the actor
            loss shapes the shared encoders.
    """

    def __init__(self, embedding_dim: int, hidden_dims: Sequence[int], detach_input: bool = False) -> None:
        super().__init__()
        self.detach_input = detach_input
        self.mlp = mlp(embedding_dim, hidden_dims, 1)

    def forward(self, embedding: torch.Tensor) -> torch.Tensor:
        if self.detach_input:
            embedding = embedding.detach()
        return self.mlp(embedding).squeeze(-1)
