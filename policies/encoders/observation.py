"""Fuses cameras, instruction and state into one observation embedding ``(B, D)``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from policies.config import PolicyConfig, PolicyIOSpec
from policies.encoders.language import build_language_encoder
from policies.encoders.state import StateEncoder
from policies.encoders.vision import VisionEncoder


class ObservationEncoder(nn.Module):
    """``forward(images {camera: uint8 (B, H, W, 3)}, state (B, S) normalised, instructions [B])
    -> embedding (B, D)``.

    The language embedding conditions the vision backbone through FiLM and is also
    concatenated with the image and state features before the fusion MLP.
    """

    def __init__(self, config: PolicyConfig, io_spec: PolicyIOSpec) -> None:
        super().__init__()
        self.language = build_language_encoder(config.language)
        self.vision = VisionEncoder(config.vision, io_spec.camera_names, self.language.output_dim)
        self.state = (
            StateEncoder(io_spec.state_dim, config.state.hidden_dims, config.state.output_dim)
            if io_spec.state_dim > 0 and config.state.enabled
            else None
        )
        state_features = self.state.output_dim if self.state is not None else 0
        fused = self.vision.output_dim + self.language.output_dim + state_features
        self.output_dim = config.embedding_dim
        self.fusion = nn.Sequential(
            nn.Linear(fused, config.embedding_dim),
            nn.LayerNorm(config.embedding_dim),
            nn.GELU(),
            nn.Linear(config.embedding_dim, config.embedding_dim),
        )

    def forward(
        self, images: dict[str, torch.Tensor], state: torch.Tensor | None, instructions: Sequence[str]
    ) -> torch.Tensor:
        language = self.language(instructions)
        parts = [self.vision(images, language), language]
        if self.state is not None:
            parts.append(self.state(state))
        return self.fusion(torch.cat(parts, dim=-1))
