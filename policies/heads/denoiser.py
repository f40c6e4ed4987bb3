"""The denoising network shared by the diffusion and flow heads.

An MLP over the flattened chunk ``(B, H * A)`` made of residual blocks; each block is modulated by
FiLM (Perez et al. 2018, arXiv 1709.07871: ``(1 + gamma) * x + beta``) computed from the observation
embedding and a sinusoidal embedding of the noise level (Vaswani et al. 2017, section 3.5, as used for
diffusion timesteps by Ho et al. 2020). FiLM projections use the default (non-zero) initialisation:
with zero-initialised FiLM the conditioning network and the embedding would get no gradient at the
first update, which matters for a head trained by RL from scratch. Chunks are short (H <= 50, A <= 14 in practice), so flattening is cheap and lets every
step of the chunk see every other one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class DenoiserConfig:
    """Size of the denoising network (shared fields of the diffusion and flow head configs).

    hidden_dim: width of the residual MLP. num_blocks: residual blocks.
    time_embedding_dim: size of the sinusoidal noise-level embedding (even).
    """

    hidden_dim: int = 256
    num_blocks: int = 3
    time_embedding_dim: int = 64

    def __post_init__(self) -> None:
        if self.time_embedding_dim % 2 or self.time_embedding_dim <= 0:
            raise ValueError(f"time_embedding_dim={self.time_embedding_dim} must be a positive even number")
        if self.hidden_dim <= 0 or self.num_blocks <= 0:
            raise ValueError(
                f"hidden_dim={self.hidden_dim} and num_blocks={self.num_blocks} must both be positive"
            )


def sinusoidal_embedding(time: torch.Tensor, dim: int, max_period: float = 10_000.0) -> torch.Tensor:
    """``(B,)`` noise levels -> ``(B, dim)``: ``[cos(time * f_i), sin(time * f_i)]`` with ``f_i = max_period^(-i / (dim/2))``."""
    half = dim // 2
    frequencies = torch.exp(
        -math.log(max_period) * torch.arange(half, device=time.device, dtype=torch.float32) / half
    )
    angles = time.float()[:, None] * frequencies[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class FiLMResidualBlock(nn.Module):
    """``h + MLP(FiLM(LayerNorm(h), cond))`` on ``(B, hidden)`` features, with ``cond`` ``(B, hidden)``."""

    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden_dim)
        self.film = nn.Linear(hidden_dim, 2 * hidden_dim)
        self.mlp = nn.Sequential(
            nn.Linear(hidden_dim, hidden_dim), nn.SiLU(), nn.Linear(hidden_dim, hidden_dim)
        )

    def forward(self, features: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.film(condition).chunk(2, dim=-1)
        return features + self.mlp((1.0 + gamma) * self.norm(features) + beta)


class ChunkDenoiser(nn.Module):
    """Predicts noise (diffusion) or velocity (flow) for noisy chunks.

    ``forward(noisy_chunk (B, H, A), time (B,), embedding (B, D), condition_offset=None) -> (B, H, A)``.
    ``time`` is the head's own noise-level coordinate (diffusion timestep index, or flow time scaled by the
    head). ``condition_offset`` ``(B, hidden_dim)``, where given, is added to the conditioning vector that
    every block's FiLM reads (a head that conditions its RL policy on more than the embedding).
    """

    def __init__(self, embedding_dim: int, chunk_size: int, action_dim: int, config: DenoiserConfig) -> None:
        super().__init__()
        self.chunk_size, self.action_dim = chunk_size, action_dim
        self.time_embedding_dim = config.time_embedding_dim
        hidden = config.hidden_dim
        self.condition = nn.Sequential(
            nn.Linear(embedding_dim + config.time_embedding_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden)
        )
        self.input = nn.Linear(chunk_size * action_dim, hidden)
        self.blocks = nn.ModuleList(FiLMResidualBlock(hidden) for _ in range(config.num_blocks))
        self.output = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, chunk_size * action_dim))

    def forward(
        self,
        noisy_chunk: torch.Tensor,
        time: torch.Tensor,
        embedding: torch.Tensor,
        condition_offset: torch.Tensor | None = None,
    ) -> torch.Tensor:
        batch = noisy_chunk.shape[0]
        time_features = sinusoidal_embedding(time.expand(batch), self.time_embedding_dim).to(embedding.dtype)
        condition = self.condition(torch.cat([embedding, time_features], dim=-1))
        if condition_offset is not None:
            condition = condition + condition_offset
        features = self.input(noisy_chunk.reshape(batch, -1))
        for block in self.blocks:
            features = block(features, condition)
        return self.output(features).view(batch, self.chunk_size, self.action_dim)
