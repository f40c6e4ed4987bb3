"""Trackers, videos, rollout dumps and plots."""

from __future__ import annotations

import json

import imageio.v3 as iio
import numpy as np
import pytest

from vla_rl.logging import make_trackers, read_rollout_dump, write_rollout_dump
from vla_rl.logging.jsonl import read_metrics
from vla_rl.logging.plotting import plot_run
from vla_rl.logging.video import VideoWriter, draw_overlay, pad_to_macro_block, tile_frames


def make_records(count: int, height: int, width: int, success_at: int | None = None) -> list[dict]:
    rng = np.random.default_rng(count)
    return [
        {"frame": rng.integers(0, 255, (height, width, 3), dtype=np.uint8), "step": t, "reward": float(t == success_at),
         "return": float(success_at is not None and t >= success_at), "success": t == success_at,
         "instruction": "lift the red block"}
        for t in range(count)
    ]  # fmt: skip


def test_videos_decode_with_frame_count_and_size(tmp_path):
    writer = VideoWriter()
    writer.write_episode(tmp_path / "a.mp4", make_records(7, 64, 128, success_at=6), fps=10)
    writer.write_episode(tmp_path / "odd.mp4", make_records(3, 40, 50), fps=10)
    # Grid of 3 envs with episodes of 4, 9, 2 frames: 9 frames, tiles 2x2 of (64, 64).
    writer.write_grid(tmp_path / "grid.mp4", [make_records(n, 64, 64) for n in (4, 9, 2)], fps=20)
    written = writer.close()
    assert sorted(p.name for p in written) == ["a.mp4", "grid.mp4", "odd.mp4"]
    assert iio.imread(tmp_path / "a.mp4").shape == (7, 64, 128, 3)
    assert iio.imread(tmp_path / "odd.mp4").shape == (3, 48, 64, 3)  # padded to multiples of 16
    assert iio.imread(tmp_path / "grid.mp4").shape == (9, 128, 128, 3)
    assert iio.immeta(tmp_path / "grid.mp4")["fps"] == pytest.approx(20)
    assert not list(tmp_path.glob(".*tmp*"))


def test_overlay_marks_success_and_grid_layout():
    frame = np.zeros((64, 64, 3), np.uint8)
    plain = draw_overlay({"frame": frame, "step": 1, "reward": 0.0, "return": 0.0, "success": False, "instruction": ""})
    success = draw_overlay({"frame": frame, "step": 1, "reward": 1.0, "return": 1.0, "success": True,
                            "instruction": "reach"})  # fmt: skip
    assert tuple(success[32, 0]) == (40, 200, 70)  # the green border
    assert tuple(plain[32, 0]) == (0, 0, 0)
    assert plain[-5:].max() > 0  # the status line is drawn
    tiles = [np.full((16, 16, 3), value, np.uint8) for value in (10, 20, 30)]
    grid = tile_frames(tiles)
    assert grid.shape == (32, 32, 3)
    assert grid[0, 16, 0] == 20 and grid[16, 0, 0] == 30 and grid[16, 16, 0] == 0
    assert pad_to_macro_block(np.ones((17, 32, 3), np.uint8)).shape == (32, 32, 3)


def test_video_errors_name_the_file(tmp_path):
    writer = VideoWriter()
    bad = make_records(2, 32, 32)
    bad[1]["frame"] = np.zeros((16, 16, 3), np.uint8)  # a frame of another size
    writer.write_episode(tmp_path / "bad.mp4", bad, fps=10)
    with pytest.raises(RuntimeError, match="bad.mp4"):
        writer.close()
    with pytest.raises(ValueError, match="no frames"):
        VideoWriter().write_episode(tmp_path / "empty.mp4", [], fps=10)


def test_jsonl_and_tensorboard_trackers(tmp_path):
    tracker = make_trackers(["tensorboard"], tmp_path, {"seed": 1})
    tracker.log_scalars({"train/loss": 0.5, "eval/success_rate": 0.25}, step=1)
    tracker.log_scalars({"train/loss": float("nan")}, step=2)
    tracker.log_table("eval/samples", [{"instruction": "reach", "success": True}], step=2)
    tracker.close()
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["step"], r.get("train/loss")) for r in records] == [(1, 0.5), (2, "nan")]
    assert records[0]["eval/success_rate"] == 0.25
    media = [json.loads(line) for line in (tmp_path / "media.jsonl").read_text().splitlines()]
    assert media[0]["rows"] == [{"instruction": "reach", "success": True}]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("eval/success_rate")] == [(1, 0.25)]


def test_unknown_tracker_lists_the_known(tmp_path):
    with pytest.raises(ValueError, match=r"unknown tracker\(s\) \['mlflow'\]; available: console, jsonl"):
        make_trackers(["mlflow"], tmp_path)


def test_rollout_dump_round_trip(tmp_path):
    episodes = [
        {"actions": np.arange(12, dtype=np.float32).reshape(3, 2, 2), "rewards": [0, 0, 1], "success": True,
         "length": 5, "env": 1, "from_reset": False, "instruction": "lift the red block", "task": "lift"},
        {"actions": np.ones((2, 2, 2)), "rewards": [0.5, 0.25], "success": False, "instruction": "open the drawer"},
    ]  # fmt: skip
    path = write_rollout_dump(tmp_path, 20, episodes)
    assert path.name == "iter_000020.npz"
    loaded = read_rollout_dump(path)
    assert [e["length"] for e in loaded] == [5, 4]
    assert [e["return"] for e in loaded] == [1.0, 0.75]
    assert [(e["env"], e["from_reset"]) for e in loaded] == [(1, False), (-1, True)]
    np.testing.assert_array_equal(loaded[0]["actions"], episodes[0]["actions"])
    assert loaded[1]["instruction"] == "open the drawer" and loaded[1]["task"] == "" and not loaded[1]["success"]
    assert read_rollout_dump(write_rollout_dump(tmp_path, 22, [])) == []
    with pytest.raises(ValueError, match="episode 0: actions must be chunks"):
        write_rollout_dump(tmp_path, 21, [{"actions": np.ones((3, 2, 2)), "rewards": [0, 1], "success": 0,
                                           "instruction": "x"}])  # fmt: skip
    with pytest.raises(ValueError, match="episode 0: length 7 env steps does not fit 2 chunks of 2 actions"):
        write_rollout_dump(tmp_path, 21, [{"actions": np.ones((2, 2, 2)), "rewards": [0, 1], "success": 0,
                                           "length": 7, "instruction": "x"}])  # fmt: skip
    assert not list((tmp_path / "rollouts").glob(".*tmp*"))


def test_plots_from_a_small_metrics_file(tmp_path):
    lines = [
        {"step": step, "train/policy_loss": 1.0 / step, "train/mean_return": 0.1 * step,
         "eval/success_rate": 0.2 * step, "eval/success_ci95_low": 0.1 * step, "eval/success_ci95_high": 0.3 * step,
         "timing/env_steps_per_s": 100.0 + step}
        for step in range(1, 4)
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n{torn")
    paths = plot_run(tmp_path)
    assert sorted(p.name for p in paths) == ["losses.png", "return.png", "success.png", "throughput.png"]
    for path in paths:
        image = iio.imread(path)
        assert image.shape[:2] == (400, 700) and image.std() > 0
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        plot_run(tmp_path / "plots")
