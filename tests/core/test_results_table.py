"""scripts/results_table.py --pooled: the seeds of a study summed, with Wilson intervals and Fisher's p."""

from __future__ import annotations

import json

import pytest
from scipy.stats import fisher_exact  # scipy comes with robosuite, a dependency


def _run(root, name, sft, final, episodes=60, split="test"):
    folder = root / name
    folder.mkdir()
    policy = lambda k: {"overall": k / episodes, "tasks": {"reach": k / episodes}, "episodes_per_task": {"reach": episodes}}  # noqa: E731
    summary = {"experiment": "x", "seed": 0, "stage_seconds": {}, "eval_split": split, "run_record": "run.json",
               "policies": {"sft": policy(sft), "final": policy(final)}}  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_pooled_sums_the_runs_and_tests_final_against_sft(tmp_path, load_script):
    table = load_script("results_table")
    runs = [_run(tmp_path, "s0", 38, 59), _run(tmp_path, "s1", 40, 50), _run(tmp_path, "s2", 30, 45)]
    text = table.pooled(runs)
    two_sided = fisher_exact([[108, 72], [154, 26]])[1]
    one_sided = fisher_exact([[154, 26], [108, 72]], alternative="greater")[1]
    assert "pooled over 3 runs, test split: SFT 108/180 = 0.600" in text and "RL 154/180 = 0.856" in text
    assert f"p = {two_sided:.2g} (two-sided), {one_sided:.2g} (one-sided" in text
    assert str(tmp_path / "s1" / "run.json") in text


def test_pooled_refuses_runs_of_different_splits(tmp_path, load_script):
    table = load_script("results_table")
    with pytest.raises(ValueError, match="different splits"):
        table.pooled([_run(tmp_path, "a", 1, 2), _run(tmp_path, "b", 1, 2, split="dev")])
