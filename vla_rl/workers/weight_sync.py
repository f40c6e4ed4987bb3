"""What travels from the actor to the rollout workers: every weight once, then only the weights that can change.

An optimizer changes only parameters with ``requires_grad``; buffers may change in a forward pass. A frozen
backbone (or the frozen base of a LoRA model) therefore needs to travel once, when a rollout worker starts from
different weights (the first sync of a run, a resume); after that each sync carries the trainable parameters
and the buffers (LoRA adapters, head, critic). Whatever the policy, the rollout worker ends with the actor's
weights bit for bit (tested).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn


def changing_keys(model: nn.Module) -> set[str]:
    """State-dict keys that training can change: trainable parameters and every buffer."""
    parameters = dict(model.named_parameters())
    return {key for key in model.state_dict() if key not in parameters or parameters[key].requires_grad}


def select(weights: Mapping[str, torch.Tensor], keys: set[str]) -> dict[str, torch.Tensor]:
    return {key: value for key, value in weights.items() if key in keys}


def num_bytes(weights: Mapping[str, torch.Tensor]) -> int:
    return sum(value.numel() * value.element_size() for value in weights.values())


def load_changing(model: nn.Module, weights: Mapping[str, torch.Tensor]) -> None:
    """Load a partial state dict that must hold every changing key of ``model`` and nothing unknown."""
    expected = changing_keys(model)
    unknown = sorted(set(weights) - set(model.state_dict()))
    missing = sorted(expected - set(weights))
    if unknown or missing:
        raise RuntimeError(f"partial weights do not fit the policy: unknown keys {unknown}, missing trainable keys "
                           f"{missing}")  # fmt: skip
    model.load_state_dict(dict(weights), strict=False)
