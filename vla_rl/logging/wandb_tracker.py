"""The Weights & Biases tracker: offline by default, online only when the user asks.

The run folder lives in ``run_dir/wandb``. Mode: ``wandb_mode`` option, else ``WANDB_MODE``,
else ``offline`` (set ``WANDB_MODE=online`` or ``wandb_mode=online`` and log in to sync).
Videos are logged by mp4 path (``wandb.Video(path, format="mp4")``: array videos need moviepy);
tables become ``wandb.Table``; a table cell holding an ``.mp4`` path becomes a video.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

WANDB_MODES = ("offline", "online", "disabled")


class WandbTracker:
    def __init__(
        self, run_dir: str | Path, config_dict: dict[str, Any] | None = None, project: str = "vla-rl",
        wandb_mode: str | None = None, run_name: str | None = None, **_: Any,
    ):  # fmt: skip
        import wandb

        mode = wandb_mode or os.environ.get("WANDB_MODE") or "offline"
        if mode not in WANDB_MODES:
            raise ValueError(f"wandb mode {mode!r} is not one of {WANDB_MODES}; set WANDB_MODE or wandb_mode")
        self.wandb = wandb
        self.dir = Path(run_dir)
        self.run = wandb.init(
            project=project, dir=str(self.dir), mode=mode, config=config_dict or {},
            name=run_name or self.dir.name, reinit="create_new",
        )  # fmt: skip

    def log_scalars(self, metrics: dict[str, float], step: int) -> None:
        self.run.log({key: float(value) for key, value in metrics.items()}, step=step)

    def log_video(self, key: str, path: str | Path, step: int) -> None:
        self.run.log({key: self.wandb.Video(str(path), format="mp4")}, step=step)

    def log_table(self, key: str, rows: list[dict[str, Any]], step: int) -> None:
        columns = list(rows[0]) if rows else []
        data = [[self._cell(row.get(column)) for column in columns] for row in rows]
        self.run.log({key: self.wandb.Table(columns=columns, data=data)}, step=step)

    def _cell(self, value: Any) -> Any:
        if isinstance(value, str | Path) and str(value).endswith(".mp4") and Path(value).is_file():
            return self.wandb.Video(str(value), format="mp4")
        return value

    def rewind(self, step: int) -> None:
        pass  # each process logs a new wandb run, which starts its own step count

    def close(self) -> None:
        self.run.finish()
