"""Demonstrations on disk, in the HDF5 layout of robomimic / robosuite.

``demos.hdf5``::

    data/                         attrs: env_id, env_kwargs (JSON), total (samples), format ("vla-rl-demos/1")
      demo_<i>/                   attrs: num_samples, task, instruction, seed, success, init_state (JSON)
        obs/<camera>_image        uint8 (T, H, W, 3)   camera image before action t
        obs/state                 float32 (T, S)       proprioception before action t
        actions                   float32 (T, A)       in the env's own units
        rewards                   float32 (T,)
        dones                     uint8 (T,)           1 at the episode's last step
        successes                 uint8 (T,)           info["is_success"] after action t
    mask/train, mask/valid        names of the demos in each split (robomimic filter keys)

robomimic's readers take this layout (``data/demo_i/obs/...``, ``actions``, ``mask/...``).
``stats.json`` beside it holds the statistics of :mod:`vla_rl.stages.sft.statistics`.
:mod:`vla_rl.stages.sft.datasets` reads this layout or LeRobot's (:mod:`vla_rl.stages.sft.lerobot`).

Finished episodes are first written one per file to ``<output>/episodes/`` (each through
a temporary name), so that interrupting collection loses no finished episode; the merged
``demos.hdf5`` and ``stats.json`` are rebuilt from those files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch
from torch.utils.data import Dataset

from vla_rl.runtime.files import write_json_atomic
from vla_rl.stages.sft.episodes import Episode, split_names
from vla_rl.stages.sft.statistics import feature_statistics

FORMAT = "vla-rl-demos/1"
IMAGE_SUFFIX = "_image"


def _write_episode(group: h5py.Group, episode: Episode) -> None:
    length = len(episode)
    observations = group.create_group("obs")
    for camera, frames in episode.images.items():
        observations.create_dataset(camera + IMAGE_SUFFIX, data=np.asarray(frames, np.uint8), compression="lzf")
    observations.create_dataset("state", data=np.asarray(episode.states, np.float32))
    group.create_dataset("actions", data=np.asarray(episode.actions, np.float32))
    group.create_dataset("rewards", data=np.asarray(episode.rewards, np.float32))
    dones = np.zeros(length, np.uint8)
    dones[-1] = 1
    group.create_dataset("dones", data=dones)
    group.create_dataset("successes", data=np.asarray(episode.successes, np.uint8))
    group.attrs.update(
        num_samples=length,
        task=episode.task,
        instruction=episode.instruction,
        seed=episode.seed,
        success=bool(episode.success),
        init_state=json.dumps(episode.init_state),
    )


def _read_episode(group: h5py.Group) -> Episode:
    observations = group["obs"]
    images = {
        key[: -len(IMAGE_SUFFIX)]: observations[key][()] for key in observations if key.endswith(IMAGE_SUFFIX)
    }
    attrs = group.attrs
    return Episode(
        task=str(attrs["task"]),
        instruction=str(attrs["instruction"]),
        seed=int(attrs["seed"]),
        success=bool(attrs["success"]),
        images=images,
        states=observations["state"][()],
        actions=group["actions"][()],
        rewards=group["rewards"][()],
        successes=group["successes"][()].astype(bool),
        init_state=json.loads(attrs["init_state"]),
    )


class EpisodeStore:
    """Finished episodes of an unfinished collection, one HDF5 file each, in ``<output>/episodes/``."""

    def __init__(self, output: str | Path):
        self.folder = Path(output) / "episodes"
        self.folder.mkdir(parents=True, exist_ok=True)

    def paths(self) -> list[Path]:
        return sorted(self.folder.glob("episode_*.hdf5"))

    def add(self, episode: Episode) -> Path:
        index = len(self.paths())
        path = self.folder / f"episode_{index:06d}.hdf5"
        temporary = path.with_name(path.name + ".tmp")
        with h5py.File(temporary, "w") as file:
            _write_episode(file.create_group("episode"), episode)
        os.replace(temporary, path)
        return path

    def episodes(self) -> Iterator[Episode]:
        for path in self.paths():
            with h5py.File(path, "r") as file:
                yield _read_episode(file["episode"])

    def seeds_of_task(self, task: str) -> set[int]:
        seeds = set()
        for path in self.paths():
            with h5py.File(path, "r") as file:
                attrs = file["episode"].attrs
                if str(attrs["task"]) == task:
                    seeds.add(int(attrs["seed"]))
        return seeds

    def count_by_task(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for path in self.paths():
            with h5py.File(path, "r") as file:
                task = str(file["episode"].attrs["task"])
                counts[task] = counts.get(task, 0) + 1
        return counts


def write_dataset(
    output: str | Path,
    episodes: list[Episode],
    env_id: str,
    env_kwargs: dict[str, Any],
    valid_fraction: float = 0.1,
    seed: int = 0,
) -> tuple[Path, Path]:
    """Write ``demos.hdf5`` and ``stats.json`` into ``output`` (each via a temporary name).

    Returns the two paths.
    """
    if not episodes:
        raise ValueError(f"no episodes to write to {output}")
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    path = output / "demos.hdf5"
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # runs sharing the folder may write at once
    names = [f"demo_{i}" for i in range(len(episodes))]
    splits = split_names(names, valid_fraction, seed)
    with h5py.File(temporary, "w") as file:
        data = file.create_group("data")
        for name, episode in zip(names, episodes, strict=True):
            _write_episode(data.create_group(name), episode)
        data.attrs.update(
            env_id=env_id,
            env_kwargs=json.dumps(env_kwargs),
            total=sum(len(e) for e in episodes),
            format=FORMAT,
            valid_fraction=float(valid_fraction),
        )
        mask = file.create_group("mask")
        for split in ("train", "valid"):
            mask.create_dataset(split, data=np.array(splits[split], dtype="S"))
    os.replace(temporary, path)
    stats = {
        "action": feature_statistics(np.concatenate([e.actions for e in episodes])),
        "state": feature_statistics(np.concatenate([e.states for e in episodes])),
        "num_episodes": len(episodes),
        "num_samples": int(sum(len(e) for e in episodes)),
    }
    stats_path = output / "stats.json"
    write_json_atomic(stats_path, stats)
    return path, stats_path


def load_hdf5_demonstrations(
    path: str | Path, split: str | None = None, split_seed: int | None = None
) -> tuple[list[Episode], dict[str, Any]]:
    """Read ``demos.hdf5`` (or the folder holding it). Returns (episodes, dataset attrs).

    ``split`` selects the demos of ``mask/<split>`` ("train" or "valid"); None reads all. With ``split_seed``
    the split is drawn with that seed and the file's ``valid_fraction`` (:func:`split_names`) instead of read
    from its mask: each SFT seed has its own split, while the file stays the same for every run that shares it.
    A file written before ``valid_fraction`` was stored has only its mask, which is then read.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "demos.hdf5"
    if not path.is_file():
        raise FileNotFoundError(f"demonstration file {path} does not exist; make it with `vla-rl collect`")
    with h5py.File(path, "r") as file:
        if "data" not in file:
            raise ValueError(f"{path} is not a demonstration file: it has no 'data' group")
        attrs = {key: file["data"].attrs[key] for key in file["data"].attrs}
        attrs["env_kwargs"] = json.loads(attrs.get("env_kwargs", "{}"))
        in_order = sorted(file["data"], key=lambda n: int(n.split("_")[1]))  # demo_0, demo_1, ..., as written
        if split is None:
            names = in_order
        elif split_seed is not None and "valid_fraction" in attrs:
            if split not in ("train", "valid"):
                raise KeyError(f"split={split!r}; drawn splits are 'train' and 'valid'")
            names = split_names(in_order, float(attrs["valid_fraction"]), split_seed)[split]
        else:
            if f"mask/{split}" not in file:
                raise KeyError(f"{path} has no split {split!r}; available: {list(file.get('mask', {}))}")
            names = [n.decode() for n in file[f"mask/{split}"][()]]
        episodes = [_read_episode(file["data"][name]) for name in names]
    return episodes, attrs


class ChunkDataset(Dataset):
    """Behaviour-cloning samples: the observation at step t and the action chunk t..t+H-1.

    Chunks that run past the episode end are padded by repeating the last action and
    masked out in ``action_mask``. Each item is a dict::

        images: {camera: uint8 (Hi, Wi, 3)}, state: float32 (S,), instruction: str,
        action: float32 (H, A), action_mask: bool (H,), task: str
    """

    def __init__(self, episodes: list[Episode], chunk_size: int):
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.episodes = episodes
        self.chunk_size = chunk_size
        self.index = [(e, t) for e, episode in enumerate(episodes) for t in range(len(episode))]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, item: int) -> dict[str, Any]:
        episode_index, step = self.index[item]
        episode = self.episodes[episode_index]
        stop = min(step + self.chunk_size, len(episode))
        actions = episode.actions[step:stop]
        pad = self.chunk_size - len(actions)
        mask = np.arange(self.chunk_size) < len(actions)
        if pad:
            actions = np.concatenate([actions, np.repeat(actions[-1:], pad, axis=0)])
        return {
            "images": {camera: torch.from_numpy(frames[step]) for camera, frames in episode.images.items()},
            "state": torch.from_numpy(episode.states[step].astype(np.float32)),
            "instruction": episode.instruction,
            "action": torch.from_numpy(actions.astype(np.float32)),
            "action_mask": torch.from_numpy(mask),
            "task": episode.task,
        }
