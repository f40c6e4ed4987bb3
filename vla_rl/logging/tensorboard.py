"""The TensorBoard tracker (``torch.utils.tensorboard``), event files in ``run_dir/tensorboard``.

Videos are logged as their file path (a text entry): TensorBoard's own video summary needs
moviepy; tables become markdown text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def rows_to_markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(empty)"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


class TensorBoardTracker:
    def __init__(self, run_dir: str | Path, config_dict: dict[str, Any] | None = None, **_: Any):
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(run_dir) / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.log_dir))

    def log_scalars(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, float(value), global_step=step)
        self.writer.flush()

    def log_video(self, key: str, path: str | Path, step: int) -> None:
        self.writer.add_text(key, str(path), global_step=step)

    def log_table(self, key: str, rows: list[dict[str, Any]], step: int) -> None:
        self.writer.add_text(key, rows_to_markdown(rows), global_step=step)

    def rewind(self, step: int) -> None:
        """Reopen the writer with ``purge_step``: TensorBoard drops the events after ``step``."""
        from torch.utils.tensorboard import SummaryWriter

        self.writer.close()
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=step + 1)

    def close(self) -> None:
        self.writer.close()
