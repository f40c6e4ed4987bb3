"""Rollout dumps: the per-episode data of a rollout batch, every k iterations, for later analysis.

One file per dumped iteration: ``run_dir/rollouts/iter_XXXXXX.npz`` (numpy ``.npz``, no pickles),
with ``E`` episodes and ``T`` steps in all (episodes concatenated in order)::

    actions          float32 (T, A)   env actions, robot units
    rewards          float32 (T,)
    episode_offsets  int64   (E + 1,) episode e is rows episode_offsets[e]:episode_offsets[e+1]
    success          bool    (E,)
    returns          float32 (E,)     sum of the episode's rewards
    lengths          int64   (E,)
    instruction      str     (E,)
    task             str     (E,)
    iteration        int64   ()

``read_rollout_dump`` gives the episodes back as dicts. Written to a temporary name, then renamed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROLLOUT_FOLDER = "rollouts"


def rollout_dump_path(run_dir: str | Path, iteration: int) -> Path:
    return Path(run_dir) / ROLLOUT_FOLDER / f"iter_{iteration:06d}.npz"


def write_rollout_dump(run_dir: str | Path, iteration: int, episodes: Sequence[dict[str, Any]]) -> Path:
    """Write ``episodes`` (dicts: ``actions (T_e, A)``, ``rewards (T_e,)``, ``success``, ``instruction``,
    optional ``task``) of ``iteration``; returns the file.

    Raises:
        ValueError: no episodes, or an episode whose actions and rewards disagree in length.
    """
    if not episodes:
        raise ValueError(f"rollout dump of iteration {iteration}: no episodes to write")
    actions, rewards, lengths = [], [], []
    for number, episode in enumerate(episodes):
        episode_actions = np.asarray(episode["actions"], np.float32)
        episode_rewards = np.asarray(episode["rewards"], np.float32).reshape(-1)
        if episode_actions.ndim != 2 or len(episode_actions) != len(episode_rewards):
            raise ValueError(
                f"rollout dump of iteration {iteration}, episode {number}: actions must be (T, A) with one "
                f"reward per step; got actions {episode_actions.shape} and rewards {episode_rewards.shape}"
            )
        actions.append(episode_actions)
        rewards.append(episode_rewards)
        lengths.append(len(episode_rewards))
    path = rollout_dump_path(run_dir, iteration)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.stem}.tmp-{os.getpid()}.npz")
    np.savez_compressed(
        staging,
        actions=np.concatenate(actions),
        rewards=np.concatenate(rewards),
        episode_offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        success=np.array([bool(e["success"]) for e in episodes]),
        returns=np.array([r.sum() for r in rewards], np.float32),
        lengths=np.array(lengths, np.int64),
        instruction=np.array([str(e["instruction"]) for e in episodes]),
        task=np.array([str(e.get("task", "")) for e in episodes]),
        iteration=np.int64(iteration),
    )
    os.replace(staging, path)
    return path


def read_rollout_dump(path: str | Path) -> list[dict[str, Any]]:
    """The episodes of a dump, as dicts with the keys of :func:`write_rollout_dump` plus return, length."""
    with np.load(path, allow_pickle=False) as data:
        offsets = data["episode_offsets"]
        return [
            {
                "actions": data["actions"][offsets[e] : offsets[e + 1]],
                "rewards": data["rewards"][offsets[e] : offsets[e + 1]],
                "success": bool(data["success"][e]),
                "return": float(data["returns"][e]),
                "length": int(data["lengths"][e]),
                "instruction": str(data["instruction"][e]),
                "task": str(data["task"][e]),
                "iteration": int(data["iteration"]),
            }
            for e in range(len(offsets) - 1)
        ]


class RolloutDumper:
    """Dumps every ``every`` iterations (0 turns dumping off)."""

    def __init__(self, run_dir: str | Path, every: int):
        if every < 0:
            raise ValueError(f"rollout dump interval must be >= 0 (0: off), got {every}")
        self.run_dir, self.every = Path(run_dir), every

    def due(self, iteration: int) -> bool:
        return self.every > 0 and iteration % self.every == 0

    def maybe_dump(self, iteration: int, episodes: Sequence[dict[str, Any]]) -> Path | None:
        return write_rollout_dump(self.run_dir, iteration, episodes) if self.due(iteration) else None
