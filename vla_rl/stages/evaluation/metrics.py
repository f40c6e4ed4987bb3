"""Success metrics of an evaluation: Wilson intervals, per-task and overall summaries, seeds."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

#: Two-sided 95% normal quantile.
Z_95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927).

    With ``p = successes / trials`` and ``n = trials``::

        centre = (p + z^2 / (2n)) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / (4 n^2))

    Unlike the normal (Wald) interval it stays inside [0, 1] and is not empty at p = 0 or 1.
    """
    if trials < 1:
        raise ValueError(f"the Wilson interval needs at least one trial, got trials={trials}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in [0, trials={trials}], got {successes}")
    p = successes / trials
    z2 = z * z
    denominator = 1.0 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def fisher_exact_p(successes_a: int, trials_a: int, successes_b: int, trials_b: int) -> float:
    """Two-sided p-value of Fisher's exact test that two binomial success rates are equal.

    Conditioned on the total successes ``k``, the count of group A is hypergeometric; the p-value sums the
    probabilities of every table no more probable than the one observed (the usual two-sided rule; a
    relative tolerance of 1e-7 counts ties as equal, as R and SciPy do).
    """
    for successes, trials in ((successes_a, trials_a), (successes_b, trials_b)):
        if trials < 1 or not 0 <= successes <= trials:
            raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    total = successes_a + successes_b
    denominator = math.comb(trials_a + trials_b, total)

    def probability(a: int) -> float:
        return math.comb(trials_a, a) * math.comb(trials_b, total - a) / denominator

    observed = probability(successes_a)
    low, high = max(0, total - trials_b), min(trials_a, total)
    p = sum(q for q in map(probability, range(low, high + 1)) if q <= observed * (1 + 1e-7))
    return min(1.0, p)


def fisher_exact_p_greater(successes_a: int, trials_a: int, successes_b: int, trials_b: int) -> float:
    """One-sided p-value of Fisher's exact test against the alternative "A succeeds more often than B".

    Conditioned on the total successes ``k``, A's count is hypergeometric; the p-value is the probability
    of A having at least the observed successes (SciPy's ``fisher_exact(alternative="greater")`` on the
    table ``[[a, n_a - a], [b, n_b - b]]``).
    """
    for successes, trials in ((successes_a, trials_a), (successes_b, trials_b)):
        if trials < 1 or not 0 <= successes <= trials:
            raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    total = successes_a + successes_b
    denominator = math.comb(trials_a + trials_b, total)
    high = min(trials_a, total)
    tail = sum(math.comb(trials_a, a) * math.comb(trials_b, total - a) for a in range(successes_a, high + 1))
    return min(1.0, tail / denominator)


def newcombe_difference_interval(
    successes_a: int, trials_a: int, successes_b: int, trials_b: int, z: float = Z_95
) -> tuple[float, float]:
    """95% interval of the difference of two independent success rates ``p_a - p_b`` (Newcombe 1998, method 10).

    From the Wilson intervals ``[l_a, u_a]`` and ``[l_b, u_b]`` of the two rates::

        low  = (p_a - p_b) - sqrt((p_a - l_a)^2 + (u_b - p_b)^2)
        high = (p_a - p_b) + sqrt((u_a - p_a)^2 + (p_b - l_b)^2)

    It stays inside [-1, 1] and is not degenerate when a rate is 0 or 1, where the Wald interval is.
    """
    low_a, high_a = wilson_interval(successes_a, trials_a, z)
    low_b, high_b = wilson_interval(successes_b, trials_b, z)
    p_a, p_b = successes_a / trials_a, successes_b / trials_b
    difference = p_a - p_b
    return (difference - math.hypot(p_a - low_a, high_b - p_b), difference + math.hypot(high_a - p_a, p_b - low_b))


def summarize_episodes(episodes: Sequence[dict[str, Any]], wall_time_s: float) -> dict[str, Any]:
    """Success rate with its 95% Wilson interval, mean return and length of ``episodes``.

    Each episode is a dict with ``success`` (bool), ``return`` (float) and ``length`` (int).
    """
    count = len(episodes)
    if count == 0:
        raise ValueError("cannot summarise an evaluation without episodes")
    successes = sum(bool(e["success"]) for e in episodes)
    low, high = wilson_interval(successes, count)
    returns = [float(e["return"]) for e in episodes]
    mean_return = sum(returns) / count
    return {
        "episodes": count,
        "successes": successes,
        "success_rate": successes / count,
        "success_ci95": [low, high],
        "mean_return": mean_return,
        "std_return": math.sqrt(sum((r - mean_return) ** 2 for r in returns) / count),
        "mean_length": sum(int(e["length"]) for e in episodes) / count,
        "wall_time_s": float(wall_time_s),
    }


#: The evaluation splits: ``dev`` for choosing recipes, ``test`` for the numbers one publishes.
EVAL_SPLITS = ("dev", "test")
#: Reset seeds of ``dev`` lie in ``[0, 2**31 - 1)``; those of ``test`` in ``[TEST_SEED_BASE, 2**32)``, above
#: every seed of ``dev`` and of training (demonstrations and rollouts use seeds below ``2**31`` plus a few
#: million), so no ``test`` episode starts from a state that ``dev``, SFT or RL has seen.
TEST_SEED_BASE = 3 * 2**30
TEST_SEED_SPAN = 2**30


def evaluation_seed(base_seed: int, task: str, episode_index: int, split: str = "dev") -> int:
    """The reset seed of evaluation episode ``episode_index`` of ``task`` in ``split``.

    It depends on neither the task order nor the number of envs, so the same config evaluates
    the same initial states on one env or on many; the ``eval`` salt keeps it apart from the
    seeds of demonstration collection (a policy is not scored on its own training layouts).
    ``dev`` seeds are below ``2**31 - 1`` and ``test`` seeds at least :data:`TEST_SEED_BASE`: the two splits
    share no seed, whatever the base seed, task or episode.
    """
    if split == "dev":
        digest = hashlib.sha256(f"eval/{base_seed}/{task}".encode()).digest()
        return (int.from_bytes(digest[:4], "little") + episode_index) % (2**31 - 1)
    if split == "test":
        digest = hashlib.sha256(f"eval-test/{base_seed}/{task}".encode()).digest()
        return TEST_SEED_BASE + (int.from_bytes(digest[:4], "little") + episode_index) % TEST_SEED_SPAN
    raise ValueError(f"unknown evaluation split {split!r}; choose one of {', '.join(EVAL_SPLITS)}")
