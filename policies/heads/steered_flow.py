"""Flow-matching head steered in its noise space: RL picks the initial noise, the flow stays as trained.

DSRL (Wagenmaker et al. 2025, "Steering Your Diffusion Policy with Latent Space Reinforcement
Learning", arXiv 2506.15799) observes that a behaviour-cloned diffusion or flow policy is a
deterministic map from its initial noise ``x_1`` to an action once the denoising runs as an ODE, and
that which mode of the demonstrations a chunk follows is decided by that noise. RL then trains a small
Gaussian *latent policy* ``x_1 ~ N(mu(e), sigma)`` on the observation embedding ``e`` and leaves the
pre-trained flow untouched:

- behaviour cloning trains the flow exactly as :class:`~policies.heads.flow.FlowHead` does (pi0's
  flow-matching loss); the latent policy starts as the flow's own noise, ``mu = 0``, ``sigma = 1``
  (zero-initialised last layer), so before RL the head samples what the flow head samples;
- sampling draws ``x_1`` from the latent policy and integrates the Euler ODE from t = 1 to t = 0;
  ``deterministic=True`` takes ``x_1 = mu(e)`` (the mean action of a Gaussian policy);
- the log-prob is the Gaussian density of the stored ``x_1`` (replay key ``latent`` ``(B, H, A)``), with
  a closed-form entropy: the PPO ratio is that of a low-dimensional Gaussian policy, and its gradient
  reaches only the latent policy (with ``detach_embedding``, not the encoders either). The flow, the
  encoders and the statistics the SFT stage produced stay exactly as they were.

The latent mean is bounded to ``[-mean_bound, mean_bound]`` by a tanh so that the flow is only ever
asked to denoise noise of the size it was trained on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from policies.heads.common import check_chunks, check_embedding, gaussian_entropy, gaussian_log_prob
from policies.heads.flow import FlowHead, FlowHeadConfig
from policies.heads.gaussian import mlp


@dataclass
class SteeredFlowHeadConfig(FlowHeadConfig):
    """Options of :class:`SteeredFlowHead`: those of :class:`FlowHeadConfig` plus the latent policy's.

    latent_hidden_dim, latent_num_layers: the latent mean MLP. latent_init_std: initial sigma (1: the
    flow's own noise). latent_log_std_min, latent_log_std_max: clamp of the learned log-sigma.
    latent_mean_bound: tanh bound of the latent mean (in units of the noise's std).
    detach_embedding: the latent policy reads the embedding without moving the encoders.
    """

    latent_hidden_dim: int = 128
    latent_num_layers: int = 2
    latent_init_std: float = 1.0
    latent_log_std_min: float = -4.0
    latent_log_std_max: float = 0.5
    latent_mean_bound: float = 2.5
    detach_embedding: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.latent_init_std <= 0 or not (
            self.latent_log_std_min <= math.log(self.latent_init_std) <= self.latent_log_std_max
        ):
            raise ValueError(
                f"steered flow head: latent_init_std={self.latent_init_std} must be > 0 with its log inside "
                f"[latent_log_std_min={self.latent_log_std_min}, latent_log_std_max={self.latent_log_std_max}]"
            )
        if self.latent_mean_bound <= 0:
            raise ValueError(f"steered flow head: latent_mean_bound={self.latent_mean_bound} must be > 0")


class SteeredFlowHead(FlowHead):
    """A :class:`FlowHead` whose initial noise comes from a learned Gaussian; see the module docstring."""

    config_class = SteeredFlowHeadConfig

    def __init__(
        self, embedding_dim: int, chunk_size: int, action_dim: int, config: SteeredFlowHeadConfig | None = None
    ) -> None:
        config = config or SteeredFlowHeadConfig()
        super().__init__(embedding_dim, chunk_size, action_dim, config)
        self.latent_mean = mlp(embedding_dim, config.latent_hidden_dim, config.latent_num_layers, chunk_size * action_dim)
        final = self.latent_mean[-1]
        assert isinstance(final, nn.Linear)
        nn.init.zeros_(final.weight)
        nn.init.zeros_(final.bias)
        self.latent_log_std = nn.Parameter(torch.full((chunk_size, action_dim), math.log(config.latent_init_std)))

    def latent_distribution(self, embedding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean ``(B, H, A)`` and std ``(B, H, A)`` of the initial noise."""
        check_embedding(embedding, self.embedding_dim)
        config = self.config
        source = embedding.detach() if config.detach_embedding else embedding
        raw = self.latent_mean(source).view(-1, self.chunk_size, self.action_dim)
        mean = config.latent_mean_bound * torch.tanh(raw / config.latent_mean_bound)
        log_std = self.latent_log_std.clamp(config.latent_log_std_min, config.latent_log_std_max)
        return mean, log_std.exp().expand_as(mean)

    @torch.no_grad()
    def denoise(self, embedding: torch.Tensor, initial_noise: torch.Tensor) -> torch.Tensor:
        """The flow's Euler ODE from ``initial_noise`` ``(B, H, A)`` at t = 1 to an action chunk at t = 0."""
        state = initial_noise
        for step in range(self.num_steps):
            state = state - self.step_size * self.velocity(embedding, state, self.time_of_step(step))
        return state

    def sample(
        self,
        embedding: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Chunks ``(B, H, A)``; replay holds ``latent`` (the initial noise) and its ``log_prob``, both ``(B, H, A)``."""
        mean, std = self.latent_distribution(embedding)
        if deterministic:
            latent = mean
        else:
            latent = mean + std * torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        actions = self.denoise(embedding, latent.detach())
        return actions, {"latent": latent.detach(), "log_prob": gaussian_log_prob(latent, mean, std)}

    def log_prob(
        self, embedding: torch.Tensor, actions: torch.Tensor, replay: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-density ``(B, H, A)`` of the stored initial noise under the latent policy, and its entropy."""
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        if "latent" not in replay:
            raise KeyError(
                f"replay lacks 'latent' (has {sorted(replay)}); pass the replay dict that sample() returned"
            )
        latent = replay["latent"]
        check_chunks(latent, embedding.shape[0], self.chunk_size, self.action_dim)
        mean, std = self.latent_distribution(embedding)
        return gaussian_log_prob(latent, mean, std), gaussian_entropy(std)
