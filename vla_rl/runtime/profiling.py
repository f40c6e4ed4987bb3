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
    """Wall-clock seconds (and calls) per named phase, accumulated until :meth:`pop`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            with torch.profiler.record_function(f"phase/{name}"):
                yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds
        self.calls[name] += 1

    def metrics(self, prefix: str = "timing/") -> dict[str, float]:
        return {f"{prefix}{name}_s": value for name, value in self.seconds.items()}

    def pop(self) -> dict[str, dict[str, float]]:
        """``{phase: {"seconds", "calls"}}`` accumulated so far; starts again from zero."""
        table = {name: {"seconds": self.seconds[name], "calls": self.calls[name]} for name in self.seconds}
        self.seconds, self.calls = defaultdict(float), defaultdict(int)
        return table


def time_module_forwards(model: torch.nn.Module, timer: PhaseTimer, max_depth: int = 2) -> list[Any]:
    """Time every forward of ``model``'s sub-modules down to ``max_depth`` into ``timer`` as ``forward/<name>``
    (e.g. ``forward/head.velocity``: one call per denoising step). Returns the hook handles (``.remove()``)."""
    handles = []
    for name, module in model.named_modules():
        if not name or name.count(".") >= max_depth:
            continue
        starts: list[float] = []
        handles.append(module.register_forward_pre_hook(lambda m, a, s=starts: s.append(time.perf_counter())))
        handles.append(module.register_forward_hook(
            lambda m, a, o, s=starts, n=f"forward/{name}": timer.add(n, time.perf_counter() - s.pop())
        ))  # fmt: skip
    return handles


def write_timing_table(rows: list[dict[str, float]], path: Path) -> None:
    """Markdown table: one row per profiled iteration, one column per phase (seconds)."""
    phases = sorted({key for row in rows for key in row if key != "iteration"})
    lines = ["| iteration | " + " | ".join(phases) + " |", "|---" * (len(phases) + 1) + "|"]
    for row in rows:
        cells = [f"{row.get(p, 0.0):.3f}" for p in phases]
        lines.append(f"| {int(row['iteration'])} | " + " | ".join(cells) + " |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
