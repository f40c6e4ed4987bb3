"""The critic: an MLP from the observation embedding to a scalar value."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from policies.encoders.state import mlp


class ValueHead(nn.Module):
    """``forward(embedding (B, D), rl_features (B, F) or None) -> value (B,)``.

    Args:
        embedding_dim: D.
        hidden_dims: hidden layer sizes.
        detach_input: stop value-loss gradients at the embedding, so that only the actor
            loss shapes the shared encoders.
        rl_feature_dim: F, features of the RL-only encoder (``policy.rl_vision``); the value loss
            trains that encoder whatever ``detach_input`` says (nothing but RL reads it).
    """

    def __init__(
        self, embedding_dim: int, hidden_dims: Sequence[int], detach_input: bool = False, rl_feature_dim: int = 0
    ) -> None:
        super().__init__()
        self.detach_input = detach_input
        self.rl_feature_dim = rl_feature_dim
        self.mlp = mlp(embedding_dim + rl_feature_dim, hidden_dims, 1)

    def forward(self, embedding: torch.Tensor, rl_features: torch.Tensor | None = None) -> torch.Tensor:
        if self.detach_input:
            embedding = embedding.detach()
        if (rl_features is None) != (self.rl_feature_dim == 0):
            raise ValueError(
                f"this value head reads rl_features of width {self.rl_feature_dim}; got "
                f"{None if rl_features is None else tuple(rl_features.shape)}"
            )
        inputs = embedding if rl_features is None else torch.cat([embedding, rl_features], dim=-1)
        # A fresh tensor, not a view of the MLP's (B, 1) output: FSDP2 hooks the outputs of a sharded
        # module's forward methods, and warns that an in-place op on a view would drop its pre-backward hook.
        return self.mlp(inputs).squeeze(-1).clone()
