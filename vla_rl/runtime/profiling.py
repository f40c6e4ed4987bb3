"""Profiling: torch.profiler traces per worker, and per-phase wall-clock timings.

``start_torch_profiler(path)`` / ``stop_torch_profiler(handle)`` are called through every
worker group for the iterations chosen in the config; each worker writes a Chrome trace
(open in chrome://tracing or Perfetto). :class:`PhaseTimer` measures the named phases of
the fit loop; :func:`write_timing_table` writes them as a Markdown table.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch


def start_torch_profiler(path: str) -> dict[str, Any]:
    profiler = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU]
        + ([torch.profiler.ProfilerActivity.CUDA] if torch.cuda.is_available() else []),
        record_shapes=False,
        with_stack=False,
    )
    profiler.start()
    return {"profiler": profiler, "path": path}


def stop_torch_profiler(handle: dict[str, Any] | None) -> str | None:
    if handle is None:
        return None
    profiler = handle["profiler"]
    profiler.stop()
    Path(handle["path"]).parent.mkdir(parents=True, exist_ok=True)
    profiler.export_chrome_trace(handle["path"])
    return handle["path"]


class PhaseTimer:
    """Wall-clock seconds per named phase, accumulated over one iteration."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            with torch.profiler.record_function(f"phase/{name}"):
                yield
        finally:
            self.seconds[name] += time.perf_counter() - start

    def metrics(self, prefix: str = "timing/") -> dict[str, float]:
        return {f"{prefix}{name}_s": value for name, value in self.seconds.items()}


def write_timing_table(rows: list[dict[str, float]], path: Path) -> None:
    """Markdown table: one row per profiled iteration, one column per phase (seconds)."""
    phases = sorted({key for row in rows for key in row if key != "iteration"})
    lines = ["| iteration | " + " | ".join(phases) + " |", "|---" * (len(phases) + 1) + "|"]
    for row in rows:
        cells = [f"{row.get(p, 0.0):.3f}" for p in phases]
        lines.append(f"| {int(row['iteration'])} | " + " | ".join(cells) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
