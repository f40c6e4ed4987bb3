"""scripts/compare_runs.py: same-seed runs agree, and any difference outside wall-clock keys is reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_runs.py"


def _run_folder(root: Path, name: str, success: float, loss: float, seconds: float) -> Path:
    folder = root / name
    (folder / "rl").mkdir(parents=True)
    summary = {"experiment": "x", "seed": 0, "stage_seconds": {"rl": seconds}, "env_steps": 640,
               "policies": {"final": {"overall": success, "tasks": {"reach": success}}}}  # fmt: skip
    (folder / "summary.json").write_text(json.dumps(summary))
    rows = [{"step": 1, "time": seconds, "timing/iteration_s": seconds, "eval/reach/wall_time_s": seconds,
             "train/loss/policy": loss}]
    (folder / "rl" / "metrics.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    return folder


def _compare(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(a), str(b)], capture_output=True, text=True, check=False)


def test_runs_that_differ_only_in_wall_clock_agree(tmp_path):
    result = _compare(_run_folder(tmp_path, "a", 0.5, 0.1, 10.0), _run_folder(tmp_path, "b", 0.5, 0.1, 99.0))
    assert result.returncode == 0, result.stdout
    assert "identical" in result.stdout and "1 rows" in result.stdout


def test_a_different_metric_or_success_is_reported(tmp_path):
    base = _run_folder(tmp_path, "a", 0.5, 0.1, 10.0)
    result = _compare(base, _run_folder(tmp_path, "b", 0.5, 0.2, 10.0))
    assert result.returncode == 1 and "train/loss/policy 0.1 != 0.2" in result.stdout
    result = _compare(base, _run_folder(tmp_path, "c", 0.25, 0.1, 10.0))
    assert result.returncode == 1 and "summary.json" in result.stdout


def test_a_missing_run_folder_is_named(tmp_path):
    result = _compare(tmp_path / "nowhere", _run_folder(tmp_path, "a", 0.5, 0.1, 10.0))
    assert result.returncode == 2 and str(tmp_path / "nowhere" / "summary.json") in result.stdout
