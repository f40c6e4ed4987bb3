"""scripts/reference_runs.py compare: run folders agree unless an RL or SFT metric or an evaluation episode differs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reference_runs.py"


def reference(root: Path, sft_loss: float = 1.5, episode_return: float = 0.25, seconds: float = 1.0) -> Path:
    """A folder of reference runs holding one run with RL and SFT metrics and one evaluated policy."""
    run = root / "pipeline"
    for folder in ("rl", "sft", "eval/final"):
        (run / folder).mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"env_steps": 60, "policies": {}}))
    (run / "rl" / "metrics.jsonl").write_text(json.dumps({"step": 1, "time": seconds, "train/loss": 0.5}) + "\n")
    rows = [{"split": "train", "step": 1, "loss": sft_loss, "samples_per_s": 1 / seconds},
            {"split": "summary", "step": 1, "dataset": str(root / "demos.hdf5")}]  # fmt: skip
    (run / "sft" / "sft_metrics.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    episode = {"seed": 3, "success": False, "return": episode_return, "length": 30}
    info = {"tasks": {"reach": {"episode_results": [episode]}}}
    (run / "eval" / "final" / "eval_info.json").write_text(json.dumps(info))
    return root


def compare(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "compare", str(a), str(b)], capture_output=True, text=True,
                          check=False)  # fmt: skip


def test_runs_that_differ_in_wall_clock_and_folders_agree(tmp_path):
    result = compare(reference(tmp_path / "a"), reference(tmp_path / "b", seconds=9.0))
    assert result.returncode == 0, result.stdout
    assert "pipeline: identical (1 RL rows, 2 SFT rows, 1 eval episodes)" in result.stdout


def test_an_sft_loss_or_an_evaluation_episode_that_differs_is_reported(tmp_path):
    base = reference(tmp_path / "a")
    result = compare(base, reference(tmp_path / "b", sft_loss=1.4))
    assert result.returncode == 1 and "sft/sft_metrics.jsonl differs" in result.stdout
    result = compare(base, reference(tmp_path / "c", episode_return=0.3))
    assert result.returncode == 1 and "the episodes differ" in result.stdout
