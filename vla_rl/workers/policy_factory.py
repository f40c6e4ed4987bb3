"""Building a policy in any worker process from plain, picklable data.

Workers never import a concrete policy class: they call the factory named by its import
path (``policy_factory``, default ``policies.vla:build_policy``) with the policy config
dict, the env's I/O spec (a dict) and the dataset statistics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from policies.factory import DEFAULT_POLICY_FACTORY, build_from_factory


@dataclass(frozen=True)
class PolicySpec:
    """Everything a worker needs to build the same policy.

    ``initial_weights``: an optional full state dict (CPU tensors) to load after building, e.g.
    the SFT policy's weights; ``seed`` fixes the random initialisation of everything else.
    """

    config: dict[str, Any]
    io_spec: dict[str, Any]
    stats: dict[str, Any] | None
    factory: str = DEFAULT_POLICY_FACTORY
    seed: int = 0
    initial_weights: dict[str, torch.Tensor] | None = field(default=None, compare=False)

    def build(self, device: torch.device | str = "cpu") -> nn.Module:
        torch.manual_seed(self.seed)
        policy = build_from_factory(self.factory, self.config, self.io_spec, self.stats)
        if self.initial_weights is not None:
            missing, unexpected = policy.load_state_dict(self.initial_weights, strict=False)
            if missing or unexpected:
                raise RuntimeError(
                    f"initial weights do not fit the policy: missing keys {missing}, unexpected keys {unexpected}"
                )
        return policy.to(device)
