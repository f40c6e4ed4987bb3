"""Saved policies whose heads were renamed: read their ``config.json`` head section and weights as today's heads.

Until 2026-12-04 the refiners subclassed the flow head (``flow_residual``, ``flow_steered``) and took the flow's
options flat, beside prefixed copies of their own (``residual_hidden_dim``, ``latent_init_std`` ...), and
the RL-only features of a fine-tuned flow were a head of their own (``flow_rl_features``). Today a refiner
wraps any chain head named in ``base`` (its weights under ``base.``), and every chain head reads RL-only
features. :func:`upgrade_head` maps an old head section to the new one with the same behaviour;
:func:`upgrade_weights` renames an old state dict's keys to match. Configs that are not saved policies get
:func:`renamed_head_hint` instead: an error that says what to write.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from policies.heads.flow import FlowHeadConfig

_FLOW_OPTIONS = {field.name for field in dataclasses.fields(FlowHeadConfig)} - {"detach_embedding"}
# old name -> (new name, prefix of the refiner's own options, the module holding the refiner's weights)
_REFINERS = {
    "flow_residual": ("residual", "residual_", "residual"),
    "flow_steered": ("steered", "latent_", "latent"),
}
_HINTS = {
    "flow_residual": "name: residual, options: {base: {name: flow, options: {...}}, hidden_dim: ..., ...}",
    "flow_steered": "name: steered, options: {base: {name: flow, options: {...}}, init_std: ..., ...}",
    "flow_rl_features": "name: flow, options: {rl_method: noise, detach_embedding: true, ...}",
}


def renamed_head_hint(name: str) -> str | None:
    """What to write instead of the old head ``name`` (None: not an old name)."""
    return _HINTS.get(name)


def upgrade_head(head: dict[str, Any]) -> dict[str, Any]:
    """An old ``{"name", "options"}`` head section as today's (unchanged where the name is current)."""
    name, options = head.get("name"), dict(head.get("options") or {})
    if name == "flow_rl_features":  # its defaults: Flow-Noise on a detached embedding
        return {"name": "flow", "options": {"rl_method": "noise", "detach_embedding": True, **options}}
    if name not in _REFINERS:
        return head
    new_name, prefix, _ = _REFINERS[name]
    base = {key: value for key, value in options.items() if key in _FLOW_OPTIONS}
    own = {key.removeprefix(prefix): value for key, value in options.items() if key not in _FLOW_OPTIONS}
    return {"name": new_name, "options": {"base": {"name": "flow", "options": base}, **own}}


def upgrade_weights(head_name: str, weights: dict[str, Any], prefix: str = "head.") -> dict[str, Any]:
    """An old state dict of a policy whose head was ``head_name``, with the flow's keys moved under ``base.``."""
    if head_name not in _REFINERS:
        return weights
    own = prefix + _REFINERS[head_name][2] + "."
    return {
        prefix + "base." + key[len(prefix) :]
        if key.startswith(prefix) and not key.startswith(own)
        else key: value
        for key, value in weights.items()
    }
