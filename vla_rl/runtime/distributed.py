"""Process groups for the actor ranks: one call to join, one to leave."""

from __future__ import annotations

import datetime
import os
import socket

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from vla_rl.runtime.device import distributed_backend


def free_port() -> int:
    """A TCP port that is free on this host now (for the rendezvous of rank 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def open_rendezvous(timeout_s: float = 600) -> dist.TCPStore:
    """Rank 0's rendezvous store, listening on a port the OS assigns as it binds (``store.port``).

    A port chosen first (:func:`free_port`) and bound later can be taken in between by any process that
    opens a connection (a long-lived Ray instance has many): the rendezvous then fails with EADDRINUSE.
    """
    return dist.TCPStore("0.0.0.0", 0, is_master=True, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=timeout_s))  # fmt: skip


def connect_rendezvous(master_addr: str, master_port: int, timeout_s: float = 600) -> dist.TCPStore:
    """A client of rank 0's :func:`open_rendezvous` store (ranks other than 0)."""
    return dist.TCPStore(master_addr, master_port, is_master=False, timeout=datetime.timedelta(seconds=timeout_s))


def init_distributed(
    rank: int, world_size: int, master_addr: str, master_port: int, device: torch.device, timeout_s: float = 600,
    store: dist.Store | None = None,
) -> DeviceMesh:  # fmt: skip
    """Join the process group (gloo on CPU, nccl on CUDA) and return the 1-D data-parallel mesh.

    ``store``: :func:`open_rendezvous`'s in rank 0, :func:`connect_rendezvous`'s in the others (all ranks or
    none); without one every rank rendezvouses through ``MASTER_ADDR``/``MASTER_PORT``.
    The mesh is created on ``device``'s type explicitly: torch here is a CUDA build and would
    otherwise choose a GPU where one exists (docs/platform.md).
    """
    os.environ["MASTER_ADDR"] = master_addr
    os.environ["MASTER_PORT"] = str(master_port)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        options = {"store": store} if store is not None else {}
        dist.init_process_group(
            backend=distributed_backend(device), rank=rank, world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s), **options,
        )  # fmt: skip
    return init_device_mesh(device.type, (world_size,), mesh_dim_names=("dp",))


def shutdown_distributed() -> None:
    """Leave the process group; the barrier first, or the process can abort at exit (docs/platform.md)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
