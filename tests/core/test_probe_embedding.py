"""scripts/probe_embedding.py: the ridge probe finds a linear code and reports no better than the mean without one."""

from __future__ import annotations

import numpy as np


def test_probe_recovers_a_linear_code_and_matches_the_mean_on_unrelated_features(load_script) -> None:
    probe = load_script("probe_embedding").probe
    rng = np.random.default_rng(0)
    targets = rng.uniform(-0.03, 0.03, size=(400, 2))  # metres, as the block's jitter
    mixing = rng.normal(size=(2, 16))
    coded = targets @ mixing + 1e-5 * rng.normal(size=(400, 16))
    assert probe(coded, targets) < 0.01  # cm
    unrelated = rng.normal(size=(400, 16))
    split = 300
    mean_error = np.linalg.norm(targets[split:] - targets[:split].mean(0), axis=1).mean() * 100
    assert abs(probe(unrelated, targets) - mean_error) < 0.1 * mean_error
