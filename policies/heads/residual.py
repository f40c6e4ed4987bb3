"""Residual head: RL corrects the chunks of a frozen chain head (flow or diffusion), which stays as trained.

Residual RL on a behaviour-cloned chunked policy (Ankile et al. 2024, "From Imitation to Refinement --
Residual RL for Precise Assembly", arXiv 2407.16677): the base policy proposes an action chunk and a
small Gaussian policy adds a correction to it, ``a = a_base + r`` with ``r ~ N(mu(e, f, a_base), sigma)``.
The base is any chain head (:mod:`policies.heads.refiner`); the correction's mean starts at exactly zero
(zero-initialised last layer), so before RL the head acts as its base's deterministic sampler does.

- The base chunk is the base's deterministic chain from its initial noise; ``base_noise="zero"`` starts it
  from the noise's mean, so the base is one fixed function of the observation and the residual learns
  corrections to it; ``"sample"`` draws the noise from N(0, I).
- ``deterministic=True`` adds the residual's mean; otherwise a sample.
- RL-only features ``f`` (``rl_feature_dim`` > 0) let the corrections depend on what the frozen embedding
  does not carry (where the objects are); the base never reads them.
- Replay: ``base_action`` and ``residual`` ``(B, H, A)``. The log-prob is the Gaussian density of the
  stored residual (closed-form entropy); its gradient reaches only the residual policy (with
  ``detach_embedding``, not the encoders either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from policies.heads.common import check_chunks, check_embedding, gaussian_entropy, gaussian_log_prob
from policies.heads.refiner import Refiner, RefinerConfig


@dataclass
class ResidualHeadConfig(RefinerConfig):
    """Options of :class:`ResidualHead`: those of :class:`RefinerConfig` plus ``base_noise``: "zero" (the base's
    deterministic chain from the noise's mean) or "sample"."""

    base_noise: Literal["zero", "sample"] = "zero"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.base_noise not in ("zero", "sample"):
            raise ValueError(f"residual head: base_noise={self.base_noise!r}; use 'zero' or 'sample'")


class ResidualHead(Refiner):
    """A chain head plus a learned Gaussian correction of its chunks; see the module docstring."""

    config_class = ResidualHeadConfig

    def __init__(self, embedding_dim: int, chunk_size: int, action_dim: int, config: ResidualHeadConfig | None = None,
                 rl_feature_dim: int = 0) -> None:  # fmt: skip
        super().__init__(embedding_dim, chunk_size, action_dim, config, rl_feature_dim)
        self.residual = self.build_refiner_policy(embedding_dim + rl_feature_dim + chunk_size * action_dim)

    def base_chunk(self, embedding: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """The base's deterministic chunk ``(B, H, A)`` from its initial noise: zero, or drawn with ``generator``
        (``base_noise``)."""
        shape = (embedding.shape[0], self.chunk_size, self.action_dim)
        noise = (
            torch.zeros(shape, device=embedding.device, dtype=embedding.dtype)
            if self.config.base_noise == "zero"
            else torch.randn(shape, generator=generator, device=embedding.device, dtype=embedding.dtype)
        )
        return self.base.denoise(embedding, noise)

    def residual_distribution(
        self, embedding: torch.Tensor, base_action: torch.Tensor, rl_features: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std ``(B, H, A)`` of the correction of ``base_action`` ``(B, H, A)``."""
        inputs = self.refiner_inputs(embedding, rl_features)
        check_chunks(base_action, embedding.shape[0], self.chunk_size, self.action_dim)
        return self.residual(torch.cat([*inputs, base_action.flatten(1)], dim=1))

    def sample(
        self,
        embedding: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Chunks ``(B, H, A)``; replay holds ``base_action``, ``residual`` and ``log_prob``, all ``(B, H, A)``."""
        check_embedding(embedding, self.embedding_dim)
        base = self.base_chunk(embedding, generator)
        mean, std = self.residual_distribution(embedding, base, rl_features)
        residual = mean
        if not deterministic:
            residual = mean + std * torch.randn(
                mean.shape, generator=generator, device=mean.device, dtype=mean.dtype
            )
        residual = residual.detach()
        replay = {
            "base_action": base,
            "residual": residual,
            "log_prob": gaussian_log_prob(residual, mean, std),
        }
        return base + residual, replay

    def deterministic_action(
        self,
        embedding: torch.Tensor,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The base chunk plus the correction's mean ``(B, H, A)``, with gradients through the correction."""
        base = self.base_chunk(embedding, generator)
        return base + self.residual_distribution(embedding, base, rl_features)[0]

    def log_prob(
        self,
        embedding: torch.Tensor,
        actions: torch.Tensor,
        replay: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-density ``(B, H, A)`` of the stored residual under the residual policy, and its entropy."""
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        self.check_replay(replay, ("base_action", "residual"))
        base, residual = replay["base_action"], replay["residual"]
        mismatch = (base + residual - actions).abs().max().item() if actions.numel() else 0.0
        if mismatch > 1e-3:
            raise ValueError(
                f"the actions differ from replay base_action + residual by up to {mismatch:.3g}; pass the "
                "normalised actions that sample() returned together with this replay"
            )
        mean, std = self.residual_distribution(embedding, base, rl_features)
        return gaussian_log_prob(residual, mean, std), gaussian_entropy(std)
