"""Building a policy in any worker process from plain, picklable data.

Workers never import a concrete policy class (nor the policies package): they call the factory named by
its import path (``factory``, default ``policies.vla:build_policy``, resolved with
:func:`contract.import_path.import_object`) with the policy config dict, the env's I/O spec (a dict) and the dataset
statistics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from contract.import_path import import_object
from contract.policy import Policy

DEFAULT_POLICY_FACTORY = "policies.vla:build_policy"
#: Where a built policy records the factory that built it (``policies.factory.FACTORY_ATTRIBUTE``), so that
#: ``save_pretrained`` writes it and ``load_pretrained`` rebuilds the policy through the same factory.
FACTORY_ATTRIBUTE = "factory_path"


def check_chunk_size(config: Mapping[str, Any], factory: str) -> int:
    """``config["chunk_size"]``, the actions per chunk, which every policy config holds.

    Raises:
        ValueError: it is missing or not a positive integer (naming the key and the factory).
    """
    value = config.get("chunk_size")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"'policy.chunk_size'={value!r}: every policy config holds chunk_size, the actions per chunk, "
                         f"a positive integer; set it in the policy's yaml (factory {factory})")  # fmt: skip
    return value


@dataclass(frozen=True)
class PolicySpec:
    """Everything a worker needs to build the same policy.

    ``config`` is the ``policy`` section without ``factory`` (the factory reads it into its own config class);
    it holds ``chunk_size``, the one policy knob the core reads before building (as :attr:`chunk_size`).
    ``initial_weights``: an optional full state dict (CPU tensors) to load after building, e.g.
    the SFT policy's weights; ``seed`` fixes the random initialisation of everything else.

    Raises:
        ValueError: ``config`` holds no positive integer ``chunk_size``.
    """

    config: dict[str, Any]
    io_spec: dict[str, Any]
    stats: dict[str, Any] | None
    factory: str = DEFAULT_POLICY_FACTORY
    seed: int = 0
    initial_weights: dict[str, torch.Tensor] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_chunk_size(self.config, self.factory)

    @property
    def chunk_size(self) -> int:
        """The actions ``H`` per policy call (``(B, H, A)``): the env steps of one rollout step."""
        return int(self.config["chunk_size"])

    def build(self, device: torch.device | str = "cpu") -> Policy:
        """The policy (an ``nn.Module`` meeting :class:`contract.policy.Policy`) from the factory, seeded, with
        ``initial_weights`` where given, on ``device``."""
        torch.manual_seed(self.seed)
        policy = import_object(self.factory, "policy factory")(self.config, self.io_spec, self.stats)
        if not isinstance(policy, nn.Module):
            raise TypeError(f"policy factory {self.factory!r} returned {type(policy).__name__}; it must return a "
                            "torch nn.Module")  # fmt: skip
        setattr(policy, FACTORY_ATTRIBUTE, self.factory)
        if self.initial_weights is not None:
            missing, unexpected = policy.load_state_dict(self.initial_weights, strict=False)
            if missing or unexpected:
                raise RuntimeError(
                    f"initial weights do not fit the policy: missing keys {missing}, unexpected keys {unexpected}"
                )
        return policy.to(device)
