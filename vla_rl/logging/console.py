"""The console tracker: a live table of the latest metrics and progress bars (rich).

On a terminal the table and the bars redraw in place. Elsewhere (a log file, CI) each
``log_scalars`` prints one line ``step N | key=value ...`` and bars print nothing, so logs stay
readable. Progress bars: ``tracker.progress("iterations", total)`` returns a bar with
``advance(n)``; the trainer uses one for iterations, episodes and collected steps.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

NAMESPACES = ("train", "eval", "timing")


def format_value(value: float) -> str:
    if value != value:  # NaN
        return "nan"
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.4g}"
    return f"{value:.3e}"


class ProgressBar:
    def __init__(self, progress: Progress, task_id: Any):
        self._progress, self._task_id = progress, task_id

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task_id, amount)

    def reset(self, total: float | None = None) -> None:
        self._progress.reset(self._task_id, total=total)


class ConsoleTracker:
    def __init__(self, run_dir: str | Path | None = None, config_dict: dict[str, Any] | None = None,
                 console: Console | None = None, **_: Any):  # fmt: skip
        self.console = console or Console(file=sys.stderr)
        self.latest: dict[str, float] = {}
        self.step = 0
        self.progress_bars = Progress(
            TextColumn("{task.description:>12}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TimeRemainingColumn(), console=self.console,
        )  # fmt: skip
        self._live: Live | None = None
        if self.console.is_terminal:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4)
            self._live.start()

    def progress(self, name: str, total: float | None) -> ProgressBar:
        """A progress bar called ``name`` (iterations, episodes, steps...)."""
        return ProgressBar(self.progress_bars, self.progress_bars.add_task(name, total=total))

    def table(self) -> Table:
        """The latest value of every key, grouped by namespace (``train/``, ``eval/``, ``timing/``...)."""
        table = Table(title=f"step {self.step}", show_header=True, header_style="bold")
        table.add_column("metric")
        table.add_column("value", justify="right")
        def order(key: str) -> tuple[int, str]:
            prefix = key.split("/", 1)[0]
            return (NAMESPACES.index(prefix) if prefix in NAMESPACES else len(NAMESPACES), key)

        for key in sorted(self.latest, key=order):
            table.add_row(key, format_value(self.latest[key]))
        return table

    def _render(self) -> Group:
        return Group(self.table(), self.progress_bars)

    def log_scalars(self, metrics: dict[str, float], step: int) -> None:
        self.step = step
        self.latest.update({key: float(value) for key, value in metrics.items()})
        if self._live is not None:
            self._live.update(self._render())
        else:
            text = " ".join(f"{key}={format_value(float(value))}" for key, value in metrics.items())
            self.console.print(f"step {step} | {text}", highlight=False, soft_wrap=True)

    def log_video(self, key: str, path: str | Path, step: int) -> None:
        if self._live is None:
            self.console.print(f"step {step} | {key}: {path}", highlight=False, soft_wrap=True)

    def log_table(self, key: str, rows: list[dict[str, Any]], step: int) -> None:
        pass  # tables are for the dashboards; the console shows their scalars

    def rewind(self, step: int) -> None:
        self.step = step

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
