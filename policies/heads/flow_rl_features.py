"""Flow-matching head whose own weights RL fine-tunes, reading RL-only features beside a fixed embedding.

Where :class:`~policies.heads.residual_flow.ResidualFlowHead` freezes the flow and trains a correction
beside it, this head trains the flow itself (Flow-Noise or Flow-SDE PPO, piRL, arXiv 2510.25889), as
:class:`~policies.heads.flow.FlowHead` does, with two differences for RL:

- ``rl_feature_dim`` > 0: the denoiser also reads ``rl_features`` ``(B, F)``, the output of an encoder that
  only RL trains (``policy.rl_vision``), through a linear map ``P`` ``(F -> hidden_dim)`` whose output is
  added to the conditioning vector every FiLM block reads: ``c = MLP(e, t) + rl_feature_scale * P f``.
  ``P`` starts at zero, so before RL the head samples and scores exactly as its SFT flow does; it is built
  without drawing random numbers, so the flow initialises as a plain flow head's would. ``bc_loss``
  never reads the features (it is :class:`FlowHead`'s), so SFT leaves ``P`` at zero. Under Adam a
  parameter moves by about the learning rate per step, so ``rl_feature_scale`` multiplies the speed at
  which the features' influence grows, relative to the flow's own weights.
- ``detach_embedding`` (True): the RL log-prob reads the embedding without a gradient, so RL never moves
  the encoders (``log_prob_reaches_embedding`` is False): the policy stores the embedding at sampling time
  and the update reuses it. ``bc_loss`` still trains the encoders.

- ``initial_noise``: ``"sample"`` (the chain starts from N(0, I) noise, as the flow head's does) or ``"zero"``
  (it starts from the noise's mean, as the residual head's base chunk does). No parameter shapes the initial
  noise, so where it decides the episode (``docs/results.md``) its randomness is luck that the PPO gradient
  cannot credit; from zero, all the randomness of a chunk lies in the denoising steps' learned noise.

The kernels of the denoising chain are conditioned on the concatenation ``[embedding, rl_features]``
``(B, embedding_dim + F)`` (``condition_dim``), so the replay and the exact chain log-probs are those of
:mod:`policies.heads.chain`; the Flow-Noise std network reads the embedding only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from policies.heads.common import check_embedding
from policies.heads.flow import FlowHead, FlowHeadConfig


@dataclass
class RLFeatureFlowHeadConfig(FlowHeadConfig):
    """Options of :class:`RLFeatureFlowHead`: those of :class:`FlowHeadConfig` (Flow-Noise by default) plus:

    detach_embedding: the RL log-prob reads the embedding without moving the encoders.
    rl_feature_scale: factor on the zero-initialised projection of the RL features (its relative speed).
    initial_noise: "sample" (x_0 ~ N(0, I)) or "zero" (x_0 = 0, in sampling and evaluation alike).
    """

    rl_method: Literal["sde", "noise"] = "noise"
    detach_embedding: bool = True
    rl_feature_scale: float = 1.0
    initial_noise: Literal["sample", "zero"] = "sample"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.initial_noise not in ("sample", "zero"):
            raise ValueError(
                f"flow_rl_features head: initial_noise={self.initial_noise!r}; use 'sample' or 'zero'"
            )
        if not self.rl_feature_scale > 0:
            raise ValueError(f"flow_rl_features head: rl_feature_scale={self.rl_feature_scale} must be > 0")


class RLFeatureFlowHead(FlowHead):
    """A :class:`FlowHead` that RL fine-tunes on a fixed embedding plus RL-only features; see the module docstring."""

    config_class = RLFeatureFlowHeadConfig
    reads_rl_features = True

    def __init__(
        self,
        embedding_dim: int,
        chunk_size: int,
        action_dim: int,
        config: RLFeatureFlowHeadConfig | None = None,
        rl_feature_dim: int = 0,
    ) -> None:
        config = config or RLFeatureFlowHeadConfig()
        super().__init__(embedding_dim, chunk_size, action_dim, config)
        if rl_feature_dim < 0:
            raise ValueError(f"flow_rl_features head: rl_feature_dim={rl_feature_dim} must be >= 0")
        self.rl_feature_dim = rl_feature_dim
        self.feature_projection = None
        if rl_feature_dim:
            # skip_init: no random draws, then zeros: at RL start the head is exactly its SFT flow
            self.feature_projection = nn.utils.skip_init(
                nn.Linear, rl_feature_dim, config.hidden_dim, bias=False
            )
            nn.init.zeros_(self.feature_projection.weight)

    @property
    def log_prob_reaches_embedding(self) -> bool:
        return not self.config.detach_embedding

    @property
    def condition_dim(self) -> int:
        return self.embedding_dim + self.rl_feature_dim

    def rl_condition(self, embedding: torch.Tensor, rl_features: torch.Tensor | None) -> torch.Tensor:
        """What the chain's kernels read: ``[embedding, rl_features]`` ``(B, condition_dim)``."""
        check_embedding(embedding, self.embedding_dim)
        source = embedding.detach() if self.config.detach_embedding else embedding
        if not self.rl_feature_dim:
            if rl_features is not None:
                raise ValueError(
                    "this flow_rl_features head was built with rl_feature_dim=0; it takes no rl_features"
                )
            return source
        if rl_features is None or tuple(rl_features.shape) != (embedding.shape[0], self.rl_feature_dim):
            got = None if rl_features is None else tuple(rl_features.shape)
            raise ValueError(
                f"this flow_rl_features head reads RL features of shape ({embedding.shape[0]}, {self.rl_feature_dim}); "
                f"got {got}: pass the policy's rl_vision features as rl_features"
            )
        return torch.cat([source, rl_features.to(source.dtype)], dim=1)

    def _split(self, condition: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if (
            condition.shape[1] == self.embedding_dim
        ):  # bc_loss and integrate_ode callers pass the embedding alone
            return condition, None
        return condition[:, : self.embedding_dim], condition[:, self.embedding_dim :]

    def velocity(self, embedding: torch.Tensor, state: torch.Tensor, time: float) -> torch.Tensor:
        """``v_theta(x_t, t, c)`` ``(B, H, A)``; ``embedding`` is the embedding or the condition ``(B, condition_dim)``."""
        embedding, features = self._split(embedding)
        offset = None
        if features is not None and self.feature_projection is not None:
            offset = self.config.rl_feature_scale * self.feature_projection(features)
        network_time = torch.full((1,), time * self.config.time_scale, device=state.device)
        return self.denoiser(state, network_time, embedding, condition_offset=offset)

    def noise_std(self, embedding: torch.Tensor, state: torch.Tensor, time: float) -> torch.Tensor:
        return super().noise_std(self._split(embedding)[0], state, time)

    def initial_state(
        self,
        shape: tuple[int, ...],
        generator: torch.Generator | None,
        device: torch.device,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        if self.config.initial_noise == "zero":
            return torch.zeros(shape, device=device, dtype=dtype)
        return super().initial_state(shape, generator, device, dtype)

    def initial_log_prob(self, initial_noise: torch.Tensor) -> torch.Tensor | None:
        """None from a fixed zero start (it has no density, and no parameter changes it)."""
        return None if self.config.initial_noise == "zero" else super().initial_log_prob(initial_noise)

    def sample(
        self,
        embedding: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Chunks ``(B, H, A)`` and the replay of :meth:`DenoisingChainHead.sample`, conditioned on the RL features too."""
        return super().sample(self.rl_condition(embedding, rl_features), deterministic, generator)

    def log_prob(
        self,
        embedding: torch.Tensor,
        actions: torch.Tensor,
        replay: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The exact chain log-prob ``(B, H, A)`` (and Flow-Noise's kernel entropies) of the stored chain."""
        return super().log_prob(self.rl_condition(embedding, rl_features), actions, replay)
