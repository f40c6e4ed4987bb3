"""The console tracker: a progress bar per stage and a handful of key figures (rich).

The key figures (:data:`KEY_FIGURES`: success, return, iteration time, evaluation success) are what a
person watches; every metric goes to the other trackers (``metrics.jsonl`` always). On a terminal the
figures and the bars (with elapsed time and ETA) redraw in place. Elsewhere (a log file, CI) each
``log_scalars`` prints one line ``step N | success=... return=... iteration_s=... eta=...`` and bars print
nothing, so logs stay readable. Progress bars: ``tracker.progress("rl", total)`` returns a bar with
``advance(n)``; RL uses one for its iterations, evaluation one for its episodes.
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

#: The metrics the console shows (metric key -> label), in this order, when a step logs them.
KEY_FIGURES = {
    "train/success_rate": "success",
    "train/episode_return": "return",
    "eval/success_rate": "eval_success",
    "timing/iteration_s": "iteration_s",
}


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

    def set_total(self, total: float) -> None:
        """Change the bar's total, keeping what it has done and its speed (its ETA then counts to the new total).

        Not through ``Progress.update(total=...)``: that forgets the task's speed samples, so there would be no
        ETA until the next two advances.
        """
        task = next(task for task in self._progress.tasks if task.id == self._task_id)
        task.total = total


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

    def key_figures(self) -> dict[str, str]:
        """Label -> formatted latest value of the :data:`KEY_FIGURES` logged so far, and the first unfinished
        bar's ETA (``eta``, e.g. ``3:12``) once it can tell."""
        figures = {label: format_value(self.latest[key]) for key, label in KEY_FIGURES.items() if key in self.latest}
        for task in self.progress_bars.tasks:
            if not task.finished and task.time_remaining is not None:
                minutes, seconds = divmod(int(task.time_remaining), 60)
                figures["eta"] = f"{minutes}:{seconds:02d}"
                break
        return figures

    def table(self) -> Table:
        """The key figures of the latest step."""
        table = Table(title=f"step {self.step}", show_header=True, header_style="bold")
        table.add_column("figure")
        table.add_column("value", justify="right")
        for label, value in self.key_figures().items():
            table.add_row(label, value)
        return table

    def _render(self) -> Group:
        return Group(self.table(), self.progress_bars)

    def log_scalars(self, metrics: dict[str, float], step: int) -> None:
        self.step = step
        self.latest.update({key: float(value) for key, value in metrics.items()})
        if self._live is not None:
            self._live.update(self._render())
        else:
            text = " ".join(f"{label}={value}" for label, value in self.key_figures().items())
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
