"""Wilson intervals against hand-computed values, episode summaries, evaluation seeds."""

from __future__ import annotations

import math

import pytest

from vla_rl.stages.evaluation.metrics import (
    evaluation_seed,
    fisher_exact_p,
    newcombe_difference_interval,
    summarize_episodes,
    wilson_interval,
)


def hand_wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    # Wilson (1927): (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), written out independently.
    p = k / n
    a = p + z * z / (2 * n)
    b = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    c = 1 + z * z / n
    return (a - b) / c, (a + b) / c


@pytest.mark.parametrize(
    ("successes", "trials", "expected"),
    [
        # Published 95% Wilson intervals (Newcombe 1998, Table I; standard calculators).
        (8, 10, (0.4902, 0.9433)),
        (0, 10, (0.0, 0.2775)),
        (5, 5, (0.5655, 1.0)),
        (81, 263, (0.2553, 0.3662)),
    ],
)
def test_wilson_matches_published_values(successes, trials, expected):
    low, high = wilson_interval(successes, trials)
    assert low == pytest.approx(expected[0], abs=1e-4)
    assert high == pytest.approx(expected[1], abs=1e-4)


@pytest.mark.parametrize(("successes", "trials"), [(3, 7), (1, 50), (49, 50), (17, 17)])
def test_wilson_matches_formula_and_contains_estimate(successes, trials):
    low, high = wilson_interval(successes, trials, z=1.96)
    hand_low, hand_high = hand_wilson(successes, trials)
    assert low == pytest.approx(max(0.0, hand_low), abs=1e-12)
    assert high == pytest.approx(min(1.0, hand_high), abs=1e-12)
    assert low <= successes / trials <= high


def test_wilson_rejects_impossible_counts():
    with pytest.raises(ValueError, match="at least one trial"):
        wilson_interval(0, 0)
    with pytest.raises(ValueError, match=r"successes must lie in \[0, trials=4\], got 5"):
        wilson_interval(5, 4)


def test_summary_of_episodes():
    episodes = [
        {"success": True, "return": 1.5, "length": 10},
        {"success": False, "return": 0.0, "length": 30},
        {"success": True, "return": 1.2, "length": 14},
    ]
    summary = summarize_episodes(episodes, wall_time_s=2.5)
    assert summary["successes"] == 2 and summary["episodes"] == 3
    assert summary["success_rate"] == pytest.approx(2 / 3)
    assert summary["mean_return"] == pytest.approx((1.5 + 0.0 + 1.2) / 3)
    mean = 0.9
    assert summary["std_return"] == pytest.approx(math.sqrt(((0.6) ** 2 + mean**2 + 0.3**2) / 3))
    assert summary["mean_length"] == pytest.approx(18.0)
    assert summary["success_ci95"] == pytest.approx(list(wilson_interval(2, 3)))
    with pytest.raises(ValueError, match="without episodes"):
        summarize_episodes([], 0.0)


def test_seeds_are_fixed_distinct_and_order_free():
    seeds = [evaluation_seed(0, "reach", k) for k in range(5)]
    assert seeds == [evaluation_seed(0, "reach", k) for k in range(5)]
    assert len(set(seeds)) == 5
    assert evaluation_seed(0, "reach", 0) != evaluation_seed(0, "lift", 0)
    assert evaluation_seed(1, "reach", 0) != evaluation_seed(0, "reach", 0)


def test_fisher_exact_p_matches_the_hypergeometric_sums_and_scipy():
    # Fisher's tea tasting: 3 of 4 vs 1 of 4; the tables as or less probable: a = 3, 1 (p = 16/70 each) and
    # a = 4, 0 (1/70 each): p = 34/70
    assert fisher_exact_p(3, 4, 1, 4) == pytest.approx(34 / 70, rel=1e-12)
    assert fisher_exact_p(5, 5, 5, 5) == 1.0 and fisher_exact_p(0, 3, 0, 7) == 1.0
    # 5/5 vs 0/5: only the two extreme tables, 1 / C(10, 5) each
    assert fisher_exact_p(5, 5, 0, 5) == pytest.approx(2 / math.comb(10, 5), rel=1e-12)
    stats = pytest.importorskip("scipy.stats")
    for a, n, b, m in ((124, 180, 158, 180), (341, 540, 472, 540), (53, 180, 114, 180), (7, 12, 2, 9)):
        expected = stats.fisher_exact([[a, n - a], [b, m - b]]).pvalue
        assert fisher_exact_p(a, n, b, m) == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="successes"):
        fisher_exact_p(5, 4, 1, 4)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # Newcombe (1998), Table II, method 10 (score interval without continuity correction), examples (a)-(f).
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((6, 7, 2, 7), (0.0582, 0.8062)),
        ((5, 56, 0, 29), (-0.0381, 0.1926)),
        ((0, 10, 0, 20), (-0.1611, 0.2775)),
        ((10, 10, 0, 20), (0.6791, 1.0)),
    ],
)
def test_newcombe_difference_interval_matches_published_values(counts, expected):
    low, high = newcombe_difference_interval(*counts)
    assert low == pytest.approx(expected[0], abs=1e-4)
    assert high == pytest.approx(expected[1], abs=1e-4)


def test_newcombe_difference_interval_is_antisymmetric_and_contains_the_difference():
    low, high = newcombe_difference_interval(30, 100, 45, 90)
    swapped_low, swapped_high = newcombe_difference_interval(45, 90, 30, 100)
    assert (swapped_low, swapped_high) == pytest.approx((-high, -low), abs=1e-12)
    assert low < 30 / 100 - 45 / 90 < high
