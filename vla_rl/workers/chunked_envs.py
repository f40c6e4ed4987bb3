"""Envs of one pipeline stage, stepped an action chunk at a time.

The MDP step of vla-rl is one action chunk ``(H, A)``: the env executes the chunk's
actions in order, sums the rewards, and stops early where the episode ends (the rest of
the chunk is dropped). Two reset modes:

- ``auto_reset=True`` (PPO, fixed-length rollouts): an env whose episode ended is reset
  at the chunk boundary; its last observation is kept in ``final_observation`` so that
  a truncated episode can bootstrap from its value.
- ``auto_reset=False`` (GRPO, one episode per env): an ended env stays ended; further
  chunks are ignored for it (``active`` is False) until the next ``reset``.

Episode seeds are deterministic, and depend only on the last seed the caller passed: a reset with a
seed ``s`` starts that env's stream of episode seeds, and the k-th episode after it (an auto-reset, or a
reset without a seed) draws ``derived_seed(s, k)``. Before any seeded reset, env ``i`` of a stage starts
from ``s = base_seed + i * 100_003``. So a rollout whose envs are reset with seeds of its iteration draws
the same episodes whatever ran in these processes before (a resumed run's fresh env workers included).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from contract.import_path import import_object
from contract.vec_env import VecEnv
from vla_rl.runtime.profiling import PhaseTimer
from vla_rl.runtime.seeds import derived_seed

#: Import paths (``module:function``) of the env registry's ``make`` and of the scripted experts' lookup. The
#: workers name them as data and import them where they run; they import no env package themselves.
ENV_FACTORY = "envs.registry:make"
EXPERT_FACTORY = "envs.experts:get_expert"
#: What :meth:`ChunkedEnvs.env_method` and :meth:`ChunkedEnvs.get_attr` reach (what wrappers forward).
ENV_METHODS = ("deactivate_envs", "env_spec", "use_experts", "expert_action_chunks", "enable_video", "disable_video",
               "pop_video_records")  # fmt: skip
ENV_ATTRIBUTES = ("init_states", "tasks")

Observation = dict[str, Any]


class EnvOutputError(RuntimeError):
    """An env returned what no policy can learn from (a non-finite state or reward). The message names the env, its
    task and where in the episode; the framework stops rather than blame the policy for the actions that follow."""


class PolicyOutputError(RuntimeError):
    """The policy sent a non-finite action chunk; the message names the env it was for. Raised before the env sees
    it, so the env's own ``InvalidActionError`` does not look like a simulator crash."""


def check_env_output(env_id: str, task: str, observation: Observation, reward: float | None, where: str) -> None:
    """Raise :class:`EnvOutputError` unless ``observation["state"]`` and ``reward`` (None: after a reset) are finite.

    ``where``: which call returned them, e.g. ``"step 3 of the episode from reset(seed=7)"``.
    """
    state = np.asarray(observation["state"], dtype=np.float64)
    if not np.all(np.isfinite(state)):
        raise EnvOutputError(f"env {env_id!r}, task {task!r} returned a non-finite state {state.tolist()} at {where}: "
                             f"the env produced it, not the policy; check the env (`vla-rl envs check "
                             f"{env_id}/{task}`) and its simulation")  # fmt: skip
    if reward is not None and not math.isfinite(float(reward)):
        raise EnvOutputError(f"env {env_id!r}, task {task!r} returned the reward {reward} at {where}: the env "
                             "produced it, not the policy; rewards must be finite numbers")  # fmt: skip


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


class ChunkedEnvs(VecEnv):
    """``num_envs`` envs in this process, stepped one action chunk at a time (:class:`contract.vec_env.VecEnv`;
    :meth:`step` steps at once, :meth:`step_async` only records the chunks for :meth:`step_wait`)."""

    def __init__(
        self, make_env: Callable[[int], gym.Env], num_envs: int, base_seed: int = 0, auto_reset: bool = True,
        env_id: str | None = None, expert_factory: str = EXPERT_FACTORY, expert_seed_offset: int = 0,
    ):  # fmt: skip
        """``env_id``: the registry name or factory import path the envs come from; scripted experts are found
        through it (:meth:`use_experts`) by ``expert_factory`` (an import path). None: the name in the envs' spec.
        ``expert_seed_offset``: added to the experts' seed (an env worker's first env in its group)."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.env_id = env_id
        self.expert_factory = expert_factory
        self.expert_seed_offset = expert_seed_offset
        self._pending_chunks: np.ndarray | None = None
        self.envs = [make_env(index) for index in range(num_envs)]
        self.base_seed = base_seed
        self.auto_reset = auto_reset
        # each env's stream of episode seeds: the seed it started from and the episodes drawn since
        self.stream_seeds = [base_seed + index * 100_003 for index in range(num_envs)]
        self.episode_counts = np.zeros(num_envs, np.int64)
        self.active = np.zeros(num_envs, bool)
        self.returns = np.zeros(num_envs, np.float64)
        self.lengths = np.zeros(num_envs, np.int64)
        self.init_states: list[Any] = [None] * num_envs
        self.tasks: list[str] = [""] * num_envs
        self.episode_seeds: list[int] = [0] * num_envs  # the seed of each env's current episode (for error messages)
        self.observations: list[Observation] = []
        # Evaluation helpers (off unless enabled): scripted experts acting here, video frames captured here.
        self.reset_serials = np.zeros(num_envs, np.int64)  # counts resets of each env
        self._expert_options: dict[str, Any] | None = None
        self._experts: dict[tuple[int, str], Any] = {}
        self._expert_serials = np.full(num_envs, -1, np.int64)
        self._frame_sources: dict[int, Any] = {}
        self._video_records: dict[int, list[dict[str, Any]]] = {}
        self.timer = PhaseTimer()  # env stepping, chunk-end rendering, auto-resets (the rollout profile)

    @property
    def num_envs(self) -> int:
        return len(self.envs)

    def _env_name(self, index: int) -> str:
        return self.env_id or self.envs[index].unwrapped.env_spec.name

    def _next_seed(self, index: int, seed: int | None = None) -> int:
        """The seed of env ``index``'s next episode: ``seed`` (which starts a new stream), else the next of the
        env's stream (its start for the first episode, then ``derived_seed(start, k)``)."""
        if seed is not None:
            self.stream_seeds[index], self.episode_counts[index] = int(seed), 0
        count = int(self.episode_counts[index])
        self.episode_counts[index] += 1
        start = self.stream_seeds[index]
        return start if count == 0 else derived_seed(start, count)

    def _reset_one(self, index: int, seed: int | None = None, init_state: Any = None, task: str | None = None):
        options: dict[str, Any] = {}
        if init_state is not None:
            options["init_state"] = init_state
        if task is not None:
            options["task"] = task
        seed = self._next_seed(index, seed)
        observation, info = self.envs[index].reset(seed=seed, options=options or None)
        self.init_states[index] = info.get("init_state")
        self.tasks[index] = str(info.get("task", task or ""))
        self.episode_seeds[index] = seed
        check_env_output(self._env_name(index), self.tasks[index], observation, None, f"reset(seed={seed})")
        self.active[index] = True
        self.returns[index] = 0.0
        self.lengths[index] = 0
        self.reset_serials[index] += 1
        if index in self._frame_sources:
            self._capture_frame(index, observation, step=0, reward=0.0, episode_return=0.0, success=False)
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
        finite = np.isfinite(action_chunks.reshape(count, -1)).all(axis=1)
        for index in np.flatnonzero(self.active & ~finite):
            raise PolicyOutputError(f"the policy's action chunk for env {self._env_name(index)!r}, task "
                                    f"{self.tasks[index]!r} holds NaN or inf: {action_chunks[index].tolist()} (the env's "
                                    "states and rewards so far were finite); check the policy and the run's losses")  # fmt: skip
        reward = np.zeros(count, np.float32)
        terminated = np.zeros(count, bool)
        truncated = np.zeros(count, bool)
        success = np.zeros(count, bool)
        executed = np.zeros(count, np.int64)
        active = self.active.copy()
        final: dict[int, Observation] = {}  # where an episode ended, before its auto-reset
        finished: list[dict[str, Any]] = []
        for index in np.flatnonzero(active):
            env = self.envs[index]
            # Images only where the chunk ends (the policy reads no other), unless a video records every step.
            skipping = index not in self._frame_sources and getattr(env.unwrapped, "supports_skipping_images", False)
            if skipping:
                env.unwrapped.skip_images = True
            started = time.perf_counter()
            try:
                for action in action_chunks[index]:
                    observation, step_reward, term, trunc, info = env.step(action)
                    check_env_output(self._env_name(index), self.tasks[index], observation, step_reward,
                                     f"step {self.lengths[index] + executed[index] + 1} of the episode from "
                                     f"reset(seed={self.episode_seeds[index]})")  # fmt: skip
                    self.observations[index] = observation
                    reward[index] += float(step_reward)
                    executed[index] += 1
                    success[index] = bool(info.get("is_success", False))
                    if index in self._frame_sources:
                        self._capture_frame(
                            index, observation, step=int(self.lengths[index] + executed[index]),
                            reward=float(step_reward), episode_return=float(self.returns[index] + reward[index]),
                            success=bool(success[index]),
                        )  # fmt: skip
                    if term or trunc:
                        terminated[index], truncated[index] = bool(term), bool(trunc and not term)
                        break
            finally:
                if skipping:
                    env.unwrapped.skip_images = False
                self.timer.add("env_step", time.perf_counter() - started)
            if skipping:
                with self.timer.phase("render_at_chunk_end"):
                    self.observations[index] = env.unwrapped.observe()
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
                    with self.timer.phase("auto_reset"):
                        self.observations[index] = self._reset_one(index)
        with self.timer.phase("stack_observations"):
            observation = stack_observations(self.observations)
            final_observation = stack_observations([final.get(i, o) for i, o in enumerate(self.observations)])
        return ChunkResult(
            observation=observation,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            success=success,
            steps_executed=executed,
            active=active,
            final_observation=final_observation,
            finished_episodes=finished,
        )

    # ------------------------------------------------------------------ the vectorised-env interface
    def step_async(self, action_chunks: np.ndarray) -> None:
        """Start stepping with ``action_chunks`` ``(N, H, A)``; :meth:`step_wait` finishes (here: steps)."""
        self._pending_chunks = action_chunks

    def step_wait(self) -> ChunkResult:
        if self._pending_chunks is None:
            raise RuntimeError("step_wait() without step_async()")
        chunks, self._pending_chunks = self._pending_chunks, None
        return self.step(chunks)

    def env_method(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> Any:
        """Call method ``name`` of these envs (one of :data:`ENV_METHODS`), with ``indices`` if given.

        Wrappers (an env worker, a worker group, the evaluation's view of a group) forward this one call
        instead of re-spelling every method. A result covers the envs in order (an array or list over envs,
        or a dict keyed by env index), so a group concatenates its workers' results.
        """
        if name not in ENV_METHODS:
            raise AttributeError(f"env method {name!r}; allowed: {', '.join(ENV_METHODS)}")
        if indices is not None:
            kwargs["indices"] = [int(i) for i in indices]
        return getattr(self, name)(*args, **kwargs)

    def get_attr(self, name: str) -> Any:
        """Attribute ``name`` (one of :data:`ENV_ATTRIBUTES`), e.g. ``init_states``: a list over envs."""
        if name not in ENV_ATTRIBUTES:
            raise AttributeError(f"env attribute {name!r}; allowed: {', '.join(ENV_ATTRIBUTES)}")
        return list(getattr(self, name))

    # ------------------------------------------------------------------ evaluation helpers
    def deactivate_envs(self, indices: Sequence[int]) -> None:
        """End the episodes of envs ``indices`` without reset: further chunks are ignored for them."""
        self.active[np.asarray(list(indices), dtype=np.int64)] = False

    def env_spec(self) -> Any:
        """The :class:`envs.base.EnvSpec` of env 0."""
        return self.envs[0].unwrapped.env_spec

    def use_experts(self, noise_std: float = 0.0, seed: int = 0) -> None:
        """Let :meth:`expert_action_chunks` drive the envs with their scripted experts (``envs.experts``)."""
        self._expert_options = {"noise_std": float(noise_std), "seed": int(seed) + self.expert_seed_offset}
        self._experts = {}
        self._expert_serials[:] = -1

    def expert_action_chunks(self) -> np.ndarray:
        """Each active env's expert action for its current observation, as chunks ``(N, 1, A)``.

        Inactive envs get zeros (they are ignored by :meth:`step`).
        """
        if self._expert_options is None:
            raise RuntimeError("call use_experts() before expert_action_chunks()")
        get_expert = import_object(self.expert_factory, "expert factory")
        action_dim = self.envs[0].action_space.shape[0]
        chunks = np.zeros((self.num_envs, 1, action_dim), np.float32)
        for index in np.flatnonzero(self.active):
            env = self.envs[index]
            key = (int(index), self.tasks[index])
            if key not in self._experts:
                env_name = self.env_id or env.unwrapped.env_spec.name
                seed = self._expert_options["seed"] + int(index)
                self._experts[key] = get_expert(env_name, self.tasks[index], env, **{**self._expert_options, "seed": seed})
                self._expert_serials[index] = -1
            expert = self._experts[key]
            if self._expert_serials[index] != self.reset_serials[index]:
                expert.reset()  # a new episode began since the expert last acted
                self._expert_serials[index] = self.reset_serials[index]
            action = np.asarray(expert.act(self.observations[index]), dtype=np.float32)
            if action.shape != (action_dim,):
                raise ValueError(f"the scripted expert {type(expert).__module__}.{type(expert).__qualname__} of env "
                                 f"{self.env_id or env.unwrapped.env_spec.name!r}, task {self.tasks[index]!r} returned "
                                 f"an action of shape {action.shape} for the action space of shape ({action_dim},); "
                                 "`vla-rl envs check` runs the expert")  # fmt: skip
            chunks[index, 0] = action
        return chunks

    def enable_video(self, indices: Sequence[int], cameras: Sequence[str], size: tuple[int, int]) -> None:
        """Capture a video frame of envs ``indices`` at every reset and env step (see :meth:`pop_video_records`).

        Frames are ``uint8 (size[0], size[1] * len(cameras), 3)`` (:mod:`vla_rl.logging.frames`).
        """
        from vla_rl.logging.frames import make_frame_source

        self.disable_video()
        for index in indices:
            self._frame_sources[int(index)] = make_frame_source(self.envs[int(index)], cameras, tuple(size))
            self._video_records[int(index)] = []

    def disable_video(self) -> None:
        for source in self._frame_sources.values():
            source.close()
        self._frame_sources = {}
        self._video_records = {}

    def pop_video_records(self) -> dict[int, list[dict[str, Any]]]:
        """Frames captured since the last call: env index -> records with keys frame, step, reward,
        return, success, instruction."""
        records = {index: items for index, items in self._video_records.items() if items}
        self._video_records = {index: [] for index in self._frame_sources}
        return records

    def _capture_frame(
        self, index: int, observation: Observation, step: int, reward: float, episode_return: float, success: bool
    ) -> None:
        self._video_records[index].append(
            {
                "frame": self._frame_sources[index].frame(observation),
                "step": step,
                "reward": reward,
                "return": episode_return,
                "success": success,
                "instruction": observation["instruction"],
            }
        )

    def close(self) -> None:
        self.disable_video()
        for env in self.envs:
            env.close()
