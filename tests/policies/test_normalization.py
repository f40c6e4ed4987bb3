from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from policies.normalization import (
    MissingStatisticsError,
    Normalizer,
    compute_stats,
    load_stats,
    save_stats,
)


def _stats(dim: int, seed: int = 0) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    low = rng.uniform(-3, -1, dim)
    high = rng.uniform(1, 4, dim)
    return {
        "mean": rng.uniform(-1, 1, dim).tolist(),
        "std": rng.uniform(0.2, 2.0, dim).tolist(),
        "min": low.tolist(),
        "max": high.tolist(),
        "q01": (low + 0.1).tolist(),
        "q99": (high - 0.1).tolist(),
    }


@pytest.mark.parametrize("mode", ["mean_std", "min_max", "quantile", "identity"])
def test_round_trip_every_mode(mode: str) -> None:
    stats = {"action": _stats(3)}
    normalizer = Normalizer(stats, {"action": mode}, {"action": 3})
    values = torch.randn(5, 4, 3, dtype=torch.float32) * 3
    restored = normalizer.unnormalize("action", normalizer.normalize("action", values))
    torch.testing.assert_close(restored, values, atol=1e-5, rtol=1e-5)


def test_modes_match_closed_forms() -> None:
    stats = _stats(2, seed=1)
    array = {key: np.asarray(value) for key, value in stats.items()}
    modes = {"mean_std": ("mean", "std"), "min_max": ("min", "max"), "quantile": ("q01", "q99")}
    for mode in modes:
        normalizer = Normalizer({"state": stats}, {"state": mode}, {"state": 2})
        if mode == "mean_std":
            points = np.stack([array["mean"], array["mean"] + array["std"]])
            expected = np.array([[0.0, 0.0], [1.0, 1.0]])
        else:
            low, high = modes[mode]
            points = np.stack([array[low], array[high], (array[low] + array[high]) / 2])
            expected = np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])
        result = normalizer.normalize("state", torch.tensor(points, dtype=torch.float32))
        np.testing.assert_allclose(result.numpy(), expected, atol=1e-5)


def test_identity_needs_no_statistics() -> None:
    normalizer = Normalizer(None, {"action": "identity"}, {"action": 2})
    values = torch.tensor([[1.5, -2.0]])
    assert torch.equal(normalizer.normalize("action", values), values)


@pytest.mark.parametrize(("mode", "key"), [("quantile", "q01"), ("mean_std", "std"), ("min_max", "max")])
def test_missing_statistic_names_feature_and_key(mode: str, key: str) -> None:
    stats = {"action": _stats(3)}
    del stats["action"][key]
    with pytest.raises(MissingStatisticsError) as raised:
        Normalizer(stats, {"action": mode}, {"action": 3})
    assert f"stats for 'action' lack '{key}' needed by mode '{mode}'" in str(raised.value)


def test_missing_feature_raises() -> None:
    with pytest.raises(MissingStatisticsError, match="no statistics for 'state', needed by mode 'mean_std'"):
        Normalizer({"action": _stats(2)}, {"state": "mean_std"}, {"state": 2})
    with pytest.raises(MissingStatisticsError, match="'action'"):
        Normalizer(None, {"action": "min_max"}, {"action": 2})


def test_wrong_size_and_unknown_mode_raise() -> None:
    with pytest.raises(ValueError, match="'action' key 'mean' have 3 values but the feature has 4"):
        Normalizer({"action": _stats(3)}, {"action": "mean_std"}, {"action": 4})
    with pytest.raises(ValueError, match="unknown normalisation mode 'zscore'"):
        Normalizer({"action": _stats(3)}, {"action": "zscore"}, {"action": 3})


@pytest.mark.parametrize("mode", ["mean_std", "min_max", "quantile"])
def test_constant_feature_is_guarded(mode: str) -> None:
    stats = compute_stats(np.tile([[2.0, 0.0]], (10, 1)) + np.array([[0.0, 1.0]]) * np.arange(10)[:, None])
    normalizer = Normalizer({"state": stats}, {"state": mode}, {"state": 2})
    values = torch.tensor([[2.0, 3.0], [2.0, 7.0]])
    normalized = normalizer.normalize("state", values)
    assert torch.isfinite(normalized).all()
    assert torch.equal(normalized[:, 0], torch.zeros(2))  # the constant dimension maps to 0
    torch.testing.assert_close(normalizer.unnormalize("state", normalized), values)


def test_compute_stats_and_json_round_trip(tmp_path) -> None:
    rng = np.random.default_rng(3)
    samples = rng.normal(size=(200, 3))
    stats = compute_stats(samples)
    np.testing.assert_allclose(stats["mean"], samples.mean(0))
    np.testing.assert_allclose(stats["std"], samples.std(0))
    np.testing.assert_allclose(stats["q99"], np.sort(samples, 0)[int(0.99 * 199)], atol=0.1)
    path = tmp_path / "stats.json"
    save_stats({"action": stats}, path)
    assert json.loads(path.read_text())["action"]["min"] == pytest.approx(samples.min(0).tolist())
    assert load_stats(path) == {"action": stats}


def test_load_stats_errors_name_the_file(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="nothere.json"):
        load_stats(tmp_path / "nothere.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json"):
        load_stats(broken)
