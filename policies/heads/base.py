"""The contract every action head obeys, so that PPO and GRPO treat all heads alike.

A head maps an observation embedding ``(B, D)`` to action chunks ``(B, H, A)`` in
*normalised* action units (the policy unnormalises them with dataset statistics).

- ``sample(embedding, deterministic=False, generator=None, rl_features=None) -> (actions, replay)``:
  ``actions`` is ``(B, H, A)``; ``replay`` is a dict of tensors with leading batch dim
  ``B`` that holds everything ``log_prob`` needs to recompute the exact log-probability
  of this sample later (for a diffusion or flow head: the denoising chain and the
  chosen stochastic step), and ``replay["log_prob"]`` ``(B, H, A)``: that log-probability as
  ``log_prob`` recomputes it (the policy's ``act`` takes it from here instead of recomputing it).
  ``deterministic=True`` is the evaluation mode (mean action, ODE sampling, ...).
- ``log_prob(embedding, actions, replay, rl_features=None) -> (log_prob, entropy)``: per action dimension,
  both ``(B, H, A)``; ``entropy`` is ``None`` where the head has no closed form.
  Differentiable with respect to the head's parameters (and the embedding).
- ``deterministic_action(embedding, generator=None, rl_features=None) -> actions``: the chunk ``(B, H, A)``
  of the evaluated policy (what ``sample(..., deterministic=True)`` returns), differentiable with respect to
  the parameters RL trains: the pathwise gradient of the evaluated policy's objective that the alignment
  benchmark (``vla-rl bench alignment``) compares the PPO gradient with.
- ``bc_loss(embedding, actions, mask=None) -> scalar``: behaviour-cloning loss on
  normalised expert chunks ``(B, H, A)``; ``mask`` ``(B, H)`` marks valid steps.
- ``set_training_step(step)``: lets a head follow a schedule over RL training steps
  (noise-level annealing of the flow head); a no-op for heads without schedules.
- ``log_prob_reaches_embedding``: whether ``log_prob``'s gradient flows into the embedding
  (True by default); heads that read a detached embedding say False, and the policy then
  reuses the embedding computed at sampling time instead of re-encoding the observation.
- ``rl_features`` ``(B, F)``: features of an encoder that only RL trains (``policy.rl_vision``), which a
  head's RL policy reads next to the embedding and ``bc_loss`` never sees. Every head takes the keyword
  (None: no features) and says its width in ``rl_feature_dim`` (0: it reads none, the default); heads
  whose class says ``reads_rl_features`` take ``rl_feature_dim`` in their constructor, and
  :meth:`ActionHead.check_rl_features` refuses features of the wrong width (or features given to a head
  built without them) with the shapes named.

:func:`reduce_log_prob` (the policy protocol's, :mod:`contract.policy`) turns per-dimension log-probs into the
granularity an algorithm asks for.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from contract.policy import LogProbGranularity, reduce_log_prob

__all__ = ["ActionHead", "LogProbGranularity", "reduce_log_prob"]


class ActionHead(nn.Module):
    """Base class of action heads; see the module docstring for the contract."""

    chunk_size: int
    action_dim: int
    reads_rl_features: bool = False
    rl_feature_dim: int = 0

    def sample(
        self,
        embedding: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise NotImplementedError

    def log_prob(
        self,
        embedding: torch.Tensor,
        actions: torch.Tensor,
        replay: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def deterministic_action(
        self,
        embedding: torch.Tensor,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no differentiable deterministic_action")

    def build_feature_projection(self, rl_feature_dim: int, width: int) -> None:
        """Set ``rl_feature_dim`` and ``self.feature_projection``: a linear map ``(F -> width)`` without bias, zero
        and built without drawing random numbers (a head with it starts as the head without); None for F = 0."""
        if rl_feature_dim < 0:
            raise ValueError(f"{type(self).__name__}: rl_feature_dim={rl_feature_dim} must be >= 0")
        self.rl_feature_dim = rl_feature_dim
        self.feature_projection: nn.Linear | None = None
        if rl_feature_dim:
            self.feature_projection = nn.utils.skip_init(nn.Linear, rl_feature_dim, width, bias=False)
            nn.init.zeros_(self.feature_projection.weight)

    def check_rl_features(self, embedding: torch.Tensor, rl_features: torch.Tensor | None) -> None:
        """Raise a ValueError naming the shapes unless ``rl_features`` is ``(B, rl_feature_dim)`` (None when 0)."""
        if not self.rl_feature_dim:
            if rl_features is not None:
                raise ValueError(
                    f"this {type(self).__name__} was built with rl_feature_dim=0; it takes no rl_features "
                    f"(got {tuple(rl_features.shape)}): build it with the policy's rl_vision enabled"
                )
            return
        expected = (embedding.shape[0], self.rl_feature_dim)
        if rl_features is None or tuple(rl_features.shape) != expected:
            got = None if rl_features is None else tuple(rl_features.shape)
            raise ValueError(
                f"this {type(self).__name__} reads RL features of shape {expected}; got {got}: pass the "
                "policy's rl_vision features as rl_features"
            )

    @staticmethod
    def check_replay(replay: dict[str, torch.Tensor], keys: Sequence[str]) -> None:
        """Raise a KeyError naming the missing ones unless ``replay`` holds every key of ``keys``."""
        missing = [key for key in keys if key not in replay]
        if missing:
            raise KeyError(
                f"replay lacks {missing} (has {sorted(replay)}); pass the replay dict that sample() returned"
            )

    def bc_loss(
        self, embedding: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        raise NotImplementedError

    @property
    def log_prob_reaches_embedding(self) -> bool:
        """Whether the gradient of ``log_prob`` reaches the embedding (and so the encoders)."""
        return True

    def set_training_step(self, step: int) -> None:
        """Tell the head the current RL training step (for annealed schedules). Default: no-op."""
