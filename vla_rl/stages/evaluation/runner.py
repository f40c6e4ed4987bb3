"""The evaluation loop: N seeded episodes per task, one episode per env per round, with videos.

For each task, episodes ``0..N-1`` run in rounds of ``envs.num_envs`` (slot ``j`` of a round runs
episode ``first + j`` with seed :func:`~vla_rl.stages.evaluation.metrics.evaluation_seed`); the slots of a
last, partial round are deactivated. Video frames are captured where the envs live for the
episodes ``0..M-1`` of each task (one mp4 each) and for the first round's first ``grid_envs``
envs (one tiled mp4 per task); encoding happens in a background thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contract.vec_env import VecEnv
from vla_rl.logging.video import VideoWriter
from vla_rl.stages.evaluation.config import VideoConfig
from vla_rl.stages.evaluation.metrics import evaluation_seed, summarize_episodes


@dataclass(frozen=True, kw_only=True)
class EvalSettings:
    """What one evaluation runs: the knobs of the ``eval`` section it reads (their defaults live there,
    :class:`~vla_rl.stages.evaluation.config.EvalConfig`), and the run's ``seed``."""

    episodes_per_task: int
    seed: int
    protocol: str  # "libero": episode k starts from the env's init state k (eval.protocol)
    video: VideoConfig
    split: str  # dev or test: which seeds (metrics.evaluation_seed)


@dataclass
class TaskOutcome:
    """Episodes of one task (dicts: index, seed, success, return, length, instruction, video) and videos."""

    task: str
    episodes: list[dict[str, Any]]
    wall_time_s: float
    grid_video: str | None = None

    def summary(self) -> dict[str, Any]:
        return summarize_episodes(self.episodes, self.wall_time_s)


@dataclass
class EvalOutcome:
    tasks: dict[str, TaskOutcome]
    wall_time_s: float
    control_hz: float
    cameras: tuple[str, ...]

    def all_episodes(self) -> list[dict[str, Any]]:
        return [episode for outcome in self.tasks.values() for episode in outcome.episodes]


def run_evaluation(
    envs: VecEnv,
    action_source: Any,
    tasks: Sequence[str],
    settings: EvalSettings,
    output_dir: str | Path,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
) -> EvalOutcome:
    """Evaluate ``action_source`` on ``tasks`` with ``envs`` (see the module docstring).

    Video paths in the outcome are relative to ``output_dir``.
    """
    if settings.episodes_per_task < 1:
        raise ValueError(f"eval.episodes_per_task must be >= 1, got {settings.episodes_per_task}")
    output_dir = Path(output_dir)
    spec = envs.env_spec()
    if settings.protocol == "libero":
        check_init_state_protocol(spec, settings.episodes_per_task)
    cameras = tuple(settings.video.cameras) or tuple(spec.camera_names[:1])
    action_source.prepare(envs)
    writer = VideoWriter()
    started = time.perf_counter()
    outcomes: dict[str, TaskOutcome] = {}
    try:
        for task in tasks:
            outcomes[task] = _evaluate_task(
                envs, action_source, task, settings, output_dir, writer, spec, cameras, on_episode
            )
        writer.wait()
    finally:
        writer.close()
        envs.env_method("disable_video")
    return EvalOutcome(outcomes, time.perf_counter() - started, float(spec.control_hz), cameras)


def check_init_state_protocol(spec: Any, episodes_per_task: int) -> None:
    """``eval.protocol=libero`` needs an env with numbered init states, at least one per episode.

    Raises:
        ValueError: the env declares no ``num_init_states`` or fewer than ``episodes_per_task``.
    """
    available = (getattr(spec, "extra", None) or {}).get("num_init_states")
    if available is None:
        raise ValueError(
            f"eval.protocol=libero starts episode k from the env's init state k, but env {spec.name!r} declares no "
            "numbered init states (env_spec.extra['num_init_states']); use eval.protocol=seeded"
        )
    if episodes_per_task > int(available):
        raise ValueError(
            f"eval.episodes_per_task={episodes_per_task} but env {spec.name!r} task {spec.task!r} has "
            f"{available} init states; set eval.episodes_per_task <= {available}"
        )


def _video_slots(first: int, count: int, settings: VideoConfig, cameras: Sequence[str]) -> tuple[list[int], list[int]]:
    """(slots with an episode video, slots in the grid) of the round starting at episode ``first``."""
    if not cameras:
        return [], []
    episode_slots = [slot for slot in range(count) if first + slot < settings.episodes_per_task]
    grid_slots = list(range(min(settings.grid_envs, count))) if first == 0 and settings.grid_envs > 1 else []
    return episode_slots, grid_slots


def _evaluate_task(
    envs: VecEnv, action_source: Any, task: str, settings: EvalSettings, output_dir: Path,
    writer: VideoWriter, spec: Any, cameras: Sequence[str], on_episode: Callable | None,
) -> TaskOutcome:  # fmt: skip
    num_envs = envs.num_envs
    total = settings.episodes_per_task
    # Guard against an env that never ends (max_episode_steps is the protocol's truncation).
    max_chunks = 4 * int(spec.max_episode_steps) + 10
    episodes: list[dict[str, Any]] = []
    grid_path: str | None = None
    started = time.perf_counter()
    for first in range(0, total, num_envs):
        count = min(num_envs, total - first)
        seeds = [evaluation_seed(settings.seed, task, first + slot, settings.split) for slot in range(num_envs)]
        episode_slots, grid_slots = _video_slots(first, count, settings.video, cameras)
        recorded = sorted(set(episode_slots) | set(grid_slots))
        if recorded:
            envs.env_method("enable_video", cameras=list(cameras), size=tuple(settings.video.size), indices=recorded)
        else:
            envs.env_method("disable_video")
        init_states = None
        if settings.protocol == "libero":  # slot j runs init state first + j; idle slots repeat the first
            init_states = [first + slot if slot < count else first for slot in range(num_envs)]
        observation = envs.reset(seeds=seeds, init_states=init_states, tasks=[task] * num_envs)
        action_source.seed_round(seeds[0])
        if count < num_envs:
            envs.env_method("deactivate_envs", indices=range(count, num_envs))
        running = np.arange(num_envs) < count
        finished: dict[int, dict[str, Any]] = {}
        records: dict[int, list[dict[str, Any]]] = {slot: [] for slot in recorded}
        for chunk_index in range(max_chunks + 1):
            if recorded:
                for slot, items in envs.env_method("pop_video_records").items():
                    records[slot].extend(items)
            if not running.any():
                break
            if chunk_index == max_chunks:
                raise RuntimeError(
                    f"task {task!r}: episodes did not end within {max_chunks} action chunks although the env "
                    f"says max_episode_steps={spec.max_episode_steps}; the env does not truncate its episodes"
                )
            result = envs.step(action_source.next_chunks(envs, observation))
            for episode in result.finished_episodes:
                finished[episode["env_index"]] = episode
            running &= ~(result.terminated | result.truncated)
            observation = result.observation
        for slot in range(count):
            index = first + slot
            episode = finished.get(slot) or {"return": 0.0, "length": 0, "success": False, "instruction": "",
                                             "error": "env worker failed; episode counted as a failure"}  # fmt: skip
            video = None
            if slot in episode_slots and records.get(slot):
                video = f"videos/{task}/episode_{index:04d}.mp4"
                writer.write_episode(output_dir / video, records[slot], spec.control_hz)
            entry = {
                "index": index, "seed": seeds[slot], "success": bool(episode["success"]),
                **({"init_state": index} if init_states is not None else {}),
                "return": float(episode["return"]), "length": int(episode["length"]),
                "instruction": str(episode.get("instruction", "")), "video": video,
            }  # fmt: skip
            if "error" in episode:
                entry["error"] = episode["error"]
            episodes.append(entry)
            if on_episode is not None:
                on_episode({"task": task, **entry})
        grid = [records[slot] for slot in grid_slots if records.get(slot)]
        if grid:
            grid_path = f"videos/{task}/grid.mp4"
            writer.write_grid(output_dir / grid_path, grid, spec.control_hz)
    return TaskOutcome(task, episodes, time.perf_counter() - started, grid_path)

