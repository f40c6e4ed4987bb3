"""The data side of behaviour cloning: dataset checks, batches and the collate into the policy's batch dict.

A behaviour-cloning batch is what ``VLAPolicy.bc_loss`` takes::

    {"images": {camera: uint8 (B, H, W, 3)}, "state": float32 (B, S), "instruction": list of B str,
     "action": float32 (B, H_chunk, A), "action_mask": bool (B, H_chunk)}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from vla_rl.stages.sft.demos import ChunkDataset
from vla_rl.stages.sft.episodes import Episode

DEMOS_FILE = "demos.hdf5"
STATS_FILE = "stats.json"


class DatasetError(ValueError):
    """The demonstration dataset cannot train this policy; the message says why and what to do."""


class MissingDatasetError(DatasetError, FileNotFoundError):
    """The demonstration dataset does not exist."""


def dataset_files(dataset: str | Path) -> tuple[Path, Path]:
    """``(demos.hdf5, stats.json)`` of ``dataset`` (its folder or the ``demos.hdf5`` file), both checked to exist;
    for a LeRobot v3 dataset (its root, or a collect folder holding ``lerobot/`` and no ``demos.hdf5``),
    ``(its root, meta/stats.json)``."""
    from vla_rl.stages.sft.lerobot import lerobot_root

    path = Path(dataset)
    root = lerobot_root(path) if path.is_dir() and not (path / DEMOS_FILE).is_file() else None
    if root is not None:
        if not (root / "meta" / "stats.json").is_file():
            raise MissingDatasetError(f"LeRobot dataset {root} has no meta/stats.json")
        return root, root / "meta" / "stats.json"
    demos = path if path.suffix in (".hdf5", ".h5") else path / DEMOS_FILE
    stats = demos.with_name(STATS_FILE)
    if not demos.is_file():
        raise MissingDatasetError(
            f"demonstration dataset {demos} does not exist; make it first with `vla-rl collect` "
            f"(collect.output={demos.parent}), or point sft.dataset at an existing dataset folder"
        )
    if not stats.is_file():
        raise MissingDatasetError(
            f"dataset statistics {stats} do not exist beside {demos.name}; rerun `vla-rl collect` "
            f"(collect.output={demos.parent}) to rebuild them"
        )
    return demos, stats


def check_episodes_fit_policy(episodes: Sequence[Episode], io_spec: Any, source: str, env_id: str) -> None:
    """Raise :class:`DatasetError` naming what differs between the demos and the policy's io spec.

    ``io_spec`` is a ``PolicyIOSpec`` (camera_names, image_size, state_dim, action_dim).
    """
    first = episodes[0]
    hint = f"collect the demos with the same env settings as the policy (env {env_id!r}), or change the env config"
    cameras = list(first.images)
    missing = [camera for camera in io_spec.camera_names if camera not in first.images]
    if missing:
        raise DatasetError(
            f"dataset {source} has cameras {cameras} but the policy needs {list(io_spec.camera_names)} "
            f"(missing in the dataset: {missing}); {hint}"
        )
    for camera in io_spec.camera_names:
        image_size = tuple(first.images[camera].shape[1:3])
        if image_size != tuple(io_spec.image_size):
            raise DatasetError(
                f"dataset {source} has {camera!r} images of {image_size[0]}x{image_size[1]} but the policy needs "
                f"{io_spec.image_size[0]}x{io_spec.image_size[1]} (env.kwargs.image_size); {hint}"
            )
    action_dim, state_dim = first.actions.shape[1], first.states.shape[1]
    if action_dim != io_spec.action_dim:
        raise DatasetError(
            f"dataset {source} has actions of {action_dim} dimensions but the env gives the policy "
            f"{io_spec.action_dim} action dimensions; {hint}"
        )
    if state_dim != io_spec.state_dim:
        raise DatasetError(
            f"dataset {source} has states of {state_dim} dimensions but the env gives the policy "
            f"{io_spec.state_dim}; {hint}"
        )


def collate_chunks(items: Sequence[dict[str, Any]], cameras: Sequence[str]) -> dict[str, Any]:
    """Stack :class:`ChunkDataset` items into one behaviour-cloning batch (see the module docstring)."""
    return {
        "images": {camera: torch.stack([item["images"][camera] for item in items]) for camera in cameras},
        "state": torch.stack([item["state"] for item in items]),
        "instruction": [item["instruction"] for item in items],
        "action": torch.stack([item["action"] for item in items]),
        "action_mask": torch.stack([item["action_mask"] for item in items]),
    }


class ShuffledIndices:
    """Endless batches of indices into ``range(count)``: each epoch a fresh permutation drawn from
    ``generator``, cut into full batches of ``min(batch_size, count)`` (the remainder is left to later
    permutations: one batch shape keeps CPU kernels from re-planning for odd sizes).

    Resumable: :meth:`state_dict` holds the generator's state before the current epoch's permutation and
    the position in it, so :meth:`load_state_dict` continues with the batch an uninterrupted iterator
    would give next.
    """

    def __init__(self, count: int, batch_size: int, generator: torch.Generator):
        self.count, self.size, self.generator = count, min(batch_size, count), generator
        self._order: list[int] = []
        self._position = 0
        self._epoch_start = generator.get_state()

    def __iter__(self) -> ShuffledIndices:
        return self

    def __next__(self) -> list[int]:
        if self._position + self.size > len(self._order):
            self._epoch_start = self.generator.get_state()
            self._order = torch.randperm(self.count, generator=self.generator).tolist()
            self._position = 0
        batch = self._order[self._position : self._position + self.size]
        self._position += self.size
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"epoch_start": self._epoch_start.clone(), "position": self._position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._epoch_start = state["epoch_start"].clone()
        self.generator.set_state(self._epoch_start)
        # before the first batch too: the permutation drawn now is the one the first batch would have drawn
        self._order = torch.randperm(self.count, generator=self.generator).tolist()
        self._position = int(state["position"])


class ShuffledBatches:
    """:class:`ShuffledIndices` turned into batches by ``collate`` (a list of indices -> a batch); resumable
    through the indices' state."""

    def __init__(self, indices: ShuffledIndices, collate: Callable[[list[int]], dict[str, Any]]):
        self.indices, self.collate = indices, collate

    def __iter__(self) -> ShuffledBatches:
        return self

    def __next__(self) -> dict[str, Any]:
        return self.collate(next(self.indices))

    def state_dict(self) -> dict[str, Any]:
        return self.indices.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.indices.load_state_dict(state)


def shuffled_batches(
    dataset: ChunkDataset, batch_size: int, cameras: Sequence[str], generator: torch.Generator
) -> ShuffledBatches:
    """Endless behaviour-cloning mini-batches of one size (:class:`ShuffledIndices` over ``dataset``); a
    dataset smaller than one batch gives one batch of all its samples per epoch."""
    return ShuffledBatches(ShuffledIndices(len(dataset), batch_size, generator),
                           lambda indices: collate_chunks([dataset[i] for i in indices], cameras))  # fmt: skip


def ordered_batches(dataset: ChunkDataset, batch_size: int, cameras: Sequence[str]) -> Iterator[dict[str, Any]]:
    """One pass over ``dataset`` in order (for validation)."""
    for start in range(0, len(dataset), batch_size):
        stop = min(start + batch_size, len(dataset))
        yield collate_chunks([dataset[i] for i in range(start, stop)], cameras)


def random_shift_images(images: torch.Tensor, max_shift: int, generator: torch.Generator) -> torch.Tensor:
    """Each image moved by its own integer offset in ``[-max_shift, max_shift]`` (rows and columns).

    ``images`` uint8 ``(B, H, W, C)`` -> same shape and dtype. Pixel ``(r, c)`` of image ``b`` becomes
    the input's pixel ``(clamp(r + dy_b), clamp(c + dx_b))``: exactly DrQ's "pad by replicating the
    edge, then crop a random H x W window", done with one gather and no float copy.
    """
    if max_shift == 0:
        return images
    batch, height, width = images.shape[:3]
    offsets = torch.randint(-max_shift, max_shift + 1, (2, batch, 1, 1), generator=generator)
    rows = (torch.arange(height).view(1, height, 1) + offsets[0]).clamp_(0, height - 1)
    cols = (torch.arange(width).view(1, 1, width) + offsets[1]).clamp_(0, width - 1)
    samples = torch.arange(batch).view(batch, 1, 1)
    return images[samples, rows.to(images.device), cols.to(images.device)]


def augment_batch(batch: dict[str, Any], max_shift: int, generator: torch.Generator) -> dict[str, Any]:
    """The behaviour-cloning ``batch`` with every camera's images randomly shifted (see :func:`random_shift_images`);
    each camera draws its own offsets. The input batch is not changed."""
    images = {camera: random_shift_images(frames, max_shift, generator) for camera, frames in batch["images"].items()}
    return {**batch, "images": images}
