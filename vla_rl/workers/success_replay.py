"""The success replay of an update: a behaviour-cloning loss on successful chunks, beside the RL loss.

``algo.success_replay_weight`` > 0: the driver draws, for each optimizer step of the update, a batch of chunks
from the tasks' success pools (equal shares per task, :meth:`vla_rl.stages.rl.task_pools.TaskPools.sample_replay`),
and each rank adds ``weight * policy.bc_loss(its shard)`` to the step's loss, the same loss SFT minimises (the
policy protocol's ``bc_loss``), so that what the policy could do keeps a gradient while RL improves the rest.
It trains what ``bc_loss`` reaches, as SFT does.

Each rank takes an equal contiguous shard of the step's batch (the batch size is a multiple of the world size,
checked with the config), split into micro-batches; a micro-batch's loss is its mean times its share of the
shard, so a rank's gradient is that of its shard's mean, and FSDP's average over ranks that of the whole batch.
``bc_loss`` draws its noise (a flow's time and noise, ...) from torch's generator, seeded in a forked RNG state
per (update seed, optimizer step, position of the micro-batch's first chunk in the step's batch): a resumed run
draws what an uninterrupted one draws, and where the micro-batches of one rank and of several ranks cut the
batch at the same places, one rank and several give the same update.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from vla_rl.runtime.seeds import derived_seed

#: The metric of the replay's behaviour-cloning loss (unweighted, the mean over the optimizer steps).
LOSS_KEY = "loss/success_replay_bc"


@dataclass
class SuccessReplay:
    """The replay of one update: ``weight`` and ``batches``, one behaviour-cloning batch per optimizer step
    (a batch has leading dims ``(S, R)``: ``images`` {camera: uint8 (S, R, H, W, 3)}, ``state`` (S, R, D),
    ``action`` (S, R, H_chunk, A) in env units, ``action_mask`` (S, R, H_chunk), ``instruction`` S lists of R str).
    Optimizer step ``k`` of the update uses batch ``k % S``."""

    weight: float
    batches: Mapping[str, Any]

    @property
    def steps(self) -> int:
        return int(self.batches["action"].shape[0])

    @property
    def chunks_per_step(self) -> int:
        return int(self.batches["action"].shape[1])

    def shard(self, step: int, rank: int, world_size: int) -> tuple[dict[str, Any], int]:
        """This rank's contiguous shard of the batch of optimizer step ``step``, as ``bc_loss`` takes it, and the
        position of its first chunk in the step's batch."""
        index = step % self.steps
        size = self.chunks_per_step
        if size % world_size:
            raise ValueError(f"{size} replay chunks per step do not split into {world_size} equal shards; make "
                             "algo.success_replay_batch_size a multiple of trainer.actor_world_size")  # fmt: skip
        part = slice(rank * size // world_size, (rank + 1) * size // world_size)
        batches = self.batches
        return {
            "images": {camera: frames[index, part] for camera, frames in batches["images"].items()},
            "state": batches["state"][index, part], "action": batches["action"][index, part],
            "action_mask": batches["action_mask"][index, part], "instruction": list(batches["instruction"][index][part]),
        }, part.start  # fmt: skip


def micro_batches(
    shard: Mapping[str, Any], micro_batch_size: int, offset: int = 0
) -> Iterator[tuple[dict[str, Any], float, int]]:
    """``(micro-batch, its share of the shard, position of its first chunk)`` for consecutive micro-batches of
    ``micro_batch_size`` chunks; ``offset``: the position of the shard's first chunk."""
    size = int(shard["action"].shape[0])
    for start in range(0, size, micro_batch_size):
        part = slice(start, min(start + micro_batch_size, size))
        micro = {
            "images": {camera: frames[part] for camera, frames in shard["images"].items()},
            "state": shard["state"][part], "action": shard["action"][part],
            "action_mask": shard["action_mask"][part], "instruction": shard["instruction"][part],
        }  # fmt: skip
        yield micro, (part.stop - part.start) / size, offset + start


def replay_loss(model: nn.Module, micro: Mapping[str, Any], seed: int, device: torch.device) -> torch.Tensor:
    """``model.bc_loss(micro)`` with torch's generator seeded by ``seed`` (and restored afterwards)."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return model.bc_loss(micro)


def micro_seed(seed: int, step: int, first_chunk: int) -> int:
    """The seed of ``bc_loss``'s noise for the micro-batch of optimizer step ``step`` that starts at chunk
    ``first_chunk`` of the step's batch."""
    return derived_seed(seed, "success_replay", step, first_chunk)
