"""Rollout dumps: the finished episodes of an iteration's rollout, every k iterations, for later analysis.

``trainer.dump_rollouts_every=k`` writes one file per k-th iteration: ``<rl run dir>/rollouts/iter_XXXXXX.npz``
(numpy ``.npz``, no pickles; iteration N is the metrics row with ``step`` N). A row is one MDP step of vla-rl,
an action chunk of ``H`` env actions; with ``E`` episodes of ``C`` chunks in all (concatenated in order)::

    actions          float32 (C, H, A)  the chunks the env executed, env actions in robot units
    rewards          float32 (C,)       per chunk: the rewards of its executed env steps, summed
    episode_offsets  int64   (E + 1,)   episode e is rows episode_offsets[e]:episode_offsets[e+1]
    success          bool    (E,)
    returns          float32 (E,)       sum of the episode's rewards
    lengths          int64   (E,)       env steps: the last chunk stops where the episode ends, so the
                                        actions that ran are actions[rows].reshape(-1, A)[:length]
    env              int64   (E,)       the env's row of the rollout batch (-1: unknown)
    from_reset       bool    (E,)       the episode began at the env's reset at the start of the rollout
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
    """Write ``episodes`` of ``iteration``; returns the file.

    An episode is a dict: ``actions (C_e, H, A)``, ``rewards (C_e,)``, ``success``, ``instruction``, and optional
    ``task`` (""), ``length`` (env steps; ``C_e * H``), ``env`` (-1), ``from_reset`` (True).

    An iteration that finished no episode writes a file without episodes.

    Raises:
        ValueError: an episode whose actions, rewards and length disagree.
    """
    actions, rewards, lengths = [], [], []
    for number, episode in enumerate(episodes):
        episode_actions = np.asarray(episode["actions"], np.float32)
        episode_rewards = np.asarray(episode["rewards"], np.float32).reshape(-1)
        if episode_actions.ndim != 3 or len(episode_actions) != len(episode_rewards):
            raise ValueError(
                f"rollout dump of iteration {iteration}, episode {number}: actions must be chunks (C, H, A) with one "
                f"reward per chunk; got actions {episode_actions.shape} and rewards {episode_rewards.shape}"
            )
        chunks, horizon = episode_actions.shape[:2]
        length = int(episode.get("length", chunks * horizon))
        if not (chunks - 1) * horizon < length <= chunks * horizon:
            raise ValueError(
                f"rollout dump of iteration {iteration}, episode {number}: length {length} env steps does not fit "
                f"{chunks} chunks of {horizon} actions (every chunk but the last runs whole)"
            )
        actions.append(episode_actions)
        rewards.append(episode_rewards)
        lengths.append(length)
    path = rollout_dump_path(run_dir, iteration)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.stem}.tmp-{os.getpid()}.npz")
    np.savez_compressed(
        staging,
        actions=np.concatenate(actions) if actions else np.zeros((0, 0, 0), np.float32),
        rewards=np.concatenate(rewards) if rewards else np.zeros(0, np.float32),
        episode_offsets=np.concatenate([[0], np.cumsum([len(r) for r in rewards])]).astype(np.int64),
        success=np.array([bool(e["success"]) for e in episodes]),
        returns=np.array([r.sum() for r in rewards], np.float32),
        lengths=np.array(lengths, np.int64),
        env=np.array([int(e.get("env", -1)) for e in episodes], np.int64),
        from_reset=np.array([bool(e.get("from_reset", True)) for e in episodes]),
        instruction=np.array([str(e["instruction"]) for e in episodes]),
        task=np.array([str(e.get("task", "")) for e in episodes]),
        iteration=np.int64(iteration),
    )
    os.replace(staging, path)
    return path


def read_rollout_dump(path: str | Path) -> list[dict[str, Any]]:
    """The episodes of a dump, as dicts with the keys of :func:`write_rollout_dump` plus ``return``."""
    with np.load(path, allow_pickle=False) as data:
        offsets = data["episode_offsets"]
        return [
            {
                "actions": data["actions"][offsets[e] : offsets[e + 1]],
                "rewards": data["rewards"][offsets[e] : offsets[e + 1]],
                "success": bool(data["success"][e]),
                "return": float(data["returns"][e]),
                "length": int(data["lengths"][e]),
                "env": int(data["env"][e]),
                "from_reset": bool(data["from_reset"][e]),
                "instruction": str(data["instruction"][e]),
                "task": str(data["task"][e]),
                "iteration": int(data["iteration"]),
            }
            for e in range(len(offsets) - 1)
        ]


class RolloutDumper:
    """Dumps every ``every`` iterations (0 turns dumping off); iterations count from 1."""

    def __init__(self, run_dir: str | Path, every: int):
        if every < 0:
            raise ValueError(f"rollout dump interval must be >= 0 (0: off), got {every}")
        self.run_dir, self.every = Path(run_dir), every

    def due(self, iteration: int) -> bool:
        return self.every > 0 and iteration % self.every == 0

    def maybe_dump(self, iteration: int, episodes: Sequence[dict[str, Any]]) -> Path | None:
        return write_rollout_dump(self.run_dir, iteration, episodes) if self.due(iteration) else None
