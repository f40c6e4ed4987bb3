"""Device policy, in one place: explicit argument, then ``VLA_RL_DEVICE``, then CUDA if available, then CPU.

The collective backend follows the device: nccl on CUDA, gloo on CPU.
"""

from __future__ import annotations

import os

import torch

DEVICE_ENV_VAR = "VLA_RL_DEVICE"


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The device to use; raises ValueError naming the source of a bad or unavailable choice."""
    source = "argument"
    if device is None or device == "auto" or device == "":
        device = os.environ.get(DEVICE_ENV_VAR) or None
        source = DEVICE_ENV_VAR
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"bad device {device!r} from {source}: {error}; use 'cpu', 'cuda' or 'cuda:N'") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} from {source} asks for CUDA, but no CUDA device is available")
    return resolved


def distributed_backend(device: torch.device) -> str:
    """The torch.distributed backend for ``device``: nccl on CUDA, gloo otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"
