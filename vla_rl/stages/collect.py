"""`vla-rl collect`: scripted-expert demonstrations written to disk.

For each task, a scripted expert (``envs.experts``) runs seeded episodes; each finished
episode is stored at once (:class:`vla_rl.stages.sft.demos.EpisodeStore`), so an interrupted
collection loses nothing and a rerun continues where it stopped. At the end, the episodes of the
requested tasks (``episodes_per_task`` each) are merged into ``demos.hdf5`` with ``stats.json`` beside it
(:mod:`vla_rl.stages.sft.demos`); episodes stored for other tasks stay stored but are left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from tqdm import tqdm

from contract.config_reader import check_types, require
from envs.experts import get_expert
from envs.registry import EnvEntry, make, resolve
from vla_rl.config import EnvConfig
from vla_rl.runtime.files import write_json_atomic
from vla_rl.stages.sft.demos import EpisodeStore, write_dataset
from vla_rl.stages.sft.episodes import Episode
from vla_rl.stages.sft.target_frames import collect_target_frames
from vla_rl.workers.chunked_envs import check_env_output

DATASET_FORMATS = ("hdf5", "lerobot")


@dataclass
class CollectConfig:
    """The ``collect`` config section (defaults here only; ``configs/config.yaml`` and experiments override).

    - ``episodes_per_task``: demonstrations per task; collection resumes where an interrupted run stopped.
    - ``output``: folder of ``demos.hdf5`` and ``stats.json``.
    - ``noise_std``: std of the Gaussian noise the scripted experts add to their actions (metres for the
      tabletop suite).
    - ``keep_failed``: keep episodes the expert failed (marked success=false); by default only successes.
    - ``max_attempts_per_episode``: give up on a task after this many failed attempts per requested episode.
    - ``valid_fraction``: fraction of episodes listed under mask/valid (robomimic filter key) for validation.
    - ``seed``: seeds the episodes and the file's split. It is not the run's ``seed``: the runs of an
      experiment share its data folder, so its demonstrations must not depend on which seed collected first.
      SFT draws its own train/valid split from the run's seed (``load_demonstrations(split_seed=...)``).
    - ``format``: ``hdf5`` (``demos.hdf5`` + ``stats.json``) or ``lerobot`` (LeRobot's v3 layout in
      ``<output>/lerobot/``, :mod:`vla_rl.stages.sft.lerobot`; ``sft.dataset`` reads either).
    - ``video_codec``: the lerobot format's video codec: ``h264``, ``av1`` (both lossy, yuv420p) or ``lossless``.
    - ``target_frames_per_task``: also record this many seeded resets per task with the position of the task's
      target (``target_frames.hdf5``, :mod:`vla_rl.stages.sft.target_frames`), for SFT's target loss
      (``sft.target_loss_weight``); 0: none. The env's factory needs a ``target`` reader.
    """

    episodes_per_task: int = 10
    output: str = "data/${path_name:${env.id}}"
    noise_std: float = 0.0
    keep_failed: bool = False
    max_attempts_per_episode: int = 5
    valid_fraction: float = 0.1
    seed: int = 0
    target_frames_per_task: int = 0
    format: str = "hdf5"
    video_codec: str = "h264"

    def __post_init__(self) -> None:
        from vla_rl.stages.sft.lerobot import VIDEO_CODECS

        check_types(self)
        require(self, "format", choices=DATASET_FORMATS)
        require(self, "video_codec", choices=VIDEO_CODECS)
        require(self, "episodes_per_task", low=1)
        require(self, "noise_std", low=0)
        require(self, "max_attempts_per_episode", low=1)
        require(self, "valid_fraction", low=0, high=1, high_open=True)
        require(self, "target_frames_per_task", low=0)


@dataclass
class CollectionResult:
    dataset_path: Path
    stats_path: Path
    episodes_by_task: dict[str, int]
    attempts_by_task: dict[str, int]
    target_frames_path: Path | None = None


def episode_seed(base_seed: int, task: str, attempt: int) -> int:
    """A seed per (run seed, task, attempt) that does not depend on the order of tasks."""
    digest = hashlib.sha256(f"{base_seed}/{task}".encode()).digest()
    return (int.from_bytes(digest[:4], "little") + attempt) % (2**31 - 1)


def run_expert_episode(env: Any, expert: Any, seed: int, env_id: str | None = None) -> Episode:
    """One episode of ``expert`` in ``env`` from ``reset(seed=seed)``, recorded step by step.

    Raises:
        EnvOutputError: the env returned a non-finite state or reward (named by ``env_id``, default its spec's name).
        ValueError: the expert returned a non-finite action (named).
    """
    env_id = env_id or env.unwrapped.env_spec.name
    observation, info = env.reset(seed=seed)
    task = str(info.get("task", ""))
    check_env_output(env_id, task, observation, None, f"reset(seed={seed})")
    expert.reset(seed=seed)
    images: dict[str, list[np.ndarray]] = {camera: [] for camera in observation["images"]}
    states, actions, rewards, successes = [], [], [], []
    done = False
    success = False
    while not done:
        action = np.asarray(expert.act(observation), dtype=np.float32)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"the scripted expert {type(expert).__module__}.{type(expert).__qualname__} of env "
                             f"{env_id!r}, task {task!r} returned the action {action.tolist()} at step {len(actions) + 1} "
                             f"of the episode from reset(seed={seed})")  # fmt: skip
        for camera, frame in observation["images"].items():
            images[camera].append(frame)
        states.append(observation["state"])
        actions.append(action)
        observation, reward, terminated, truncated, step_info = env.step(action)
        check_env_output(env_id, task, observation, reward, f"step {len(actions)} of the episode from reset(seed={seed})")
        rewards.append(reward)
        success = success or bool(step_info["is_success"])
        successes.append(bool(step_info["is_success"]))
        done = terminated or truncated
    return Episode(
        task=info.get("task", ""),
        instruction=observation["instruction"],
        seed=seed,
        success=success,
        images={camera: np.stack(frames) for camera, frames in images.items()},
        states=np.stack(states).astype(np.float32),
        actions=np.stack(actions),
        rewards=np.asarray(rewards, np.float32),
        successes=np.asarray(successes),
        init_state=info.get("init_state"),
    )


SETTINGS_FILE = "collection.json"


def check_collection_settings(output: Path, env_id: str, env_kwargs: dict[str, Any], noise_std: float) -> None:
    """Refuse to add episodes to ``output`` when it holds episodes of another env or env settings.

    Collection resumes from the episodes already in ``output``; without this check a folder collected
    with, say, random layouts would be reused silently for fixed scenes. The settings are recorded in
    ``output/collection.json`` (written to a temporary name, then renamed).
    """
    current = json.loads(json.dumps({"env_id": env_id, "env_kwargs": env_kwargs, "noise_std": float(noise_std)}))
    record = output / SETTINGS_FILE
    recorded = record.is_file()
    previous = json.loads(record.read_text()) if recorded else _settings_of_older_collection(output, current)
    if previous is not None and previous != current:
        changed = sorted(key for key in set(previous) | set(current) if previous.get(key) != current.get(key))
        raise ValueError(
            f"collect.output={output} holds demonstrations collected with other settings ({', '.join(changed)}: "
            f"{ {k: previous.get(k) for k in changed} } there, { {k: current.get(k) for k in changed} } now); "
            "set collect.output to another folder, or delete this one to collect anew"
        )
    if recorded:
        return
    write_json_atomic(record, current, sort_keys=True)


def _settings_of_older_collection(output: Path, current: dict[str, Any]) -> dict[str, Any] | None:
    """The env settings of a ``demos.hdf5`` written before ``collection.json`` existed (None: no such file)."""
    dataset = output / "demos.hdf5"
    if not dataset.is_file():
        return None
    with h5py.File(dataset, "r") as file:
        attrs = file["data"].attrs
        return {**current, "env_id": str(attrs.get("env_id")), "env_kwargs": json.loads(attrs.get("env_kwargs", "{}"))}


@dataclass(frozen=True)
class CollectPlan:
    """What the collect stage reads of the config (:meth:`vla_rl.stages.run_plan.RunPlan.collect_plan`): the ``env`` and ``collect`` sections."""

    env: EnvConfig
    collect: CollectConfig


def run(plan: CollectPlan, run_dir: Path) -> CollectionResult:
    """The collection ``plan`` asks for into ``run_dir`` (``vla-rl collect`` and the experiment's collect stage
    pass ``collect.output``): :func:`collect_demonstrations` of its env's tasks."""
    return collect_demonstrations(plan.env.id, list(plan.env.tasks), plan.env.kwargs, run_dir, plan.collect)


def collect_demonstrations(
    env_id: str,
    tasks: Sequence[str],
    env_kwargs: dict[str, Any],
    output: str | Path,
    config: CollectConfig,
    show_progress: bool = True,
) -> CollectionResult:
    """Collect ``config.episodes_per_task`` expert episodes for each task into ``output`` (``config.output`` is
    not read), and with ``config.target_frames_per_task`` > 0 that many target frames per task
    (:func:`collect_target_frames`).

    Raises:
        RuntimeError: a task's expert failed too often (``config.max_attempts_per_episode`` per episode).
    """
    output = Path(output)
    per_task = config.episodes_per_task
    check_collection_settings(output, env_id, env_kwargs, config.noise_std)
    store = EpisodeStore(output)
    entry, _ = resolve(env_id)
    stored = store.count_by_task()
    attempts_by_task: dict[str, int] = {}
    total_missing = sum(max(0, per_task - stored.get(task, 0)) for task in tasks)
    progress = tqdm(total=total_missing, desc="collect", unit="episode", disable=not show_progress)
    try:
        for task in tasks:
            needed = per_task - stored.get(task, 0)
            if needed <= 0:
                continue
            attempts_by_task[task] = _collect_task(
                entry, task, env_kwargs, store, needed, config.noise_std, config.keep_failed,
                config.max_attempts_per_episode, config.seed, progress=progress,
            )  # fmt: skip
    finally:
        progress.close()
        kept = dataset_episodes(store, tasks, per_task)
        if kept and config.format == "lerobot":
            dataset_path = write_lerobot_collection(
                output, kept, env_id, env_kwargs, config.valid_fraction, config.seed, config.video_codec
            )
            stats_path = dataset_path / "meta" / "stats.json"
        elif kept:
            dataset_path, stats_path = write_dataset(
                output, kept, env_id, env_kwargs, valid_fraction=config.valid_fraction, seed=config.seed
            )
    counts: dict[str, int] = {}
    for episode in kept:
        counts[episode.task] = counts.get(episode.task, 0) + 1
    frames = None
    if config.target_frames_per_task > 0:
        frames = collect_target_frames(
            env_id, tasks, env_kwargs, output, config.target_frames_per_task, config.seed, show_progress
        )
    return CollectionResult(dataset_path, stats_path, counts, attempts_by_task, frames)


def write_lerobot_collection(output: Path, episodes: list[Episode], env_id: str, env_kwargs: dict[str, Any],
                             valid_fraction: float, seed: int, video_codec: str) -> Path:  # fmt: skip
    """The episodes as a LeRobot v3 dataset in ``<output>/lerobot/``, at the env's control rate."""
    from vla_rl.stages.sft.lerobot import LEROBOT_FOLDER, write_lerobot_dataset

    env = make(f"{env_id}/{episodes[0].task}", **env_kwargs)
    try:
        spec = env.unwrapped.env_spec
    finally:
        env.close()
    return write_lerobot_dataset(output / LEROBOT_FOLDER, episodes, env_id, env_kwargs, spec.control_hz,
                                 spec.action_names, spec.name, valid_fraction, seed, video_codec)  # fmt: skip


def dataset_episodes(store: EpisodeStore, tasks: Sequence[str], episodes_per_task: int) -> list[Episode]:
    """The episodes this collection's ``demos.hdf5`` and ``stats.json`` are made of: the first
    ``episodes_per_task`` stored for each of ``tasks``, task by task in the order of ``tasks`` (the order a
    collection from scratch stores them in, so the train/valid split does not depend on the folder's history).

    The folder may hold more: other tasks, or more episodes per task, collected into it by an earlier run
    with other ``env.tasks`` or ``collect.episodes_per_task`` (experiments name their data folder, not their
    task list). Those stay stored for reuse, but neither SFT nor the action statistics see them.
    """
    by_task: dict[str, list[Episode]] = {task: [] for task in tasks}
    for episode in store.episodes():
        chosen = by_task.get(episode.task)
        if chosen is not None and len(chosen) < episodes_per_task:
            chosen.append(episode)
    return [episode for task in tasks for episode in by_task[task]]


def _collect_task(
    entry: EnvEntry,
    task: str,
    env_kwargs: dict[str, Any],
    store: EpisodeStore,
    needed: int,
    noise_std: float,
    keep_failed: bool,
    max_attempts_per_episode: int,
    seed: int,
    progress: tqdm,
) -> int:
    env_name = entry.name
    env = make(f"{env_name}/{task}", **env_kwargs)
    try:
        expert = get_expert(env_name, task, env, factory=entry.load_factory(), noise_std=noise_std, seed=seed)
        done_seeds = store.seeds_of_task(task)
        collected = attempts = attempt = 0
        while collected < needed:
            if attempts >= needed * max_attempts_per_episode:
                raise RuntimeError(
                    f"the expert for {env_name}/{task} succeeded in only {collected} of {attempts} episodes; "
                    f"lower collect.noise_std (now {noise_std}) or raise collect.max_attempts_per_episode"
                )
            episode_seed_value = episode_seed(seed, task, attempt)
            attempt += 1
            if episode_seed_value in done_seeds:  # stored by an earlier, interrupted run
                continue
            episode = run_expert_episode(env, expert, episode_seed_value, env_name)
            episode.task = task
            attempts += 1
            if episode.success or keep_failed:
                store.add(episode)
                collected += 1
                progress.update(1)
        return attempts
    finally:
        env.close()
