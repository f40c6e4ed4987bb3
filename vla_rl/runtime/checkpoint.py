"""Checkpoints: actor + critic + optimizer through torch.distributed.checkpoint (DCP).

A run folder holds::

    checkpoints/
      iter_000010/            one checkpoint (renamed from iter_000010.tmp when complete)
        model_optim/          DCP shards of {"model": ..., "optim": ...}; loadable at any world size
        trainer_state.pt      iteration, RNG states, env seeds, sampler position (torch.save)
        policy/               the exportable policy (save_pretrained)
      iter_000020.corrupt/    a checkpoint that did not load, set aside by resume (never pruned)
      latest                  text file naming the newest complete checkpoint

A checkpoint becomes visible only by the final rename, so a crash mid-save leaves the
previous checkpoint as the latest. Only the newest ``keep_last`` are kept. The optimizer
state covers every trainable parameter (``vla_rl.workers.actor_worker.initialize_adam_state``),
so a checkpoint loads whatever has had a gradient so far.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

CHECKPOINT_PREFIX = "iter_"
LATEST = "latest"


class CheckpointLoadError(RuntimeError):
    """No checkpoint of a run loads; the message names the folder, the failure and what to do."""


def checkpoint_name(iteration: int) -> str:
    return f"{CHECKPOINT_PREFIX}{iteration:06d}"


def temporary_path(root: Path, iteration: int) -> Path:
    return Path(root) / (checkpoint_name(iteration) + ".tmp")


def save_sharded(model: nn.Module, optimizer: torch.optim.Optimizer, folder: Path) -> None:
    """Every rank writes its shards of model and optimizer state into ``folder/model_optim``."""
    state = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, optimizer)}
    dcp.save(state, checkpoint_id=str(Path(folder) / "model_optim"))


def load_sharded(model: nn.Module, optimizer: torch.optim.Optimizer | None, folder: Path) -> None:
    """Load ``folder/model_optim`` into an already sharded (or plain) model and its optimizer."""
    path = Path(folder) / "model_optim"
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint {folder} has no model_optim/ folder; is it a vla-rl checkpoint?")
    state: dict[str, Any] = {"model": get_model_state_dict(model)}
    if optimizer is not None:
        state["optim"] = get_optimizer_state_dict(model, optimizer)
    dcp.load(state, checkpoint_id=str(path))
    set_model_state_dict(model, state["model"])
    if optimizer is not None:
        set_optimizer_state_dict(model, optimizer, state["optim"])


def finalize(root: Path, iteration: int, keep_last: int) -> Path:
    """Rename the complete temporary checkpoint, point ``latest`` at it, prune old ones (driver only)."""
    root = Path(root)
    final = root / checkpoint_name(iteration)
    if final.exists():
        shutil.rmtree(final)
    os.replace(temporary_path(root, iteration), final)
    _point_latest_at(root, final)
    complete = complete_checkpoints(root)
    for old in complete[keep_last:]:
        shutil.rmtree(old)
    return final


def _point_latest_at(root: Path, checkpoint: Path) -> None:
    latest_tmp = Path(root) / (LATEST + ".tmp")
    latest_tmp.write_text(checkpoint.name)
    os.replace(latest_tmp, Path(root) / LATEST)


def complete_checkpoints(root: Path) -> list[Path]:
    """The complete checkpoints under ``root``, newest first (``iter_NNNNNN`` folders; not ``.tmp`` or
    ``.corrupt`` ones)."""
    folders = [p for p in Path(root).glob(CHECKPOINT_PREFIX + "*") if p.is_dir()]
    complete = [p for p in folders if p.name[len(CHECKPOINT_PREFIX) :].isdigit()]
    return sorted(complete, key=lambda p: p.name, reverse=True)


def latest_checkpoint(root: Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None."""
    pointer = Path(root) / LATEST
    if not pointer.is_file():
        return None
    path = Path(root) / pointer.read_text().strip()
    if not path.is_dir():
        raise FileNotFoundError(f"{pointer} names {path.name}, which does not exist; remove {pointer} to start fresh")
    return path


def set_aside(root: Path, checkpoint: Path, fallback: Path | None) -> Path:
    """Rename a checkpoint that does not load to ``<name>.corrupt`` (kept for inspection, never pruned) and
    point ``latest`` at ``fallback`` (or remove the pointer). Returns the new path."""
    aside = checkpoint.with_name(checkpoint.name + ".corrupt")
    if aside.exists():
        shutil.rmtree(aside)
    os.replace(checkpoint, aside)
    if fallback is not None:
        _point_latest_at(root, fallback)
    else:
        (Path(root) / LATEST).unlink(missing_ok=True)
    return aside


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()
