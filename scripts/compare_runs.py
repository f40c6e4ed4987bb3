"""Check that two runs of the same experiment and seed gave the same numbers.

    python scripts/compare_runs.py outputs/run_a outputs/run_b

Compares, between the two run folders, the success rates and env steps of ``summary.json`` and every
logged RL metric of ``rl/metrics.jsonl`` except wall-clock ones (``time``, ``timing/*``, throughput).
Prints the first differences and exits 1 if there are any, 0 if the runs agree exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _is_wall_clock(key: str) -> bool:
    """``time``, ``timing/*``, ``memory/*`` and the per-task ``.../wall_time_s`` and throughput (``..._per_s``) keys."""
    return key == "time" or key.startswith(("timing/", "memory/")) or key.endswith(("wall_time_s", "_per_s"))


def comparable_summary(run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"env_steps": summary.get("env_steps"), "policies": summary.get("policies")}


def comparable_metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "rl" / "metrics.jsonl"
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if not _is_wall_clock(k)} for row in rows]


def differences(run_a: Path, run_b: Path, limit: int = 10) -> list[str]:
    found = []
    summary_a, summary_b = comparable_summary(run_a), comparable_summary(run_b)
    if summary_a != summary_b:
        found.append(f"summary.json: {summary_a} != {summary_b}")
    rows_a, rows_b = comparable_metrics(run_a), comparable_metrics(run_b)
    if len(rows_a) != len(rows_b):
        found.append(f"rl/metrics.jsonl: {len(rows_a)} rows != {len(rows_b)} rows")
    for row_a, row_b in zip(rows_a, rows_b, strict=False):
        for key in sorted(set(row_a) | set(row_b)):
            if row_a.get(key) != row_b.get(key):
                found.append(f"step {row_a.get('step')}: {key} {row_a.get(key)} != {row_b.get(key)}")
        if len(found) >= limit:
            break
    return found[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    args = parser.parse_args()
    for run in (args.run_a, args.run_b):
        if not (run / "summary.json").is_file():
            print(f"{run / 'summary.json'} does not exist; give two finished `vla-rl train` run folders")
            return 2
    found = differences(args.run_a, args.run_b)
    if found:
        print("the runs differ:\n  " + "\n  ".join(found))
        return 1
    rows = len(comparable_metrics(args.run_a))
    print(f"identical: summary.json success rates and env steps, and {rows} rows of RL metrics (wall-clock keys excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
