"""Dataset statistics and the per-feature normalisation of states and actions.

Statistics come as a mapping ``feature -> {key -> list of floats}`` with the keys
``mean``, ``std``, ``min``, ``max``, ``q01`` and ``q99``, one value per feature
dimension; the demo collector writes them as ``stats.json`` next to its data::

    {"action": {"mean": [...], "std": [...], "min": [...], "max": [...], "q01": [...], "q99": [...]},
     "state": {...}}

Each feature gets a mode (see :data:`NORMALIZATION_MODES`):

- ``mean_std``: ``(x - mean) / std``;
- ``min_max``: ``[min, max] -> [-1, 1]``;
- ``quantile``: ``[q01, q99] -> [-1, 1]`` (values outside are not clipped);
- ``identity``: unchanged, needs no statistics.

Every mode is an affine map ``(x - center) / scale``. A scale below ``eps`` (a constant
feature) is replaced by 1, so such a feature maps to 0 and the round trip stays exact.
A statistic a mode needs but the file lacks raises :class:`MissingStatisticsError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

Stats = dict[str, dict[str, list[float]]]
STAT_KEYS = ("mean", "std", "min", "max", "q01", "q99")


class MissingStatisticsError(KeyError):
    """A normalisation mode needs a statistic that the dataset statistics lack."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


class NormalizationMode:
    """An affine normalisation ``(x - center) / scale`` computed from some statistics keys."""

    name: str = ""
    required_keys: tuple[str, ...] = ()

    def center_and_scale(self, stats: Mapping[str, np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


class IdentityMode(NormalizationMode):
    name = "identity"

    def center_and_scale(self, stats: Mapping[str, np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(size), np.ones(size)


class MeanStdMode(NormalizationMode):
    name = "mean_std"
    required_keys = ("mean", "std")

    def center_and_scale(self, stats: Mapping[str, np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
        return stats["mean"], stats["std"]


class RangeMode(NormalizationMode):
    """Maps ``[low, high]`` (two statistics keys) to ``[-1, 1]``."""

    def center_and_scale(self, stats: Mapping[str, np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
        low, high = (stats[key] for key in self.required_keys)
        return (high + low) / 2.0, (high - low) / 2.0


class MinMaxMode(RangeMode):
    name = "min_max"
    required_keys = ("min", "max")


class QuantileMode(RangeMode):
    name = "quantile"
    required_keys = ("q01", "q99")


NORMALIZATION_MODES: dict[str, NormalizationMode] = {
    mode.name: mode for mode in (IdentityMode(), MeanStdMode(), MinMaxMode(), QuantileMode())
}


def get_mode(name: str) -> NormalizationMode:
    if name not in NORMALIZATION_MODES:
        raise ValueError(f"unknown normalisation mode {name!r}; choose one of {sorted(NORMALIZATION_MODES)}")
    return NORMALIZATION_MODES[name]


def load_stats(path: str | Path) -> Stats:
    """Read a statistics JSON file (see the module docstring for its form)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"statistics file {str(path)!r} does not exist; the demo collector writes "
                                f"stats.json next to the data it collects")
    try:
        stats = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read statistics file {str(path)!r}: {error}") from error
    validate_stats_structure(stats, source=str(path))
    return stats


def save_stats(stats: Mapping[str, Mapping[str, object]], path: str | Path) -> None:
    """Write statistics as JSON (arrays and tensors become lists)."""
    plain = {
        feature: {key: np.asarray(value, dtype=np.float64).tolist() for key, value in feature_stats.items()}
        for feature, feature_stats in stats.items()
    }
    Path(path).write_text(json.dumps(plain, indent=2))


def validate_stats_structure(stats: object, source: str = "statistics") -> None:
    if not isinstance(stats, Mapping):
        raise ValueError(f"{source}: expected a JSON object feature -> {{key: [values]}}, got {type(stats).__name__}")
    for feature, feature_stats in stats.items():
        if not isinstance(feature_stats, Mapping):
            raise ValueError(f"{source}: stats for {feature!r} must map keys such as 'mean' to lists of numbers")


def compute_stats(values: np.ndarray | torch.Tensor) -> dict[str, list[float]]:
    """Statistics of one feature from samples ``(N, D)`` (any leading dims are flattened)."""
    array = np.asarray(values, dtype=np.float64)
    array = array.reshape(-1, array.shape[-1])
    return {
        "mean": array.mean(0).tolist(),
        "std": array.std(0).tolist(),
        "min": array.min(0).tolist(),
        "max": array.max(0).tolist(),
        "q01": np.quantile(array, 0.01, axis=0).tolist(),
        "q99": np.quantile(array, 0.99, axis=0).tolist(),
    }


def _feature_arrays(
    stats: Mapping[str, Mapping[str, object]] | None, feature: str, mode: NormalizationMode, size: int
) -> dict[str, np.ndarray]:
    if not mode.required_keys:
        return {}
    if stats is None or feature not in stats:
        raise MissingStatisticsError(
            f"no statistics for {feature!r}, needed by mode {mode.name!r}; pass dataset statistics "
            f"(stats.json) with a {feature!r} entry or set the {feature!r} normalisation mode to 'identity'"
        )
    arrays = {}
    for key in mode.required_keys:
        if key not in stats[feature]:
            raise MissingStatisticsError(
                f"stats for {feature!r} lack {key!r} needed by mode {mode.name!r}; recompute the statistics "
                f"(keys {list(STAT_KEYS)}) or choose a mode whose keys are present"
            )
        array = np.asarray(stats[feature][key], dtype=np.float64).reshape(-1)
        if array.shape[0] != size:
            raise ValueError(
                f"stats for {feature!r} key {key!r} have {array.shape[0]} values but the feature has {size} "
                f"dimensions; the statistics belong to another env or robot"
            )
        if not np.all(np.isfinite(array)):
            raise ValueError(f"stats for {feature!r} key {key!r} contain NaN or inf: {array.tolist()}")
        arrays[key] = array
    return arrays


class Normalizer(nn.Module):
    """Normalises and unnormalises named features with per-feature modes.

    The affine parameters live in non-persistent buffers (they follow ``.to(device)``
    but are not part of the weights); the statistics themselves are kept in
    :attr:`stats` and saved as ``stats.json`` with the policy.

    Args:
        stats: dataset statistics, or ``None`` when every mode is ``identity``.
        modes: feature name -> mode name.
        sizes: feature name -> number of dimensions.
        eps: scales below this are treated as 1 (constant features).
    """

    def __init__(
        self,
        stats: Mapping[str, Mapping[str, object]] | None,
        modes: Mapping[str, str],
        sizes: Mapping[str, int],
        eps: float = 1e-6,
    ) -> None:
        super().__init__()
        self.modes = dict(modes)
        self.stats: Stats = {}
        for feature, mode_name in self.modes.items():
            if feature not in sizes:
                raise ValueError(f"normalisation mode given for {feature!r} but its size is unknown")
            mode = get_mode(mode_name)
            arrays = _feature_arrays(stats, feature, mode, sizes[feature])
            if stats is not None and feature in stats:
                self.stats[feature] = {
                    key: np.asarray(value, dtype=np.float64).reshape(-1).tolist()
                    for key, value in stats[feature].items()
                }
            center, scale = mode.center_and_scale(arrays, sizes[feature])
            scale = np.where(np.abs(scale) < eps, 1.0, scale)
            self.register_buffer(f"{feature}_center", torch.tensor(center, dtype=torch.float32), persistent=False)
            self.register_buffer(f"{feature}_scale", torch.tensor(scale, dtype=torch.float32), persistent=False)

    def _affine(self, feature: str) -> tuple[torch.Tensor, torch.Tensor]:
        if feature not in self.modes:
            raise KeyError(f"no normalisation configured for {feature!r}; known features: {sorted(self.modes)}")
        return getattr(self, f"{feature}_center"), getattr(self, f"{feature}_scale")

    def normalize(self, feature: str, values: torch.Tensor) -> torch.Tensor:
        """``values`` ``(..., D)`` in dataset units -> normalised ``(..., D)``."""
        center, scale = self._affine(feature)
        return (values - center) / scale

    def unnormalize(self, feature: str, values: torch.Tensor) -> torch.Tensor:
        """Normalised ``(..., D)`` -> dataset units ``(..., D)``."""
        center, scale = self._affine(feature)
        return values * scale + center
