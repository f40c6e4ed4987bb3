"""Envs of one pipeline stage, stepped an action chunk at a time.

The MDP step of vla-rl is one action chunk ``(H, A)``: the env executes the chunk's
actions in order, sums the rewards, and stops early where the episode ends (the rest of
the chunk is dropped). Two reset modes:

- ``auto_reset=True`` (PPO, fixed-length rollouts): an env whose episode ended is reset
  at the chunk boundary; its last observation is kept in ``final_observation`` so that
  a truncated episode can bootstrap from its value.
- ``auto_reset=False`` (GRPO, one episode per env): an ended env stays ended; further
  chunks are ignored for it (``active`` is False) until the next ``reset``.

Episode seeds are deterministic: env ``i`` of a stage draws its k-th episode with
``seed = base_seed + i * 100_003 + k``, unless the caller passes seeds or initial states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

Observation = dict[str, Any]


def stack_observations(observations: Sequence[Observation]) -> Observation:
    """List of protocol observations -> one batch.

    Returns ``{"images": {camera: uint8 (N, H, W, 3)}, "state": float32 (N, S), "instruction": list[str]}``.
    """
    cameras = observations[0]["images"].keys()
    return {
        "images": {camera: np.stack([o["images"][camera] for o in observations]) for camera in cameras},
        "state": np.stack([o["state"] for o in observations]).astype(np.float32),
        "instruction": [o["instruction"] for o in observations],
    }


@dataclass
class ChunkResult:
    """What one chunk step of N envs returns (arrays have leading dim N)."""

    observation: Observation  # after the chunk; after the auto-reset for envs that ended
    reward: np.ndarray  # float32 (N,) rewards summed over the executed steps
    terminated: np.ndarray  # bool (N,)
    truncated: np.ndarray  # bool (N,)
    success: np.ndarray  # bool (N,) info["is_success"] at the chunk's last executed step
    steps_executed: np.ndarray  # int64 (N,) how many of the H actions ran (0 for inactive envs)
    active: np.ndarray  # bool (N,) the env was in an episode when the chunk began
    final_observation: Observation | None  # the observation where an episode ended, else that of `observation`
    finished_episodes: list[dict[str, Any]] = field(default_factory=list)  # return, length, success, task


class ChunkedEnvs:
    """``num_envs`` envs in this process, stepped one action chunk at a time."""

    def __init__(self, make_env: Callable[[int], gym.Env], num_envs: int, base_seed: int = 0, auto_reset: bool = True):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.envs = [make_env(index) for index in range(num_envs)]
        self.base_seed = base_seed
        self.auto_reset = auto_reset
        self.episode_counts = np.zeros(num_envs, np.int64)
        self.active = np.zeros(num_envs, bool)
        self.returns = np.zeros(num_envs, np.float64)
        self.lengths = np.zeros(num_envs, np.int64)
        self.init_states: list[Any] = [None] * num_envs
        self.tasks: list[str] = [""] * num_envs
        self.observations: list[Observation] = []

    @property
    def num_envs(self) -> int:
        return len(self.envs)

    def _next_seed(self, index: int) -> int:
        seed = int(self.base_seed + index * 100_003 + int(self.episode_counts[index]))
        self.episode_counts[index] += 1
        return seed

    def _reset_one(self, index: int, seed: int | None = None, init_state: Any = None, task: str | None = None):
        options: dict[str, Any] = {}
        if init_state is not None:
            options["init_state"] = init_state
        if task is not None:
            options["task"] = task
        seed = self._next_seed(index) if seed is None else int(seed)
        observation, info = self.envs[index].reset(seed=seed, options=options or None)
        self.init_states[index] = info.get("init_state")
        self.tasks[index] = str(info.get("task", task or ""))
        self.active[index] = True
        self.returns[index] = 0.0
        self.lengths[index] = 0
        return observation

    def reset(
        self,
        seeds: Sequence[int | None] | None = None,
        init_states: Sequence[Any] | None = None,
        tasks: Sequence[str | None] | None = None,
    ) -> Observation:
        """Reset every env (optionally with per-env seeds, initial states or tasks); returns the batch."""
        count = self.num_envs
        seeds = seeds if seeds is not None else [None] * count
        init_states = init_states if init_states is not None else [None] * count
        tasks = tasks if tasks is not None else [None] * count
        for name, values in (("seeds", seeds), ("init_states", init_states), ("tasks", tasks)):
            if len(values) != count:
                raise ValueError(f"reset got {len(values)} {name} for {count} envs")
        self.observations = [
            self._reset_one(i, seed, state, task)
            for i, (seed, state, task) in enumerate(zip(seeds, init_states, tasks, strict=True))
        ]
        return stack_observations(self.observations)

    def step(self, action_chunks: np.ndarray) -> ChunkResult:
        """Execute ``action_chunks`` ``(N, H, A)``; returns the per-env chunk outcome."""
        action_chunks = np.asarray(action_chunks)
        if action_chunks.ndim != 3 or action_chunks.shape[0] != self.num_envs:
            raise ValueError(f"action chunks must have shape (num_envs={self.num_envs}, H, A), got {action_chunks.shape}")
        count = self.num_envs
        reward = np.zeros(count, np.float32)
        terminated = np.zeros(count, bool)
        truncated = np.zeros(count, bool)
        success = np.zeros(count, bool)
        executed = np.zeros(count, np.int64)
        active = self.active.copy()
        final: list[Observation] = list(self.observations)
        finished: list[dict[str, Any]] = []
        for index in np.flatnonzero(active):
            env = self.envs[index]
            for action in action_chunks[index]:
                observation, step_reward, term, trunc, info = env.step(action)
                self.observations[index] = observation
                reward[index] += float(step_reward)
                executed[index] += 1
                success[index] = bool(info.get("is_success", False))
                if term or trunc:
                    terminated[index], truncated[index] = bool(term), bool(trunc and not term)
                    break
            self.returns[index] += reward[index]
            self.lengths[index] += executed[index]
            if terminated[index] or truncated[index]:
                finished.append(
                    {
                        "env_index": int(index),
                        "return": float(self.returns[index]),
                        "length": int(self.lengths[index]),
                        "success": bool(success[index]),
                        "task": self.tasks[index],
                        "instruction": self.observations[index]["instruction"],
                    }
                )
                final[index] = self.observations[index]
                self.active[index] = False
                if self.auto_reset:
                    self.observations[index] = self._reset_one(index)
        return ChunkResult(
            observation=stack_observations(self.observations),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            success=success,
            steps_executed=executed,
            active=active,
            final_observation=stack_observations(final),
            finished_episodes=finished,
        )

    def close(self) -> None:
        for env in self.envs:
            env.close()
