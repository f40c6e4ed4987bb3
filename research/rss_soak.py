"""Run a command and sample the resident memory (RSS) of it and every descendant: a memory soak.

    python research/rss_soak.py --out outputs/soak.json --every 30 -- .venv/bin/vla-rl train ...

Writes ``--out`` (JSON): per process (pid, name), its samples ``[seconds, rss MiB]`` and its growth in
MiB per hour, fitted by least squares over the samples after ``--warmup`` seconds of its life (start-up
allocations are not a leak). Prints one line per process with at least 3 samples after its warm-up.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil


def process_label(process: psutil.Process) -> str:
    try:
        command = process.cmdline()
        name = process.name()
    except psutil.Error:
        return "?"
    if name.startswith("ray::"):
        return name
    return " ".join(Path(part).name for part in command[:3])[:60] or name


def growth_mib_per_hour(samples: list[tuple[float, float]], warmup_s: float) -> float | None:
    if not samples:
        return None
    start = samples[0][0]
    kept = [(t, rss) for t, rss in samples if t - start >= warmup_s]
    if len(kept) < 3 or kept[-1][0] - kept[0][0] <= 0:
        return None
    times, values = np.array(kept).T
    slope_per_s = np.polyfit(times, values, 1)[0]
    return float(slope_per_s * 3600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=120.0, help="seconds of each process's life not fitted")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    started = time.monotonic()
    child = subprocess.Popen(command)
    root = psutil.Process(child.pid)
    series: dict[str, dict] = {}
    while child.poll() is None:
        now = time.monotonic() - started
        try:
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            processes = [root]
        for process in processes:
            try:
                rss = process.memory_info().rss / 2**20
            except psutil.Error:
                continue
            key = str(process.pid)
            entry = series.setdefault(key, {"pid": process.pid, "name": process_label(process), "samples": []})
            if entry["name"] in ("ray::IDLE", "?"):  # a Ray worker takes its actor's name once it has one
                entry["name"] = process_label(process)
            entry["samples"].append((round(now, 1), round(rss, 1)))
        time.sleep(args.every)
    for entry in series.values():
        entry["growth_mib_per_hour"] = growth_mib_per_hour(entry["samples"], args.warmup)
    report = {"command": command, "returncode": child.returncode, "seconds": time.monotonic() - started,
              "every_s": args.every, "warmup_s": args.warmup, "processes": list(series.values())}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    temporary = args.out.with_name(args.out.name + ".tmp")
    temporary.write_text(json.dumps(report, indent=1))
    temporary.replace(args.out)
    for entry in sorted(series.values(), key=lambda e: -len(e["samples"])):
        if entry["growth_mib_per_hour"] is not None:
            first, last = entry["samples"][0][1], entry["samples"][-1][1]
            print(f"{entry['name']:<40} pid {entry['pid']:>7}: {len(entry['samples']):>4} samples, "
                  f"RSS {first:.0f} -> {last:.0f} MiB, growth {entry['growth_mib_per_hour']:+.1f} MiB/h")  # fmt: skip
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
