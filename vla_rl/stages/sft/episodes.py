"""One demonstration in memory, whichever layout it was read from (:mod:`vla_rl.stages.sft.demos`,
:mod:`vla_rl.stages.sft.lerobot`), and the train/valid split of a dataset's episodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Episode:
    """One demonstration. Arrays share the first axis T (one entry per env step)."""

    task: str
    instruction: str
    seed: int
    success: bool
    images: dict[str, np.ndarray]  # camera -> uint8 (T, H, W, 3)
    states: np.ndarray  # float32 (T, S)
    actions: np.ndarray  # float32 (T, A)
    rewards: np.ndarray  # float32 (T,)
    successes: np.ndarray  # bool (T,)
    init_state: Any = None
    extra_attrs: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.actions)


def split_names(names: Sequence[str], valid_fraction: float, seed: int) -> dict[str, list[str]]:
    """``{"train": [...], "valid": [...]}``: ``round(valid_fraction * len(names))`` names drawn with ``seed`` for
    validation (none when there is only one), the rest for training; each list sorted as strings."""
    order = np.random.default_rng(seed).permutation(len(names))
    num_valid = int(round(valid_fraction * len(names))) if len(names) > 1 else 0
    return {"train": sorted(names[i] for i in order[num_valid:]), "valid": sorted(names[i] for i in order[:num_valid])}
