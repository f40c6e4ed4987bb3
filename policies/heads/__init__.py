"""Action heads behind one contract (:mod:`policies.heads.base`), built by name.

``HEADS`` maps a name to a head class; each class has a ``config_class`` dataclass whose fields are
the options ``build_head`` accepts. A user's own head plugs in by adding it to ``HEADS``. Heads with a
denoising chain (:class:`DenoisingChainHead`: flow, diffusion) can be wrapped by a refiner (residual,
steered) through its ``base`` option.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from policies.heads.base import ActionHead, LogProbGranularity, reduce_log_prob
from policies.heads.chain import DenoisingChainHead
from policies.heads.diffusion import DiffusionHead, DiffusionHeadConfig
from policies.heads.flow import FlowHead, FlowHeadConfig
from policies.heads.gaussian import GaussianHead, GaussianHeadConfig
from policies.heads.legacy import renamed_head_hint
from policies.heads.residual import ResidualHead, ResidualHeadConfig
from policies.heads.steered import SteeredHead, SteeredHeadConfig

HEADS: dict[str, type[ActionHead]] = {
    "gaussian": GaussianHead,
    "diffusion": DiffusionHead,
    "flow": FlowHead,
    "residual": ResidualHead,
    "steered": SteeredHead,
}


def head_option_names(name: str) -> list[str]:
    """The options (config field names) head ``name`` accepts."""
    return [field.name for field in dataclasses.fields(_head_class(name).config_class)]


def _head_class(name: str) -> Any:
    if name not in HEADS:
        hint = renamed_head_hint(name)
        if hint:
            raise ValueError(f"action head {name!r} was renamed (2026-12-04): write `{hint}` instead")
        raise ValueError(f"unknown action head {name!r}; valid heads: {sorted(HEADS)}")
    return HEADS[name]


def head_config(name: str, **options: Any) -> Any:
    """The config dataclass of head ``name`` with ``options``; an unknown head or option is a ValueError
    that lists the valid ones (checked before any model is built)."""
    valid = head_option_names(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for action head {name!r}; valid options: {valid}")
    return _head_class(name).config_class(**options)


def build_head(
    name: str, embedding_dim: int, chunk_size: int, action_dim: int, rl_feature_dim: int = 0, **options: Any
) -> ActionHead:
    """Build head ``name`` for embeddings ``(B, embedding_dim)`` and chunks ``(B, chunk_size, action_dim)``.

    ``options`` are fields of the head's config dataclass; an unknown name or option is a ValueError
    that lists the valid ones. ``rl_feature_dim`` > 0: the head also reads ``(B, rl_feature_dim)``
    RL-only features (``policy.rl_vision``); only heads with ``reads_rl_features`` can.
    """
    head_class = _head_class(name)
    if rl_feature_dim and not head_class.reads_rl_features:
        readers = sorted(key for key, cls in HEADS.items() if cls.reads_rl_features)
        raise ValueError(
            f"action head {name!r} does not read RL-only features, so policy.rl_vision cannot be enabled "
            f"with it; heads that read them: {readers}"
        )
    config = head_config(name, **options)
    for label, value in (
        ("embedding_dim", embedding_dim),
        ("chunk_size", chunk_size),
        ("action_dim", action_dim),
    ):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"action head {name!r}: {label}={value!r} must be a positive integer")
    if head_class.reads_rl_features:
        return head_class(embedding_dim, chunk_size, action_dim, config, rl_feature_dim=rl_feature_dim)
    return head_class(embedding_dim, chunk_size, action_dim, config)


__all__ = [
    "HEADS",
    "ActionHead",
    "DenoisingChainHead",
    "DiffusionHead",
    "DiffusionHeadConfig",
    "FlowHead",
    "FlowHeadConfig",
    "GaussianHead",
    "GaussianHeadConfig",
    "LogProbGranularity",
    "ResidualHead",
    "ResidualHeadConfig",
    "SteeredHead",
    "SteeredHeadConfig",
    "build_head",
    "head_option_names",
    "reduce_log_prob",
]
