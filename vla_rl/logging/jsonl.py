"""The always-on tracker: ``run_dir/metrics.jsonl``, one JSON object per line.

Each line is ``{"step": int, "time": float (unix seconds), <key>: float, ...}`` for scalars;
videos and tables go to ``run_dir/media.jsonl`` as ``{"step", "key", "kind": "video"|"table",
"path" | "rows"}``. Lines are flushed at once, so a crashed run keeps what it logged.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"
MEDIA_FILE = "media.jsonl"


def _json_number(value: float) -> float | str:
    """NaN and infinities are not JSON: write them as strings ("nan", "inf", "-inf")."""
    return value if math.isfinite(value) else str(value)


class JsonlTracker:
    def __init__(self, run_dir: str | Path, config_dict: dict[str, Any] | None = None, **_: Any):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / METRICS_FILE
        self._metrics = self.metrics_path.open("a", encoding="utf-8")
        self._media = None

    def log_scalars(self, metrics: dict[str, float], step: int) -> None:
        line = {"step": int(step), "time": time.time(), **{k: _json_number(float(v)) for k, v in metrics.items()}}
        self._metrics.write(json.dumps(line) + "\n")
        self._metrics.flush()

    def _write_media(self, entry: dict[str, Any]) -> None:
        if self._media is None:
            self._media = (self.run_dir / MEDIA_FILE).open("a", encoding="utf-8")
        self._media.write(json.dumps(entry, default=str) + "\n")
        self._media.flush()

    def log_video(self, key: str, path: str | Path, step: int) -> None:
        self._write_media({"step": int(step), "key": key, "kind": "video", "path": str(path)})

    def log_table(self, key: str, rows: list[dict[str, Any]], step: int) -> None:
        self._write_media({"step": int(step), "key": key, "kind": "table", "rows": rows})

    def rewind(self, step: int) -> None:
        """Drop the lines logged after ``step`` (and lines cut by a crash), atomically."""
        self._metrics.close()
        if self._media is not None:
            self._media.close()
            self._media = None
        for path in (self.metrics_path, self.run_dir / MEDIA_FILE):
            if path.is_file():
                kept = [json.dumps(r) + "\n" for r in read_metrics(path) if int(r.get("step", 0)) <= step]
                temporary = path.with_name(path.name + ".tmp")
                temporary.write_text("".join(kept), encoding="utf-8")
                os.replace(temporary, path)
        self._metrics = self.metrics_path.open("a", encoding="utf-8")

    def close(self) -> None:
        self._metrics.close()
        if self._media is not None:
            self._media.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl (or media.jsonl) file (a line that is not JSON, cut by a crash, is skipped)."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a crash; the rest of the file is still good
    return records
