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

from dataclasses import dataclass

import torch

from policies.heads.bounded_gaussian import BoundedGaussian, check_bounded_gaussian_options
from policies.heads.common import check_chunks, check_embedding, gaussian_entropy, gaussian_log_prob
from policies.heads.flow import FlowHead, FlowHeadConfig


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
        check_bounded_gaussian_options(
            self.latent_init_std, self.latent_log_std_min, self.latent_log_std_max, self.latent_mean_bound, "latent"
        )


class SteeredFlowHead(FlowHead):
    """A :class:`FlowHead` whose initial noise comes from a learned Gaussian; see the module docstring."""

    config_class = SteeredFlowHeadConfig

    @property
    def log_prob_reaches_embedding(self) -> bool:
        return not self.config.detach_embedding

    def __init__(
        self, embedding_dim: int, chunk_size: int, action_dim: int, config: SteeredFlowHeadConfig | None = None
    ) -> None:
        config = config or SteeredFlowHeadConfig()
        super().__init__(embedding_dim, chunk_size, action_dim, config)
        self.latent = BoundedGaussian(
            embedding_dim, chunk_size, action_dim, config.latent_hidden_dim, config.latent_num_layers,
            config.latent_init_std, config.latent_log_std_min, config.latent_log_std_max, config.latent_mean_bound,
        )  # fmt: skip

    def latent_distribution(self, embedding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean ``(B, H, A)`` and std ``(B, H, A)`` of the initial noise."""
        check_embedding(embedding, self.embedding_dim)
        return self.latent(embedding.detach() if self.config.detach_embedding else embedding)

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
        actions = self.integrate_ode(embedding, latent.detach())
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
