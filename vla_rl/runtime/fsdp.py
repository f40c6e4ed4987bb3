"""FSDP2 sharding of a policy: its blocks first, then the root.

A model declares the submodules to shard as units through ``fsdp_blocks()`` (a list of
modules); without it, its direct children that hold trainable parameters are used.
Frozen parameters (``requires_grad=False``, such as a frozen pretrained language
encoder) are left out of sharding and stay replicated on every rank. Protocol methods other
than ``forward`` (``evaluate``, ``log_prob``, ...) are registered as forward methods so that
FSDP gathers the parameters around them as well.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import (
    CPUOffloadPolicy,
    FSDPModule,
    MixedPrecisionPolicy,
    OffloadPolicy,
    fully_shard,
    register_fsdp_forward_method,
)

from contract.config_reader import check_types, require

# Methods of the policy protocol and of action heads that run the module's computation besides
# ``forward``: FSDP must gather the parameters around them too.
FORWARD_METHODS = ("act", "evaluate", "value", "embed", "bc_loss", "sample", "log_prob")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class ShardingConfig:
    """FSDP2 options.

    param_dtype: dtype of parameters in forward/backward ("float32", "bfloat16", "float16").
    reduce_dtype: dtype of gradient reduction.
    cpu_offload: keep sharded parameters and optimizer state on CPU (GPU runs).
    reshard_after_forward: free gathered parameters after forward (saves memory, costs an all-gather).
    """

    param_dtype: str = "float32"
    reduce_dtype: str = "float32"
    cpu_offload: bool = False
    reshard_after_forward: bool = True

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("param_dtype", "reduce_dtype"):
            require(self, name, choices=DTYPES)

    def mixed_precision(self) -> MixedPrecisionPolicy:
        for key in ("param_dtype", "reduce_dtype"):
            if getattr(self, key) not in DTYPES:
                raise ValueError(f"sharding.{key}={getattr(self, key)!r}; allowed: {', '.join(DTYPES)}")
        return MixedPrecisionPolicy(param_dtype=DTYPES[self.param_dtype], reduce_dtype=DTYPES[self.reduce_dtype])

    def offload(self) -> OffloadPolicy:
        # pin_memory=False: the default pinned memory fails on a host without CUDA (docs/platform.md).
        return CPUOffloadPolicy(pin_memory=torch.cuda.is_available()) if self.cpu_offload else OffloadPolicy()


def shard_blocks(model: nn.Module) -> list[nn.Module]:
    blocks = model.fsdp_blocks() if hasattr(model, "fsdp_blocks") else list(model.children())
    return [b for b in blocks if any(p.requires_grad for p in b.parameters())]


def shard_model(model: nn.Module, mesh: DeviceMesh, config: ShardingConfig = ShardingConfig()) -> nn.Module:
    """``fully_shard`` each block of ``model``, then the root; returns the (same) model."""
    frozen = {p for p in model.parameters() if not p.requires_grad}
    options = dict(
        mesh=mesh,
        mp_policy=config.mixed_precision(),
        offload_policy=config.offload(),
        reshard_after_forward=config.reshard_after_forward,
    )
    blocks = shard_blocks(model)
    for block in blocks:
        fully_shard(block, ignored_params={p for p in block.parameters() if p in frozen} or None, **options)
    fully_shard(model, ignored_params=frozen or None, **options)
    for module in (*blocks, model):
        for name in FORWARD_METHODS:
            if callable(getattr(module, name, None)):
                register_fsdp_forward_method(module, name)
    return model


def set_gradient_sync(model: nn.Module, enabled: bool) -> None:
    """Turn the gradient reduce-scatter on (last micro-batch) or off (the others)."""
    if isinstance(model, FSDPModule):
        model.set_requires_gradient_sync(enabled)


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded weights on CPU, on every rank (a collective: all ranks must call it)."""
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
