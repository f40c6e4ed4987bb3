"""The console shows a handful of key figures and an ETA; every metric still goes to the other trackers."""

from __future__ import annotations

import io
import math
import time

from rich.console import Console

from vla_rl.logging import make_trackers
from vla_rl.logging.console import ConsoleTracker


def test_a_log_line_holds_only_the_key_figures_and_the_eta(tmp_path):
    stream = io.StringIO()
    console = ConsoleTracker(console=Console(file=stream, force_terminal=False, width=200))
    bar = console.progress("rl", 10)
    for _ in range(2):
        bar.advance()
        time.sleep(0.02)
    metrics = {"train/success_rate": 0.25, "train/policy_loss": -0.01, "train/approx_kl": 0.002,
               "timing/iteration_s": 4.5, "timing/rollout": 3.0, "train/episode_return": 1.5}  # fmt: skip
    console.log_scalars(metrics, step=2)
    line = stream.getvalue().strip()
    assert line.startswith("step 2 | success=0.25 return=1.5 iteration_s=4.5 eta=0:"), line
    assert "policy_loss" not in line and "approx_kl" not in line and "rollout" not in line
    console.close()


def test_every_metric_reaches_metrics_jsonl_next_to_the_console(tmp_path):
    tracker = make_trackers(["console", "jsonl"], tmp_path, {})
    tracker.find(ConsoleTracker).console = Console(file=io.StringIO(), force_terminal=False)
    tracker.log_scalars({"train/success_rate": 0.5, "train/policy_loss": -0.01}, step=1)
    tracker.close()
    assert '"train/policy_loss": -0.01' in (tmp_path / "metrics.jsonl").read_text()


def test_a_bar_given_a_smaller_total_keeps_its_progress_and_shortens_its_eta() -> None:
    console = ConsoleTracker(console=Console(file=io.StringIO(), force_terminal=False, width=200))
    bar = console.progress("rl", 100_000)
    for _ in range(3):
        bar.advance()
        time.sleep(0.02)
    speed_before = console.progress_bars.tasks[0].speed
    bar.set_total(6)
    task = console.progress_bars.tasks[0]
    assert task.completed == 3 and task.total == 6
    assert speed_before and task.speed == speed_before
    assert task.time_remaining == math.ceil(3 / speed_before)  # seconds, rounded up: 3 iterations left, not 99,997
    console.close()
