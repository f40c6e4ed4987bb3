"""scripts/compare_arms.py: two arms of a study pooled over their runs, per task or over all, with Fisher's p."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import fisher_exact  # scipy comes with robosuite, a dependency

from vla_rl.stages.evaluation.metrics import newcombe_difference_interval


def _run(root, name, sft, final, episodes=100, split="test"):
    """A run folder whose summary has per-task success counts ``sft`` and ``final`` ({task: successes})."""
    folder = root / name
    folder.mkdir()

    def policy(counts):
        return {"overall": sum(counts.values()) / (episodes * len(counts)),
                "tasks": {task: k / episodes for task, k in counts.items()},
                "episodes_per_task": {task: episodes for task in counts}}  # fmt: skip

    summary = {
        "experiment": "x",
        "seed": 0,
        "eval_split": split,
        "policies": {"sft": policy(sft), "final": policy(final)},
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


@pytest.fixture
def arms(tmp_path):
    off = [_run(tmp_path, "off7", {"drawer": 100, "push": 40}, {"drawer": 88, "push": 70}),
           _run(tmp_path, "off8", {"drawer": 97, "push": 35}, {"drawer": 90, "push": 66})]  # fmt: skip
    on = [_run(tmp_path, "on7", {"drawer": 100, "push": 40}, {"drawer": 99, "push": 64}),
          _run(tmp_path, "on8", {"drawer": 97, "push": 35}, {"drawer": 98, "push": 69})]  # fmt: skip
    return off, on


def test_one_task_pools_the_runs_and_tests_both_directions(arms, load_script):
    compare = load_script("compare_arms")
    off, on = arms
    text = compare.comparison(off, on, task="drawer", names=("off", "on"))
    # off: 88 + 90 = 178/200; on: 99 + 98 = 197/200
    more = fisher_exact([[197, 3], [178, 22]], alternative="greater")[1]
    less = fisher_exact([[197, 3], [178, 22]], alternative="less")[1]
    low, high = newcombe_difference_interval(197, 200, 178, 200)
    assert "final policy, drawer, test split: off 178/200 = 0.890" in text and "on 197/200 = 0.985" in text
    assert f"on - off = +0.095 (Newcombe 95% {low:+.3f} to {high:+.3f})" in text
    assert f"on more than off {more:.2g}, on less than off {less:.2g}" in text


def test_all_tasks_sums_every_task_and_the_table_lists_sft_and_final(arms, load_script):
    compare = load_script("compare_arms")
    off, on = arms
    text = compare.comparison(off, on, names=("off", "on"))
    assert "all tasks, test split: off 314/400" in text and "on 330/400" in text  # 88+70+90+66, 99+64+98+69
    table = compare.per_task_table(off, on, names=("off", "on"))
    assert "| drawer | 197/200 | 178/200 | 197/200 | 197/200 |" in table
    assert "| **all** | **272/400** | **314/400** | **272/400** | **330/400** |" in table


def test_refuses_mixed_splits_and_unknown_tasks(tmp_path, arms, load_script):
    compare = load_script("compare_arms")
    off, on = arms
    dev = _run(tmp_path, "dev", {"drawer": 1, "push": 1}, {"drawer": 1, "push": 1}, split="dev")
    with pytest.raises(ValueError, match="different splits"):
        compare.comparison([*off, dev], on)
    with pytest.raises(ValueError, match="different splits"):  # each arm on one split, but not the same one
        compare.comparison(off, [dev])
    with pytest.raises(ValueError, match="different splits"):
        compare.per_task_table(off, [dev])
    with pytest.raises(ValueError, match="--task 'reach' is not among the evaluated tasks: drawer, push"):
        compare.comparison(off, on, task="reach")


def test_the_same_runs_as_both_arms_compare_final_with_sft(arms, load_script):
    compare = load_script("compare_arms")
    off, _ = arms
    text = compare.comparison(off, off, policy=("sft", "final"), task="drawer", names=("SFT", "final"))
    # SFT 100 + 97 = 197/200, final 88 + 90 = 178/200: did the arm forget drawer?
    less = fisher_exact([[178, 22], [197, 3]], alternative="less")[1]
    assert (
        "sft against final policy, drawer, test split: SFT 197/200 = 0.985" in text
        and "final 178/200 = 0.890" in text
    )
    assert f"final less than SFT {less:.2g}" in text
    table = compare.per_task_table(off, off, policy=("sft", "final"), names=("off", "off"))
    assert table.splitlines()[0] == "| task | SFT (off) | final (off) |"
    assert "| drawer | 197/200 | 178/200 |" in table
    named = compare.per_task_table(off, off, policy=("sft", "final"), names=("SFT", "final"))
    assert named.splitlines()[0] == "| task | SFT | final |"


@pytest.mark.parametrize("script", ["compare_arms", "results_table"])
def test_output_piped_into_head_ends_quietly(script):
    """Read a line and close the pipe, as `| head -1` does: no BrokenPipeError on stderr."""
    root = Path(__file__).resolve().parents[2]
    runs = sorted(str(p) for p in (root / "docs" / "results" / "mt10_success_replay").glob("off_seed*"))
    args = ["--a", *runs, "--b", *runs] if script == "compare_arms" else ["--pooled", *runs]
    process = subprocess.Popen([sys.executable, str(root / "scripts" / f"{script}.py"), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    assert process.stdout.readline().strip()
    process.stdout.close()
    assert process.wait(timeout=60) in (0, -signal.SIGPIPE)
    assert b"BrokenPipeError" not in process.stderr.read()
