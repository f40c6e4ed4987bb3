"""Dataset statistics (mean, std, min, max, q01, q99) of actions and states.

Saved as ``stats.json`` next to a dataset, in the layout the policies' normaliser reads::

    {"action": {"mean": [...], "std": [...], "min": [...], "max": [...], "q01": [...], "q99": [...]},
     "state":  {...same keys...},
     "num_episodes": int, "num_samples": int}
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from policies.normalization import compute_stats

STAT_KEYS = ("mean", "std", "min", "max", "q01", "q99")


def feature_statistics(values: np.ndarray) -> dict[str, list[float]]:
    """Statistics over the first axis of ``values`` ``(N, D)``, each a list of length D.

    The same computation the policies' normaliser uses (:func:`policies.normalization.compute_stats`).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0:
        raise ValueError(f"statistics need a non-empty (N, D) array, got shape {values.shape}")
    return compute_stats(values)


def read_statistics(path: str | Path) -> dict:
    """Read a vla-rl ``stats.json``; a missing file or feature names the path."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset statistics file {path} does not exist; run `vla-rl collect` to make it")
    stats = json.loads(path.read_text())
    for feature in ("action", "state"):
        if feature not in stats:
            raise KeyError(f"statistics file {path} lacks the feature {feature!r}")
        missing = [key for key in STAT_KEYS if key not in stats[feature]]
        if missing:
            raise KeyError(f"statistics file {path}: feature {feature!r} lacks {missing}")
    return stats
