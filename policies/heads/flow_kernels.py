"""Step kernels of the flow-matching head (pi0 time convention: t = 1 noise, t = 0 action).

The probability-flow ODE ``dx/dt = v`` is integrated from t = 1 to t = 0 with Euler steps
``x_{t - dt} = x_t - dt * v(x_t, t)`` (pi0, Black et al. 2024, arXiv 2410.24164, section 3).

Flow-SDE (piRL, arXiv 2510.25889, section 4; the ODE-to-SDE conversion of Flow-GRPO, Liu et al.
2025, arXiv 2505.05470, eq. 9-10, rewritten in the pi0 convention): the reverse-time SDE with the
same marginals as the ODE, discretised with Euler-Maruyama, gives the Gaussian step

    sigma_t = a * sqrt(t / (1 - t))
    mean    = x_t - dt * (v + sigma_t^2 / (2 t) * (x_t + (1 - t) v))
    std     = sqrt(dt) * sigma_t

with noise level ``a``. ``sigma_t`` is infinite at t = 1; as Flow-GRPO does, the time inside
``sigma_t`` is clamped to ``t_max`` (by default the grid's second point, 1 - 1/N), while the drift
keeps the true t (at t = 1 its ``(1 - t) v`` term vanishes and ``sigma^2 / (2 t)`` stays finite).
"""

from __future__ import annotations

import torch
from torch import nn

from policies.heads.denoiser import sinusoidal_embedding


def flow_sde_sigma(time: float, noise_level: torch.Tensor | float, max_time: float) -> torch.Tensor | float:
    """``a * sqrt(t' / (1 - t'))`` with ``t' = min(t, max_time)``; ``noise_level`` a float or ``(B, 1, 1)``."""
    clamped = min(time, max_time)
    return noise_level * (clamped / (1.0 - clamped)) ** 0.5


def flow_sde_step_moments(
    state: torch.Tensor,
    velocity: torch.Tensor,
    time: float,
    step_size: float,
    noise_level: torch.Tensor | float,
    max_time: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean ``(B, H, A)`` and std (broadcastable) of one Flow-SDE step from ``time`` to ``time - step_size``."""
    sigma = flow_sde_sigma(time, noise_level, max_time)
    drift = velocity + sigma**2 / (2.0 * time) * (state + (1.0 - time) * velocity)
    mean = state - step_size * drift
    std = torch.as_tensor(step_size**0.5 * sigma, dtype=state.dtype, device=state.device)
    return mean, std


class NoiseStdNetwork(nn.Module):
    """Flow-Noise's learned per-step std (piRL, arXiv 2510.25889, section 4, "Flow-Noise").

    ``forward(embedding (B, D), time (B,), state (B, H, A)) -> std (B, H, A)`` with
    ``log_var = log_var_min + (log_var_max - log_var_min) * sigmoid(raw)``, so the std always lies in
    ``[exp(log_var_min / 2), exp(log_var_max / 2)]``. The last layer starts near zero (weights scaled
    by 0.01, zero bias): the initial log-variance is close to the middle of the range for every input,
    while every layer already gets a gradient at the first update.
    """

    def __init__(
        self,
        embedding_dim: int,
        chunk_size: int,
        action_dim: int,
        hidden_dim: int,
        time_embedding_dim: int,
        log_var_min: float,
        log_var_max: float,
    ) -> None:
        super().__init__()
        self.chunk_size, self.action_dim = chunk_size, action_dim
        self.time_embedding_dim = time_embedding_dim
        self.log_var_min, self.log_var_max = log_var_min, log_var_max
        flat = chunk_size * action_dim
        self.network = nn.Sequential(
            nn.Linear(embedding_dim + time_embedding_dim + flat, hidden_dim),
            nn.SiLU(),
            nn.Linear(hidden_dim, hidden_dim),
            nn.SiLU(),
            nn.Linear(hidden_dim, flat),
        )
        with torch.no_grad():
            self.network[-1].weight.mul_(0.01)
            self.network[-1].bias.zero_()

    def forward(self, embedding: torch.Tensor, time: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        batch = state.shape[0]
        time_features = sinusoidal_embedding(time.expand(batch), self.time_embedding_dim).to(state.dtype)
        raw = self.network(torch.cat([embedding, time_features, state.reshape(batch, -1)], dim=-1))
        log_var = self.log_var_min + (self.log_var_max - self.log_var_min) * torch.sigmoid(raw)
        return (0.5 * log_var).exp().view(batch, self.chunk_size, self.action_dim)
