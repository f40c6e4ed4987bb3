"""The driver's handle on the env workers: fan out, gather in env order, replace the dead.

Env order of a stage: worker 0's envs of that stage, then worker 1's, and so on. The
batch of stage ``s`` therefore has ``num_workers * envs_per_stage`` rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import ray

from vla_rl.workers.chunked_envs import ChunkResult, EnvOutputError, Observation, PolicyOutputError
from vla_rl.workers.env_worker import EnvWorker, EnvWorkerConfig, describe_ray_failure

logger = logging.getLogger(__name__)


def concat_observations(parts: list[Observation]) -> Observation:
    return {
        "images": {camera: np.concatenate([p["images"][camera] for p in parts]) for camera in parts[0]["images"]},
        "state": np.concatenate([p["state"] for p in parts]),
        "instruction": [text for p in parts for text in p["instruction"]],
    }


def concat_results(parts: list[ChunkResult], envs_per_part: int) -> ChunkResult:
    finished = []
    for offset, part in enumerate(parts):
        for episode in part.finished_episodes:
            finished.append({**episode, "env_index": episode["env_index"] + offset * envs_per_part})
    return ChunkResult(
        observation=concat_observations([p.observation for p in parts]),
        reward=np.concatenate([p.reward for p in parts]),
        terminated=np.concatenate([p.terminated for p in parts]),
        truncated=np.concatenate([p.truncated for p in parts]),
        success=np.concatenate([p.success for p in parts]),
        steps_executed=np.concatenate([p.steps_executed for p in parts]),
        active=np.concatenate([p.active for p in parts]),
        final_observation=concat_observations([p.final_observation for p in parts]),
        finished_episodes=finished,
    )


def raise_env_output_error(error: BaseException) -> None:
    """Re-raise the :class:`EnvOutputError` or :class:`PolicyOutputError` a worker raised, as itself: a replacement
    worker would meet it again, so it stops the run (naming the env, or the policy) instead of replacing the worker."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, EnvOutputError | PolicyOutputError):
        raise type(cause)(str(cause)) from None


def _discard(future: Any) -> None:
    """Fetch and drop the result of a call to a killed worker (Ray reports failures no one fetched)."""
    try:
        ray.get(future, timeout=30)
    except Exception:  # noqa: BLE001 - the worker is gone: its failure is expected
        pass


@dataclass
class _PendingStep:
    env_stage: int
    futures: list[Any]
    actions: np.ndarray


@dataclass
class EnvWorkerGroup:
    """``num_workers`` env workers with ``num_stages`` stages of ``envs_per_stage`` envs each."""

    base: EnvWorkerConfig
    num_workers: int
    num_cpus_per_worker: float = 1.0
    resources: dict[str, float] = field(default_factory=dict)  # custom Ray resources per worker (placement)
    restarts: int = 0
    failures: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._remote_class = ray.remote(EnvWorker)
        self.workers = [self._start(index) for index in range(self.num_workers)]
        # The last observation of each stage (for the truncation of a dead worker's episodes).
        self._last_observation: dict[int, Observation] = {}
        # (worker, stage) pairs whose envs were replaced and must report truncation at their next step,
        # with the replacement envs' first observation.
        self._replaced: set[tuple[int, int]] = set()
        self._fresh: dict[tuple[int, int], Observation] = {}

    @property
    def envs_per_stage(self) -> int:
        return self.base.envs_per_stage

    @property
    def num_stages(self) -> int:
        return self.base.num_stages

    @property
    def stage_size(self) -> int:
        return self.num_workers * self.base.envs_per_stage

    def _config_of(self, index: int) -> EnvWorkerConfig:
        offset = index * self.base.envs_per_stage * self.base.num_stages
        return replace(self.base, global_offset=offset)

    def _start(self, index: int):
        return self._remote_class.options(
            num_cpus=self.num_cpus_per_worker, resources=dict(self.resources), max_restarts=0
        ).remote(self._config_of(index))

    def reset(self, env_stage: int, seeds=None, init_states=None, tasks=None) -> Observation:
        """Reset the envs of ``stage``; per-env lists are in stage env order."""
        size = self.envs_per_stage
        futures = [
            worker.reset.remote(
                env_stage,
                None if seeds is None else list(seeds[i * size : (i + 1) * size]),
                None if init_states is None else list(init_states[i * size : (i + 1) * size]),
                None if tasks is None else list(tasks[i * size : (i + 1) * size]),
            )
            for i, worker in enumerate(self.workers)
        ]
        try:
            observation = concat_observations(ray.get(futures))
        except ray.exceptions.RayTaskError as error:
            raise_env_output_error(error)
            raise
        self._last_observation[env_stage] = observation
        for index in range(self.num_workers):
            self._replaced.discard((index, env_stage))
            self._fresh.pop((index, env_stage), None)
        return observation

    def step_async(self, env_stage: int, action_chunks: np.ndarray) -> _PendingStep:
        """Start stepping ``stage`` with ``action_chunks`` ``(stage_size, H, A)``; finish with :meth:`step_wait`."""
        if action_chunks.shape[0] != self.stage_size:
            raise ValueError(f"env stage {env_stage} has {self.stage_size} envs, got {action_chunks.shape[0]} action chunks")
        size = self.envs_per_stage
        futures = [
            None if (i, env_stage) in self._replaced else worker.step.remote(env_stage, action_chunks[i * size : (i + 1) * size])
            for i, worker in enumerate(self.workers)
        ]
        return _PendingStep(env_stage, futures, action_chunks)

    def step_wait(self, pending: _PendingStep) -> ChunkResult:
        parts = []
        for index, future in enumerate(pending.futures):
            # This worker was replaced while another stage stepped: before this step was sent (no future), or
            # after it was queued at the dead worker (the future fails; nothing of it is needed).
            if future is None or (index, pending.env_stage) in self._replaced:
                if future is not None:
                    _discard(future)
                part = self._truncated_part(index, pending.env_stage, self._fresh.pop((index, pending.env_stage)))
            else:
                try:
                    part = ray.get(future)
                except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as error:
                    raise_env_output_error(error)
                    part = self._replace_worker(index, pending.env_stage, error)
            parts.append(part)
        result = concat_results(parts, self.envs_per_stage)
        self._last_observation[pending.env_stage] = result.observation
        return result

    def step(self, env_stage: int, action_chunks: np.ndarray) -> ChunkResult:
        return self.step_wait(self.step_async(env_stage, action_chunks))

    def _slice_observation(self, env_stage: int, index: int) -> Observation:
        size = self.envs_per_stage
        observation = self._last_observation[env_stage]
        return {
            "images": {k: v[index * size : (index + 1) * size] for k, v in observation["images"].items()},
            "state": observation["state"][index * size : (index + 1) * size],
            "instruction": observation["instruction"][index * size : (index + 1) * size],
        }

    def _truncated_part(self, index: int, env_stage: int, fresh: Observation) -> ChunkResult:
        """Every env of (worker, stage) ended by truncation; ``fresh`` is the replacement's observation."""
        self._replaced.discard((index, env_stage))
        size = self.envs_per_stage
        return ChunkResult(
            observation=fresh,
            reward=np.zeros(size, np.float32),
            terminated=np.zeros(size, bool),
            truncated=np.ones(size, bool),
            success=np.zeros(size, bool),
            steps_executed=np.zeros(size, np.int64),
            active=np.ones(size, bool),
            final_observation=self._slice_observation(env_stage, index),
        )

    def _replace_worker(self, index: int, env_stage: int, error: BaseException) -> ChunkResult:
        description = describe_ray_failure(error)
        logger.warning("env worker %d failed; replacing it. Original error:\n%s", index, description)
        self.failures.append(description)
        self.restarts += 1
        try:
            ray.kill(self.workers[index], no_restart=True)
        except Exception:  # noqa: BLE001 - it may already be gone
            pass
        self.workers[index] = self._start(index)
        fresh = ray.get([self.workers[index].reset.remote(s) for s in range(self.num_stages)])
        if not self.base.auto_reset:
            everyone = list(range(self.envs_per_stage))
            ray.get([self.workers[index].env_method.remote(s, "deactivate_envs", indices=everyone)
                     for s in range(self.num_stages)])  # fmt: skip
        for other in range(self.num_stages):
            if other != env_stage:
                self._replaced.add((index, other))
                self._fresh[(index, other)] = fresh[other]
        return self._truncated_part(index, env_stage, fresh[env_stage])

    # ------------------------------------------------------------------ evaluation helpers
    def _split_indices(self, indices) -> list[list[int]]:
        """Stage env indices -> per-worker local indices."""
        size = self.envs_per_stage
        parts: list[list[int]] = [[] for _ in self.workers]
        for index in indices:
            parts[int(index) // size].append(int(index) % size)
        return parts

    def env_spec(self, env_stage: int = 0) -> Any:
        return ray.get(self.workers[0].env_method.remote(env_stage, "env_spec"))

    def env_method(self, env_stage: int, name: str, *args: Any, indices=None, **kwargs: Any) -> Any:
        """:meth:`ChunkedEnvs.env_method` on stage ``stage`` of every worker, merged in env order.

        ``indices`` are stage env indices; each worker gets its own, local ones (possibly none). The workers'
        results are merged as results over envs are: arrays and lists concatenated, dicts keyed by env index
        re-keyed to stage env indices; None when the method returns nothing.
        """
        if indices is None:
            futures = [w.env_method.remote(env_stage, name, *args, **kwargs) for w in self.workers]
        else:
            parts = self._split_indices(indices)
            futures = [w.env_method.remote(env_stage, name, *args, indices=part, **kwargs)
                       for w, part in zip(self.workers, parts, strict=True)]  # fmt: skip
        return self._merge(ray.get(futures))

    def get_attr(self, env_stage: int, name: str) -> list[Any]:
        """:meth:`ChunkedEnvs.get_attr` of stage ``stage`` of every worker, concatenated in env order."""
        return self._merge(ray.get([w.get_attr.remote(env_stage, name) for w in self.workers]))

    def _merge(self, parts: list[Any]) -> Any:
        if all(part is None for part in parts):
            return None
        if isinstance(parts[0], np.ndarray):
            return np.concatenate(parts)
        if isinstance(parts[0], list):
            return [item for part in parts for item in part]
        if isinstance(parts[0], dict):
            size = self.envs_per_stage
            return {offset * size + int(key): value for offset, part in enumerate(parts) for key, value in part.items()}
        raise TypeError(f"cannot merge per-worker results of type {type(parts[0]).__name__}")

    def call_all(self, method: str, *args: Any) -> list[Any]:
        """Call ``method`` on every worker; string arguments may use ``{index}`` (the worker's index)."""
        futures = [
            getattr(worker, method).remote(*(a.format(index=i) if isinstance(a, str) else a for a in args))
            for i, worker in enumerate(self.workers)
        ]
        return ray.get(futures)

    def close(self) -> None:
        for worker in self.workers:
            try:
                ray.get(worker.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - closing a dead worker is not an error
                pass
            ray.kill(worker, no_restart=True)
