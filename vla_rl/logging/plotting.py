"""Learning curves from ``metrics.jsonl`` as PNG files (matplotlib, headless Agg back end).

Figures (each drawn only when the run logged a matching key):

- ``success.png``: keys ending in ``success_rate`` (eval and train), with the Wilson band
  where ``eval/success_ci95_low/high`` were logged;
- ``return.png``: keys ending in ``return`` (``mean_return``, ``episode_return``...);
- ``losses.png``: keys containing ``loss``, plus ``train/kl``, ``train/entropy``;
- ``throughput.png``: keys under ``timing/`` and keys ending in ``per_s`` / ``_fps``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vla_rl.logging.jsonl import METRICS_FILE, read_metrics

FIGURES: dict[str, tuple[str, Callable[[str], bool]]] = {
    "success": ("success rate", lambda key: key.endswith("success_rate")),
    "return": ("return", lambda key: key.endswith("return")),
    "losses": ("losses", lambda key: "loss" in key or key in ("train/kl", "train/entropy")),
    "throughput": ("throughput and timing",
                   lambda key: key.startswith("timing/") or key.endswith("per_s") or key.endswith("_fps")),
}  # fmt: skip


def metric_series(records: list[dict[str, Any]]) -> dict[str, tuple[list[int], list[float]]]:
    """key -> (steps, values), in logging order; non-finite values are dropped."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for record in records:
        step = record.get("step")
        if step is None:
            continue
        for key, value in record.items():
            if key in ("step", "time"):
                continue
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if math.isfinite(number):
                steps, values = series.setdefault(key, ([], []))
                steps.append(int(step))
                values.append(number)
    return series


def plot_run(run_dir: str | Path, output_dir: str | Path | None = None) -> list[Path]:
    """Draw the figures of ``run_dir/metrics.jsonl`` into ``output_dir`` (default: ``plots/`` beside the file).

    A run folder of ``vla-rl train`` keeps its RL metrics in ``rl/``: ``run_dir/rl/metrics.jsonl`` is used then.

    Raises:
        FileNotFoundError: ``run_dir`` has no metrics.jsonl.
        ValueError: the file holds no numeric metrics.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    metrics_path = run_dir / METRICS_FILE if run_dir.is_dir() else run_dir
    if run_dir.is_dir() and not metrics_path.is_file() and (run_dir / "rl" / METRICS_FILE).is_file():
        metrics_path = run_dir / "rl" / METRICS_FILE  # a `vla-rl train` run folder: its RL curves
    if not metrics_path.is_file():
        raise FileNotFoundError(
            f"no {METRICS_FILE} in {str(run_dir)!r} (nor in its rl/); pass a run folder written by `vla-rl train` "
            "or `vla-rl eval`, or the metrics file itself"
        )
    series = metric_series(read_metrics(metrics_path))
    if not series:
        raise ValueError(f"{str(metrics_path)!r} holds no numeric metrics to plot")
    output_dir = Path(output_dir) if output_dir else metrics_path.parent / "plots"
    output_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (title, selects) in FIGURES.items():
        keys = sorted(key for key in series if selects(key))
        if not keys:
            continue
        figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
        for key in keys:
            steps, values = series[key]
            axes.plot(steps, values, marker="o" if len(steps) < 30 else None, label=key)
        if name == "success" and "eval/success_ci95_low" in series and "eval/success_ci95_high" in series:
            low_steps, lows = series["eval/success_ci95_low"]
            _, highs = series["eval/success_ci95_high"]
            axes.fill_between(low_steps, lows, highs, alpha=0.2, label="eval 95% CI (Wilson)")
        axes.set_title(title)
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
        figure.tight_layout()
        path = output_dir / f"{name}.png"
        figure.savefig(path)
        plt.close(figure)
        written.append(path)
    return written
