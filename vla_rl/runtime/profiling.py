"""Profiling: Chrome traces per worker, and per-phase wall-clock timings.

For the iterations chosen in the config every worker writes a Chrome trace (open in chrome://tracing or
Perfetto): the actor ranks and the rollout worker with torch.profiler (``start_torch_profiler(path)`` /
``stop_torch_profiler(handle)``), the env workers, which run no torch op, with :class:`SpanTrace` (their
phases as spans; torch's profiler would also crash a process that has rendered through EGL, see
docs/platform.md). :class:`PhaseTimer` measures named phases; :func:`write_timing_table` writes them as a
Markdown table.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def record_function(name: str) -> AbstractContextManager:
    """``torch.profiler.record_function(name)`` in a process that has loaded torch, else a no-op.

    Env workers never import torch (it would add ~2 s of CPU and ~520 MiB to each): there
    :class:`PhaseTimer`'s phases are :class:`SpanTrace` spans only.
    """
    loaded = sys.modules.get("torch")
    return loaded.profiler.record_function(name) if loaded is not None else nullcontext()


def start_torch_profiler(path: str) -> dict[str, Any]:
    import torch

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


class SpanTrace:
    """Named spans recorded between :meth:`start` and :meth:`stop`, written as a Chrome trace (``X`` events).

    Outside a recording :meth:`span` costs one attribute check.
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] | None = None

    def start(self) -> None:
        self.events = []

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        if self.events is None:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            self.events.append({"name": name, "ph": "X", "ts": start * 1e6, "dur": (time.perf_counter() - start) * 1e6,
                                "pid": os.getpid(), "tid": threading.get_ident()})  # fmt: skip

    def stop(self, path: str) -> str | None:
        """Write the recorded spans to ``path`` (via a temporary name) and stop recording; None if not recording."""
        if self.events is None:
            return None
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_text(json.dumps({"traceEvents": self.events}))
        partial.replace(target)
        self.events = None
        return str(target)


class PhaseTimer:
    """Wall-clock seconds (and calls) per named phase, accumulated until :meth:`pop`.

    Each phase is also a ``phase/<name>`` range for torch.profiler (where torch is loaded) and a span of
    ``spans`` (where given).
    """

    def __init__(self, spans: SpanTrace | None = None) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.spans = spans

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            with record_function(f"phase/{name}"), (self.spans.span(f"phase/{name}") if self.spans else nullcontext()):
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
