"""Check that two runs of the same experiment and seed gave the same numbers.

    python scripts/compare_runs.py outputs/run_a outputs/run_b [--command train|eval|sft|collect]

A thin wrapper of :mod:`vla_rl.runtime.run_compare` (what `vla-rl reproduce` uses): for `vla-rl train` folders
it compares the success rates, split, Fisher's test and env steps of ``summary.json`` and every logged RL metric
of ``rl/metrics.jsonl`` except wall-clock ones (``time``, ``timing/*``, throughput).
Prints the first differences and exits 1 if there are any, 0 if the runs agree exactly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vla_rl.runtime.run_compare import COMPARED, comparable_metrics, differences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    parser.add_argument("--command", default="train", choices=sorted(COMPARED), help="the command of both runs")
    args = parser.parse_args()
    if args.command == "train":
        for run in (args.run_a, args.run_b):
            if not (run / "summary.json").is_file():
                print(f"{run / 'summary.json'} does not exist; give two finished `vla-rl train` run folders")
                return 2
    found = differences(args.run_a, args.run_b, args.command)
    if found:
        print("the runs differ:\n  " + "\n  ".join(found))
        return 1
    rows = f", {len(comparable_metrics(args.run_a))} rows of RL metrics" if args.command == "train" else ""
    print(f"identical: {COMPARED[args.command]}{rows} (wall-clock keys excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
