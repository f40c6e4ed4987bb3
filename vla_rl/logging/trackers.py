"""Experiment trackers: one protocol, several back ends, used together through a composite.

Keys are namespaced by prefix: ``train/...``, ``eval/...``, ``timing/...``. Every run writes
``run_dir/metrics.jsonl`` (the jsonl tracker is always on); ``console``, ``tensorboard`` and
``wandb`` are added by name. A back end registers itself in :data:`TRACKERS` (name -> factory),
so a new one adds a file, not a branch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from contract.import_path import import_object


@runtime_checkable
class Tracker(Protocol):
    def log_scalars(self, metrics: dict[str, float], step: int) -> None: ...

    def log_video(self, key: str, path: str | Path, step: int) -> None: ...

    def log_table(self, key: str, rows: list[dict[str, Any]], step: int) -> None: ...

    def rewind(self, step: int) -> None:
        """Forget what was logged after ``step`` (a run resumed from a checkpoint at ``step``)."""
        ...

    def close(self) -> None: ...


TrackerFactory = Callable[..., Tracker]

#: name -> "module:factory"; a factory takes (run_dir, config_dict, project=...) and returns a Tracker.
TRACKERS: dict[str, str] = {
    "jsonl": "vla_rl.logging.jsonl:JsonlTracker",
    "console": "vla_rl.logging.console:ConsoleTracker",
    "tensorboard": "vla_rl.logging.tensorboard:TensorBoardTracker",
    "wandb": "vla_rl.logging.wandb_tracker:WandbTracker",
}


class CompositeTracker:
    """Fans every call out to its trackers (in order); ``close`` closes them all."""

    def __init__(self, trackers: Sequence[Tracker]):
        self.trackers = list(trackers)

    def log_scalars(self, metrics: dict[str, float], step: int) -> None:
        metrics = {key: float(value) for key, value in metrics.items()}
        for tracker in self.trackers:
            tracker.log_scalars(metrics, step)

    def log_video(self, key: str, path: str | Path, step: int) -> None:
        for tracker in self.trackers:
            tracker.log_video(key, path, step)

    def log_table(self, key: str, rows: list[dict[str, Any]], step: int) -> None:
        for tracker in self.trackers:
            tracker.log_table(key, rows, step)

    def rewind(self, step: int) -> None:
        for tracker in self.trackers:
            tracker.rewind(step)

    def find(self, kind: type) -> Any:
        """The first tracker of class ``kind``, or None (e.g. the console's progress bars)."""
        return next((t for t in self.trackers if isinstance(t, kind)), None)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()


def make_trackers(
    names: Sequence[str], run_dir: str | Path, config_dict: dict[str, Any] | None = None, project: str = "vla-rl",
    **options: Any,
) -> CompositeTracker:  # fmt: skip
    """The trackers ``names`` (plus ``jsonl``, always) writing into ``run_dir``.

    ``options`` go to every factory that accepts them (e.g. ``wandb_mode="online"``).

    Raises:
        ValueError: an unknown tracker name; lists the known ones.
    """
    unknown = [name for name in names if name not in TRACKERS]
    if unknown:
        raise ValueError(f"unknown tracker(s) {unknown}; available: {', '.join(sorted(TRACKERS))}")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ordered = ["jsonl"] + [name for name in dict.fromkeys(names) if name != "jsonl"]
    trackers = []
    for name in ordered:
        factory = import_object(TRACKERS[name], "tracker")
        trackers.append(factory(run_dir, config_dict or {}, project=project, **options))
    return CompositeTracker(trackers)
