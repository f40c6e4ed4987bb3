"""Evaluation splits (dev: today's seeds; test: disjoint ones), one-sided Fisher, and the summary's final-vs-SFT test."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy.stats import fisher_exact  # scipy comes with robosuite, a dependency

from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config
from vla_rl.stages.evaluation.metrics import (
    TEST_SEED_BASE,
    evaluation_seed,
    fisher_exact_p,
    fisher_exact_p_greater,
)
from vla_rl.stages.pipeline import final_against_sft


def test_dev_split_keeps_the_seeds_of_earlier_evaluations():
    # Seeds of evaluation_seed before splits existed (commit c86b0d0): old dev numbers stay comparable.
    assert [evaluation_seed(0, "reach", k) for k in range(3)] == [1162596153, 1162596154, 1162596155]
    assert [evaluation_seed(0, "reach", k, "dev") for k in range(3)] == [1162596153, 1162596154, 1162596155]
    assert evaluation_seed(7, "pick-place-v3", 49, "dev") == 1342538329
    assert evaluation_seed(3, "Lift", 10, "dev") == 842481901


def test_test_split_seeds_are_disjoint_from_dev_and_from_training_seeds():
    rng = random.Random(0)
    tasks = ["reach", "lift", "stack", "Lift", "pick-place-v3", *(f"task{i}" for i in range(20))]
    dev, test = set(), set()
    for base, task in itertools.product([0, 1, 2, 3, 6, 7, 42, 2**31 - 2], tasks):
        indices = [0, 1, 59, 999, 2**30 - 1, 2**30, 2**31, *(rng.randrange(2**40) for _ in range(20))]
        dev.update(evaluation_seed(base, task, k, "dev") for k in indices)
        test.update(evaluation_seed(base, task, k, "test") for k in indices)
    assert not dev & test
    # The proof behind the sample: dev seeds lie below 2**31 - 1, test seeds in [3 * 2**30, 2**32), where
    # numpy's and torch's seeding accept them, and above the training seeds (below 2**31 plus a few million).
    assert max(dev) < 2**31 - 1 < TEST_SEED_BASE <= min(test) and max(test) < 2**32
    assert TEST_SEED_BASE - (2**31 - 1) > 10**8
    # Within a task and split, episodes have distinct seeds.
    assert len({evaluation_seed(0, "reach", k, "test") for k in range(1000)}) == 1000


def test_an_unknown_split_is_refused_by_name():
    with pytest.raises(ValueError, match="'bogus'.*dev, test"):
        evaluation_seed(0, "reach", 0, "bogus")
    with pytest.raises(ConfigError, match="'eval.split'='holdout'"):
        load_config(["eval.split=holdout"])


def test_named_experiments_publish_on_the_test_split_and_dev_stays_available():
    assert load_config(["experiment=default"]).eval.split == "test"
    assert load_config(["experiment=default", "eval.split=dev"]).eval.split == "dev"


@pytest.mark.parametrize("a,n_a,b,n_b", [(3, 3, 0, 3), (59, 60, 38, 60), (10, 20, 10, 20), (0, 5, 5, 5),
                                         (164, 180, 122, 180), (1, 7, 4, 9), (30, 30, 30, 30)])  # fmt: skip
def test_one_sided_fisher_matches_scipy(a, n_a, b, n_b):
    table = [[a, n_a - a], [b, n_b - b]]
    assert fisher_exact_p_greater(a, n_a, b, n_b) == pytest.approx(fisher_exact(table, alternative="greater")[1], rel=1e-9)
    assert fisher_exact_p(a, n_a, b, n_b) == pytest.approx(fisher_exact(table)[1], rel=1e-9)


def test_one_sided_fisher_closed_form():
    # 3/3 against 0/3: of the C(6, 3) = 20 tables with 3 successes, one gives A all three.
    assert fisher_exact_p_greater(3, 3, 0, 3) == pytest.approx(1 / 20)
    assert fisher_exact_p_greater(0, 3, 3, 3) == pytest.approx(1.0)
    # 2/3 against 1/3: P(A >= 2) = (C(3,2) C(3,1) + C(3,3) C(3,0)) / C(6,3) = 10 / 20.
    assert fisher_exact_p_greater(2, 3, 1, 3) == pytest.approx((3 * 3 + 1) / math.comb(6, 3))


def _document(split: str, seeds: list[int], successes: int) -> dict:
    episodes = len(seeds)
    return {"settings": {"split": split}, "seeds": {"reach": seeds},
            "overall": {"successes": successes, "episodes": episodes, "success_rate": successes / episodes}}  # fmt: skip


def test_final_against_sft_tests_only_the_same_episodes():
    seeds = [evaluation_seed(0, "reach", k, "test") for k in range(60)]
    comparison = final_against_sft(_document("test", seeds, 59), _document("test", seeds, 38))
    assert comparison["same_episodes"] and comparison["split"] == "test"
    assert comparison["final"] == "59/60" and comparison["sft"] == "38/60"
    assert comparison["fisher_p_two_sided"] == pytest.approx(fisher_exact([[59, 1], [38, 22]])[1], rel=1e-9)
    assert comparison["fisher_p_rl_improved"] == pytest.approx(
        fisher_exact([[59, 1], [38, 22]], alternative="greater")[1], rel=1e-9
    )
    dev_seeds = [evaluation_seed(0, "reach", k, "dev") for k in range(60)]
    other = final_against_sft(_document("test", seeds, 59), _document("dev", dev_seeds, 38))
    assert other["same_episodes"] is False and "fisher_p_two_sided" not in other
