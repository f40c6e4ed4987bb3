"""research/probe_tracking.py: the tracking fit against scipy's linear regression, and its errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats


def test_tracking_fit_matches_scipy_linregress_for_a_follower_and_a_replayer(load_script) -> None:
    tracking_fit = load_script("probe_tracking").tracking_fit
    rng = np.random.default_rng(0)
    block = rng.uniform(-0.03, 0.03, size=200)
    follower = 0.5 + block + rng.normal(0.0, 0.005, size=200)  # closes where the block is
    replayer = 0.5 + rng.normal(0.0, 0.02, size=200)  # closes at one place, whatever the jitter
    for grip, expected_slope in ((follower, 1.0), (replayer, 0.0)):
        fit = tracking_fit(block, grip)
        reference = stats.linregress(block, grip)
        assert fit["slope"] == pytest.approx(reference.slope, rel=1e-9)
        assert fit["slope_stderr"] == pytest.approx(reference.stderr, rel=1e-9)
        assert abs(fit["slope"] - expected_slope) < 4 * fit["slope_stderr"]


def test_tracking_fit_rejects_too_few_episodes_and_a_block_that_never_moved(load_script) -> None:
    tracking_fit = load_script("probe_tracking").tracking_fit
    with pytest.raises(ValueError, match="E >= 3"):
        tracking_fit(np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="scene_jitter"):
        tracking_fit(np.full(5, 0.4), np.linspace(0.3, 0.5, 5))
