"""Rollout videos: overlays, tiled grids, and mp4 encoding in a background thread.

A *record* is one captured frame with what happened at that step (as produced by
``ChunkedEnvs.pop_video_records``): ``{"frame": uint8 (H, W, 3), "step": int, "reward": float,
"return": float, "success": bool, "instruction": str}``. Overlays (instruction on top; step,
reward, return and success below) are drawn with Pillow inside the writer thread, so the
evaluation loop only hands frames over. Frame sides are padded to multiples of 16 (H.264
macro blocks) with black.
"""

from __future__ import annotations

import math
import os
import queue
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MACRO_BLOCK = 16
SUCCESS_COLOUR = (40, 200, 70)
TEXT_COLOUR = (255, 255, 255)

Record = dict[str, Any]


def pad_to_macro_block(frame: np.ndarray, block: int = MACRO_BLOCK) -> np.ndarray:
    """uint8 ``(H, W, 3)`` -> ``(ceil(H/16)*16, ceil(W/16)*16, 3)``, black below and to the right."""
    height, width = frame.shape[:2]
    padded_h, padded_w = math.ceil(height / block) * block, math.ceil(width / block) * block
    if (padded_h, padded_w) == (height, width):
        return frame
    out = np.zeros((padded_h, padded_w, 3), np.uint8)
    out[:height, :width] = frame
    return out


def draw_overlay(record: Record) -> np.ndarray:
    """The record's frame with instruction, step, reward, return and success drawn on it."""
    image = Image.fromarray(np.ascontiguousarray(record["frame"]))
    draw = ImageDraw.Draw(image, "RGBA")
    font = ImageFont.load_default()
    width, height = image.size
    line_height = 11
    chars_per_line = max(8, width // 6)
    lines = textwrap.wrap(str(record.get("instruction", "")), chars_per_line)[:2]
    if lines:
        draw.rectangle((0, 0, width, line_height * len(lines) + 2), fill=(0, 0, 0, 140))
        for row, line in enumerate(lines):
            draw.text((2, 1 + row * line_height), line, fill=TEXT_COLOUR, font=font)
    status = f"t={record['step']} r={record['reward']:.2f} R={record['return']:.2f}"
    draw.rectangle((0, height - line_height - 2, width, height), fill=(0, 0, 0, 140))
    draw.text((2, height - line_height - 1), status, fill=TEXT_COLOUR, font=font)
    if record.get("success"):
        draw.rectangle((0, 0, width - 1, height - 1), outline=SUCCESS_COLOUR, width=3)
        draw.text((width - 48, height - 2 * line_height - 3), "success", fill=SUCCESS_COLOUR, font=font)
    return np.asarray(image)


def tile_frames(frames: Sequence[np.ndarray], columns: int | None = None) -> np.ndarray:
    """Frames of one size ``(H, W, 3)`` -> one grid ``(rows*H, columns*W, 3)`` (empty cells black)."""
    count = len(frames)
    columns = columns or math.ceil(math.sqrt(count))
    rows = math.ceil(count / columns)
    height, width = frames[0].shape[:2]
    grid = np.zeros((rows * height, columns * width, 3), np.uint8)
    for index, frame in enumerate(frames):
        row, column = divmod(index, columns)
        grid[row * height : (row + 1) * height, column * width : (column + 1) * width] = frame
    return grid


def grid_records(records_per_env: Sequence[Sequence[Record]]) -> list[list[Record]]:
    """Align several episodes in time: an env whose episode ended keeps showing its last record."""
    length = max(len(records) for records in records_per_env)
    return [[records[min(t, len(records) - 1)] for records in records_per_env] for t in range(length)]


def encode_mp4(path: Path, frames: Sequence[np.ndarray], fps: float) -> Path:
    """Write frames (uint8 ``(H, W, 3)``, one size) as H.264 mp4 under a temporary name, then rename."""
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.stem}.tmp{path.suffix}")
    with imageio.get_writer(staging, fps=fps, codec="libx264", macro_block_size=MACRO_BLOCK) as writer:
        for frame in frames:
            writer.append_data(pad_to_macro_block(frame))
    os.replace(staging, path)
    return path


class VideoWriter:
    """Encodes episode and grid videos in one background thread.

    ``write_episode``/``write_grid`` return at once; :meth:`wait` blocks until every queued
    video is on disk and re-raises the first error of the thread (naming the file).
    """

    def __init__(self, max_queued: int = 32):
        self._queue: queue.Queue[tuple[Path, list[Any], float, str] | None] = queue.Queue(max_queued)
        self._errors: list[str] = []
        self._written: list[Path] = []
        self._thread = threading.Thread(target=self._run, name="video-writer", daemon=True)
        self._thread.start()

    def write_episode(self, path: str | Path, records: Sequence[Record], fps: float) -> Path:
        """Queue one episode's records as ``path`` (one frame per record)."""
        if not records:
            raise ValueError(f"no frames for video {str(path)!r}")
        self._queue.put((Path(path), list(records), float(fps), "episode"))
        return Path(path)

    def write_grid(self, path: str | Path, records_per_env: Sequence[Sequence[Record]], fps: float) -> Path:
        """Queue a tiled video of several envs' episodes (ended envs hold their last frame)."""
        records_per_env = [list(r) for r in records_per_env if r]
        if not records_per_env:
            raise ValueError(f"no frames for grid video {str(path)!r}")
        self._queue.put((Path(path), grid_records(records_per_env), float(fps), "grid"))
        return Path(path)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                self._queue.task_done()
                return
            path, items, fps, kind = job
            try:
                if kind == "episode":
                    frames = (draw_overlay(record) for record in items)
                else:
                    frames = (tile_frames([draw_overlay(r) for r in step_records]) for step_records in items)
                self._written.append(encode_mp4(path, list(frames), fps))
            except Exception as error:  # noqa: BLE001 - reported by wait()
                self._errors.append(f"writing video {str(path)!r} failed: {type(error).__name__}: {error}")
            finally:
                self._queue.task_done()

    def wait(self) -> list[Path]:
        """Block until the queue is empty; returns the videos written so far."""
        self._queue.join()
        if self._errors:
            raise RuntimeError("; ".join(self._errors))
        return list(self._written)

    def close(self) -> list[Path]:
        written = self.wait()
        self._queue.put(None)
        self._thread.join(timeout=60)
        return written
