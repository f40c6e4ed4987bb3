"""Steered head: RL picks the initial noise of a frozen chain head (flow or diffusion), which stays as trained.

DSRL (Wagenmaker et al. 2025, "Steering Your Diffusion Policy with Latent Space Reinforcement
Learning", arXiv 2506.15799) observes that a behaviour-cloned diffusion or flow policy is a
deterministic map from its initial noise ``x_0`` to an action once the denoising runs deterministically
(the flow's Euler ODE, DDIM with eta = 0), and that which mode of the demonstrations a chunk follows is
decided by that noise. RL then trains a small Gaussian *latent policy* ``x_0 ~ N(mu(e, f), sigma)`` on the
observation embedding ``e`` (and RL-only features ``f`` where built with ``rl_feature_dim`` > 0) and leaves
the pre-trained base head (:mod:`policies.heads.refiner`) untouched:

- behaviour cloning trains the base; the latent policy starts as the base's own noise, ``mu = 0``,
  ``sigma = 1`` (zero-initialised last layer, ``init_std`` 1), so before RL the head samples what the base's
  deterministic sampler makes of N(0, I) noise;
- sampling draws ``x_0`` from the latent policy and runs the base's deterministic chain from it;
  ``deterministic=True`` takes ``x_0 = mu`` (the mean action of a Gaussian policy);
- the log-prob is the Gaussian density of the stored ``x_0`` (replay key ``latent`` ``(B, H, A)``), with
  a closed-form entropy: the PPO ratio is that of a low-dimensional Gaussian policy, and its gradient
  reaches only the latent policy (with ``detach_embedding``, not the encoders either).

The latent mean is bounded to ``[-mean_bound, mean_bound]`` by a tanh so that the base is only ever
asked to denoise noise of the size it was trained on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policies.heads.common import check_chunks, gaussian_entropy, gaussian_log_prob
from policies.heads.refiner import Refiner, RefinerConfig


@dataclass
class SteeredHeadConfig(RefinerConfig):
    """Options of :class:`SteeredHead`: those of :class:`RefinerConfig`, with the latent policy's defaults
    (sigma starts at 1, the base's own noise; the mean bound is in units of the noise's std)."""

    init_std: float = 1.0
    log_std_min: float = -4.0
    log_std_max: float = 0.5
    mean_bound: float = 2.5


class SteeredHead(Refiner):
    """A chain head whose initial noise comes from a learned Gaussian; see the module docstring."""

    config_class = SteeredHeadConfig

    def __init__(self, embedding_dim: int, chunk_size: int, action_dim: int, config: SteeredHeadConfig | None = None,
                 rl_feature_dim: int = 0) -> None:  # fmt: skip
        super().__init__(embedding_dim, chunk_size, action_dim, config, rl_feature_dim)
        self.latent = self.build_refiner_policy(embedding_dim + rl_feature_dim)

    def latent_distribution(
        self, embedding: torch.Tensor, rl_features: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean ``(B, H, A)`` and std ``(B, H, A)`` of the initial noise."""
        return self.latent(torch.cat(self.refiner_inputs(embedding, rl_features), dim=1))

    def sample(
        self,
        embedding: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Chunks ``(B, H, A)``; replay holds ``latent`` (the initial noise) and its ``log_prob``, both ``(B, H, A)``."""
        mean, std = self.latent_distribution(embedding, rl_features)
        if deterministic:
            latent = mean
        else:
            latent = mean + std * torch.randn(
                mean.shape, generator=generator, device=mean.device, dtype=mean.dtype
            )
        actions = self.base.denoise(embedding, latent.detach())
        return actions, {"latent": latent.detach(), "log_prob": gaussian_log_prob(latent, mean, std)}

    def deterministic_action(
        self,
        embedding: torch.Tensor,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The base's deterministic chain from the latent mean ``(B, H, A)``, with gradients through both."""
        mean, _ = self.latent_distribution(embedding, rl_features)
        return self.base.deterministic_chain(
            embedding.detach() if self.config.detach_embedding else embedding, mean
        )

    def log_prob(
        self,
        embedding: torch.Tensor,
        actions: torch.Tensor,
        replay: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-density ``(B, H, A)`` of the stored initial noise under the latent policy, and its entropy."""
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        self.check_replay(replay, ("latent",))
        latent = replay["latent"]
        check_chunks(latent, embedding.shape[0], self.chunk_size, self.action_dim)
        mean, std = self.latent_distribution(embedding, rl_features)
        return gaussian_log_prob(latent, mean, std), gaussian_entropy(std)
