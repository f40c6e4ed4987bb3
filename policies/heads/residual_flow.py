"""Flow-matching head with a learned residual: RL corrects the frozen flow's chunks, the flow stays as trained.

Residual RL on a behaviour-cloned chunked policy (Ankile et al. 2024, "From Imitation to Refinement --
Residual RL for Precise Assembly", arXiv 2407.16677): the base policy proposes an action chunk and a
small Gaussian policy adds a correction to it, ``a = a_base + r`` with ``r ~ N(mu(e, a_base), sigma)``.
Behaviour cloning trains the flow exactly as :class:`~policies.heads.flow.FlowHead` does; RL trains
only the residual policy, whose mean starts at exactly zero (zero-initialised last layer), so before
RL the head acts as its flow does.

- The base chunk is the flow's Euler ODE from the initial noise; ``base_noise="zero"`` starts it from
  the noise's mean, so the base is one fixed function of the observation and the residual learns
  corrections to it; ``"sample"`` draws the noise from N(0, I) as the flow head does.
- ``deterministic=True`` adds the residual's mean; otherwise a sample.
- ``rl_feature_dim`` > 0: the residual also reads ``rl_features`` ``(B, F)``, the output of an encoder
  that only RL trains (``policy.rl_vision``), so that its corrections can depend on what the frozen
  embedding does not carry (where the objects are). The flow never reads them.
- Replay: ``base_action`` and ``residual`` ``(B, H, A)``. The log-prob is the Gaussian density of the
  stored residual (closed-form entropy); its gradient reaches only the residual policy (with
  ``detach_embedding``, not the encoders either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from policies.heads.bounded_gaussian import BoundedGaussian, check_bounded_gaussian_options
from policies.heads.common import check_chunks, check_embedding, gaussian_entropy, gaussian_log_prob
from policies.heads.flow import FlowHead, FlowHeadConfig


@dataclass
class ResidualFlowHeadConfig(FlowHeadConfig):
    """Options of :class:`ResidualFlowHead`: those of :class:`FlowHeadConfig` plus the residual policy's.

    residual_hidden_dim, residual_num_layers: the residual mean MLP on (embedding, base chunk).
    residual_init_std: initial sigma (normalised action units). residual_log_std_min, residual_log_std_max:
    clamp of the learned log-sigma. residual_mean_bound: tanh bound of the residual mean.
    base_noise: "zero" (the ODE from the noise's mean) or "sample". detach_embedding: the residual policy
    reads the embedding without moving the encoders.
    """

    residual_hidden_dim: int = 128
    residual_num_layers: int = 2
    residual_init_std: float = 0.1
    residual_log_std_min: float = -5.0
    residual_log_std_max: float = 0.0
    residual_mean_bound: float = 0.5
    base_noise: Literal["zero", "sample"] = "zero"
    detach_embedding: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bounded_gaussian_options(
            self.residual_init_std, self.residual_log_std_min, self.residual_log_std_max, self.residual_mean_bound,
            "residual",
        )  # fmt: skip
        if self.base_noise not in ("zero", "sample"):
            raise ValueError(f"residual flow head: base_noise={self.base_noise!r}; use 'zero' or 'sample'")


class ResidualFlowHead(FlowHead):
    """A :class:`FlowHead` plus a learned Gaussian correction of its chunks; see the module docstring."""

    config_class = ResidualFlowHeadConfig
    reads_rl_features = True

    @property
    def log_prob_reaches_embedding(self) -> bool:
        return not self.config.detach_embedding

    def __init__(
        self,
        embedding_dim: int,
        chunk_size: int,
        action_dim: int,
        config: ResidualFlowHeadConfig | None = None,
        rl_feature_dim: int = 0,
    ) -> None:
        config = config or ResidualFlowHeadConfig()
        super().__init__(embedding_dim, chunk_size, action_dim, config)
        if rl_feature_dim < 0:
            raise ValueError(f"residual flow head: rl_feature_dim={rl_feature_dim} must be >= 0")
        self.rl_feature_dim = rl_feature_dim
        self.residual = BoundedGaussian(
            embedding_dim + rl_feature_dim + chunk_size * action_dim, chunk_size, action_dim, config.residual_hidden_dim,
            config.residual_num_layers, config.residual_init_std, config.residual_log_std_min,
            config.residual_log_std_max, config.residual_mean_bound,
        )  # fmt: skip

    def residual_distribution(
        self, embedding: torch.Tensor, base_action: torch.Tensor, rl_features: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std ``(B, H, A)`` of the correction of ``base_action`` ``(B, H, A)``."""
        check_embedding(embedding, self.embedding_dim)
        check_chunks(base_action, embedding.shape[0], self.chunk_size, self.action_dim)
        source = embedding.detach() if self.config.detach_embedding else embedding
        inputs = [source, base_action.flatten(1)]
        if self.rl_feature_dim:
            if rl_features is None or tuple(rl_features.shape) != (embedding.shape[0], self.rl_feature_dim):
                got = None if rl_features is None else tuple(rl_features.shape)
                raise ValueError(
                    f"this residual head reads RL features of shape ({embedding.shape[0]}, {self.rl_feature_dim}); "
                    f"got {got}: pass the policy's rl_vision features as rl_features"
                )
            inputs.insert(1, rl_features)
        elif rl_features is not None:
            raise ValueError("this residual head was built with rl_feature_dim=0; it takes no rl_features")
        return self.residual(torch.cat(inputs, dim=1))

    def sample(
        self,
        embedding: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Chunks ``(B, H, A)``; replay holds ``base_action``, ``residual`` and ``log_prob``, all ``(B, H, A)``."""
        check_embedding(embedding, self.embedding_dim)
        shape = (embedding.shape[0], self.chunk_size, self.action_dim)
        noise = (
            torch.zeros(shape, device=embedding.device, dtype=embedding.dtype)
            if self.config.base_noise == "zero"
            else torch.randn(shape, generator=generator, device=embedding.device, dtype=embedding.dtype)
        )
        base = self.integrate_ode(embedding, noise)
        mean, std = self.residual_distribution(embedding, base, rl_features)
        residual = mean if deterministic else mean + std * torch.randn(
            shape, generator=generator, device=mean.device, dtype=mean.dtype
        )
        residual = residual.detach()
        replay = {"base_action": base, "residual": residual, "log_prob": gaussian_log_prob(residual, mean, std)}
        return base + residual, replay

    def log_prob(
        self,
        embedding: torch.Tensor,
        actions: torch.Tensor,
        replay: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Log-density ``(B, H, A)`` of the stored residual under the residual policy, and its entropy."""
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        missing = [key for key in ("base_action", "residual") if key not in replay]
        if missing:
            raise KeyError(f"replay lacks {missing} (has {sorted(replay)}); pass the replay dict that sample() returned")
        base, residual = replay["base_action"], replay["residual"]
        mismatch = (base + residual - actions).abs().max().item() if actions.numel() else 0.0
        if mismatch > 1e-3:
            raise ValueError(
                f"the actions differ from replay base_action + residual by up to {mismatch:.3g}; pass the "
                "normalised actions that sample() returned together with this replay"
            )
        mean, std = self.residual_distribution(embedding, base, rl_features)
        return gaussian_log_prob(residual, mean, std), gaussian_entropy(std)
