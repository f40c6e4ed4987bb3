"""A demonstration dataset on disk in either layout: vla-rl's ``demos.hdf5`` + ``stats.json``
(:mod:`vla_rl.stages.sft.demos`) or a LeRobot v3 dataset (:mod:`vla_rl.stages.sft.lerobot`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vla_rl.stages.sft.demos import load_hdf5_demonstrations
from vla_rl.stages.sft.episodes import Episode
from vla_rl.stages.sft.lerobot import lerobot_root, lerobot_statistics, load_lerobot_demonstrations
from vla_rl.stages.sft.statistics import read_statistics


def load_demonstrations(
    path: str | Path, split: str | None = None, split_seed: int | None = None
) -> tuple[list[Episode], dict[str, Any]]:
    """Read ``demos.hdf5`` (or the folder holding it, or a LeRobot v3 dataset). Returns (episodes, dataset attrs).

    ``split`` and ``split_seed`` as in :func:`vla_rl.stages.sft.demos.load_hdf5_demonstrations` (the same for a
    LeRobot dataset: :func:`vla_rl.stages.sft.lerobot.load_lerobot_demonstrations`).
    """
    path = Path(path)
    if path.is_dir() and not (path / "demos.hdf5").is_file():
        root = lerobot_root(path)
        if root is not None:
            return load_lerobot_demonstrations(root, split, split_seed)
    return load_hdf5_demonstrations(path, split, split_seed)


def load_statistics(path: str | Path) -> dict:
    """Read a ``stats.json`` (a LeRobot dataset's ``meta/stats.json`` is mapped); a missing file or feature names
    the path."""
    path = Path(path)
    if path.parent.name == "meta" and (path.parent / "info.json").is_file():
        return lerobot_statistics(path.parent.parent)
    return read_statistics(path)
