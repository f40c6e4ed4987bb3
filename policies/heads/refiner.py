"""What the refiners share: a small Gaussian policy learned on top of a frozen chain head that they wrap.

A refiner (:mod:`policies.heads.residual`, :mod:`policies.heads.steered`) wraps any head with a denoising
chain (:class:`~policies.heads.chain.DenoisingChainHead`: ``flow``, ``diffusion``, or a user's own), named
by ``base: {name, options}`` exactly as ``policy.head`` names a head. Behaviour cloning trains the base
(its ``bc_loss``); RL trains only the refiner's :class:`~policies.heads.bounded_gaussian.BoundedGaussian`,
which reads the embedding (detached with ``detach_embedding``) and, where built with ``rl_feature_dim`` > 0,
RL-only features ``(B, F)``; the base reads neither in RL and runs only its deterministic sampler
(:meth:`~policies.heads.chain.DenoisingChainHead.denoise`). The base's weights live under ``base.`` in the
state dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from policies.heads.base import ActionHead
from policies.heads.bounded_gaussian import BoundedGaussian, check_bounded_gaussian_options
from policies.heads.chain import DenoisingChainHead
from policies.heads.common import check_embedding


@dataclass
class RefinerConfig:
    """Options every refiner takes.

    base: the wrapped head, ``{"name": ..., "options": {...}}`` as in ``policy.head`` (a chain head).
    hidden_dim, num_layers: the refiner's mean MLP. init_std: its initial sigma. log_std_min, log_std_max:
    clamp of the learned log-sigma. mean_bound: tanh bound of the mean. detach_embedding: the refiner reads
    the embedding without moving the encoders.
    """

    base: dict[str, Any] = field(default_factory=lambda: {"name": "flow", "options": {}})
    hidden_dim: int = 128
    num_layers: int = 2
    init_std: float = 0.1
    log_std_min: float = -5.0
    log_std_max: float = 0.0
    mean_bound: float = 0.5
    detach_embedding: bool = True

    def __post_init__(self) -> None:
        check_bounded_gaussian_options(self.init_std, self.log_std_min, self.log_std_max, self.mean_bound, "")
        if self.hidden_dim <= 0 or self.num_layers <= 0:
            raise ValueError(
                f"hidden_dim={self.hidden_dim} and num_layers={self.num_layers} must both be positive"
            )
        self.base = check_base(self.base)


def check_base(base: Any) -> dict[str, Any]:
    """``base`` as ``{"name", "options"}`` after checking that it names a chain head with valid options."""
    from policies.heads import HEADS, head_config

    if not isinstance(base, dict) or not set(base) <= {"name", "options"} or "name" not in base:
        raise ValueError(f"base={base!r} must be a mapping {{name: <chain head>, options: {{...}}}}")
    name, options = base["name"], dict(base.get("options") or {})
    chains = sorted(key for key, cls in HEADS.items() if issubclass(cls, DenoisingChainHead))
    if name not in chains:
        raise ValueError(
            f"base.name={name!r}: a refiner wraps a head with a denoising chain, one of {chains}"
        )
    head_config(name, **options)
    return {"name": name, "options": options}


class Refiner(ActionHead):
    """A chain head ``self.base`` plus a learned Gaussian on top; subclasses say what the Gaussian draws."""

    reads_rl_features = True
    config_class: type[RefinerConfig]
    config: RefinerConfig

    def __init__(self, embedding_dim: int, chunk_size: int, action_dim: int, config: RefinerConfig | None = None,
                 rl_feature_dim: int = 0) -> None:  # fmt: skip
        """The base head; ``config`` None: the subclass's ``config_class()``. A subclass then builds its Gaussian
        with :meth:`build_refiner_policy`."""
        from policies.heads import build_head

        super().__init__()
        if rl_feature_dim < 0:
            raise ValueError(f"{type(self).__name__}: rl_feature_dim={rl_feature_dim} must be >= 0")
        self.config = config = config or self.config_class()
        self.embedding_dim, self.chunk_size, self.action_dim = embedding_dim, chunk_size, action_dim
        self.rl_feature_dim = rl_feature_dim
        base = build_head(
            config.base["name"], embedding_dim, chunk_size, action_dim, **config.base["options"]
        )
        assert isinstance(base, DenoisingChainHead)
        self.base = base

    def build_refiner_policy(self, input_dim: int) -> BoundedGaussian:
        """The refiner's :class:`BoundedGaussian` over chunks ``(B, H, A)`` from features ``(B, input_dim)``, sized by
        the config."""
        config = self.config
        return BoundedGaussian(
            input_dim, self.chunk_size, self.action_dim, config.hidden_dim, config.num_layers,
            config.init_std, config.log_std_min, config.log_std_max, config.mean_bound,
        )  # fmt: skip

    @property
    def log_prob_reaches_embedding(self) -> bool:
        return not self.config.detach_embedding

    def refiner_inputs(self, embedding: torch.Tensor, rl_features: torch.Tensor | None) -> list[torch.Tensor]:
        """``[embedding (detached with detach_embedding), rl_features]`` (features only where the head reads them)."""
        check_embedding(embedding, self.embedding_dim)
        self.check_rl_features(embedding, rl_features)
        source = embedding.detach() if self.config.detach_embedding else embedding
        return [source] if rl_features is None else [source, rl_features]

    def set_training_step(self, step: int) -> None:
        self.base.set_training_step(step)

    def bc_loss(
        self, embedding: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The base head's behaviour-cloning loss on expert chunks ``(B, H, A)``: SFT trains the base only."""
        return self.base.bc_loss(embedding, actions, mask)
