"""A small Gaussian policy on features, for heads that put a learned distribution on top of a frozen one.

``BoundedGaussian(features (B, F)) -> (mean, std)``, both ``(B, H, A)``: the mean is an MLP bounded to
``[-mean_bound, mean_bound]`` by a scaled tanh, with a zero-initialised last layer (the mean is exactly 0
before training, so a head built on it starts as the distribution it wraps); the std is a learned
state-independent parameter, clamped to ``[exp(log_std_min), exp(log_std_max)]``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from policies.heads.gaussian import mlp


def check_bounded_gaussian_options(
    init_std: float, log_std_min: float, log_std_max: float, mean_bound: float, prefix: str
) -> None:
    """Raise a ValueError naming the option (``<prefix>init_std`` ...) that a :class:`BoundedGaussian` cannot take."""
    if init_std <= 0 or not log_std_min <= math.log(init_std) <= log_std_max:
        raise ValueError(
            f"{prefix}init_std={init_std} must be > 0 with its log inside "
            f"[{prefix}log_std_min={log_std_min}, {prefix}log_std_max={log_std_max}]"
        )
    if mean_bound <= 0:
        raise ValueError(f"{prefix}mean_bound={mean_bound} must be > 0")


class BoundedGaussian(nn.Module):
    def __init__(
        self, input_dim: int, chunk_size: int, action_dim: int, hidden_dim: int, num_layers: int,
        init_std: float, log_std_min: float, log_std_max: float, mean_bound: float,
    ) -> None:  # fmt: skip
        super().__init__()
        check_bounded_gaussian_options(init_std, log_std_min, log_std_max, mean_bound, "")
        self.shape = (chunk_size, action_dim)
        self.log_std_min, self.log_std_max, self.mean_bound = log_std_min, log_std_max, mean_bound
        self.mean_network = mlp(input_dim, hidden_dim, num_layers, chunk_size * action_dim)
        final = self.mean_network[-1]
        assert isinstance(final, nn.Linear)
        nn.init.zeros_(final.weight)
        nn.init.zeros_(final.bias)
        self.log_std = nn.Parameter(torch.full(self.shape, math.log(init_std)))

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raw = self.mean_network(features).view(-1, *self.shape)
        mean = self.mean_bound * torch.tanh(raw / self.mean_bound)
        std = self.log_std.clamp(self.log_std_min, self.log_std_max).exp()
        return mean, std.expand_as(mean)
