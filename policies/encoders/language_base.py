"""The interface of every language encoder (:mod:`policies.encoders.language` lists the kinds)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class LanguageEncoder(nn.Module):
    """``forward(instructions: list[str]) -> (B, output_dim)`` on the encoder's device."""

    output_dim: int

    def forward(self, instructions: Sequence[str]) -> torch.Tensor:
        raise NotImplementedError
