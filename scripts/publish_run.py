"""Copy a finished run's record and results (no checkpoints, no videos) into the repository, for a study.

    python scripts/publish_run.py outputs/my_run docs/results/<study>/<name>

Copies ``run.json`` and what `vla-rl reproduce` compares and a reader checks: ``summary.json``, ``config.yaml``,
``stages.json``, ``rl/metrics.jsonl``, ``sft/sft_metrics.jsonl``, the final ``eval/*/eval_info.json`` (a
`vla-rl train` folder) or ``eval_info.json`` and ``metrics.jsonl`` (a `vla-rl eval` folder), ``stats.json`` and
``collection.json`` (a `vla-rl collect` folder). Then ``vla-rl reproduce docs/results/<study>/<name>`` reruns
the run and compares with the copy. Refuses a run without a completed record, and a destination that exists.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from vla_rl.runtime.run_record import RECORD_FILE, RecordError, read_record

PATTERNS = ("run.json", "summary.json", "config.yaml", "stages.json", "rl/metrics.jsonl", "sft/sft_metrics.jsonl",
            "eval/sft/eval_info.json", "eval/final/eval_info.json", "eval_info.json", "metrics.jsonl",
            "stats.json", "collection.json")  # fmt: skip


def publish(run: Path, destination: Path) -> list[Path]:
    """Copy the files of :data:`PATTERNS` that ``run`` has into ``destination``; returns the copies."""
    record, _ = read_record(run)
    if record.get("status") != "completed":
        raise RecordError(f"{run / RECORD_FILE}: the run did not complete (status {record.get('status')!r})")
    if destination.exists():
        raise RecordError(f"{destination} exists; publish into a new folder")
    copies = []
    for pattern in PATTERNS:
        source = run / pattern
        if source.is_file():
            target = destination / pattern
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            copies.append(target)
    return copies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a finished run folder holding run.json")
    parser.add_argument("destination", type=Path, help="docs/results/<study>/<name>")
    args = parser.parse_args()
    try:
        copies = publish(args.run, args.destination)
    except RecordError as error:
        print(f"publish_run: {error}", file=sys.stderr)
        return 2
    print("\n".join(str(c) for c in copies))
    print(f"rerun it with: vla-rl reproduce {args.destination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
