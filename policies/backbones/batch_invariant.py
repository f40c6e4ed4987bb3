"""Batch-invariant matrix products on CPU: a sample's outputs do not depend on the batch it is computed in.

PPO divides by the rollout's log-probs, so the update's recomputation of a sample at the rollout's weights should
give them back bit for bit. The rollout computes a sample in a batch of the envs of one stage, the update in a
minibatch of other samples, with another number of threads. The matrix product is what breaks this on CPU: the
library picks its kernel (and its summation order) from the shape, the number of rows M included, and from the
thread count, so a row of ``x @ W.T`` can change in the last bits with the rows beside it (small M takes other
kernels than large M). The other operations the VLA families use compute each sample on its own (attention per
batch and head, normalisation per row, elementwise maps).

:func:`batch_invariant` makes every ``torch.nn.functional.linear`` on CPU tensors inside the block compute its rows
in chunks of exactly :data:`CHUNK_ROWS` rows (the last one padded with zero rows), so every row goes through one
matrix product of one shape ``(CHUNK_ROWS, K) x (K, N)`` whatever the batch: the same kernel, the same order.
The backward is the ordinary one (gradients are sums over the batch anyway). CUDA tensors pass through unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

#: Rows per matrix product. A multiple of the register tiles of AVX2 and AVX-512 kernels (4, 6, 8, 16 rows).
CHUNK_ROWS = 48


class _ChunkedLinear(torch.autograd.Function):
    """``x (..., K) @ weight (N, K).T + bias (N,)`` with the rows of ``x`` in products of :data:`CHUNK_ROWS` rows."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        rows = x.reshape(-1, x.shape[-1])
        transposed = weight.t()
        out = rows.new_empty(*x.shape[:-1], weight.shape[0])  # a tensor of its own, not a view (FSDP2 warns of views)
        flat = out.view(rows.shape[0], weight.shape[0])
        for start in range(0, rows.shape[0], CHUNK_ROWS):
            chunk = rows[start : start + CHUNK_ROWS]
            if chunk.shape[0] < CHUNK_ROWS:
                chunk = torch.cat([chunk, chunk.new_zeros(CHUNK_ROWS - chunk.shape[0], chunk.shape[1])])
            flat[start : start + CHUNK_ROWS] = torch.mm(chunk, transposed)[: flat.shape[0] - start]
        return out + bias if bias is not None else out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        flat = grad.reshape(-1, grad.shape[-1])
        grad_x = (flat @ weight).view_as(x) if ctx.needs_input_grad[0] else None
        grad_weight = flat.t() @ x.reshape(-1, x.shape[-1]) if ctx.needs_input_grad[1] else None
        grad_bias = flat.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias


class _BatchInvariantLinear(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if x.device.type == "cpu" and x.dim() >= 1 and x.shape[-1] > 0:
                return _ChunkedLinear.apply(x, weight, bias)
        return func(*args, **kwargs)


@contextlib.contextmanager
def batch_invariant(enabled: bool = True) -> Iterator[None]:
    """Inside the block, ``F.linear`` on CPU is batch-invariant (module docstring); a no-op for ``enabled=False``."""
    if not enabled:
        yield
        return
    with _BatchInvariantLinear():
        yield


def batch_invariant_method(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a policy method under :func:`batch_invariant` when its ``config.batch_invariant`` is on."""

    @wraps(method)
    def wrapped(self, *args: Any, **kwargs: Any) -> Any:
        with batch_invariant(self.config.batch_invariant):
            return method(self, *args, **kwargs)

    return wrapped
