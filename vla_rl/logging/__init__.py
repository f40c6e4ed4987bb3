"""Trackers (console, jsonl, TensorBoard, W&B), rollout videos and rollout dumps."""

from vla_rl.logging.rollout_dump import RolloutDumper, read_rollout_dump, write_rollout_dump
from vla_rl.logging.trackers import TRACKERS, CompositeTracker, Tracker, make_trackers
from vla_rl.logging.video import VideoWriter

__all__ = [
    "TRACKERS",
    "CompositeTracker",
    "RolloutDumper",
    "Tracker",
    "VideoWriter",
    "make_trackers",
    "read_rollout_dump",
    "write_rollout_dump",
]
