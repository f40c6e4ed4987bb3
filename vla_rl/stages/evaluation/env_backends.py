"""Where evaluation envs live: in this process, or in Ray env workers.

Both backends are a :class:`contract.vec_env.VecEnv`, the interface the evaluation uses: ``num_envs``,
``env_spec()``, ``reset(seeds, tasks=...)``, ``step(chunks)``, ``env_method(name, *args, indices=...)`` (experts,
video capture, deactivating envs), ``get_attr`` and ``close``.
In-process, that is a ``ChunkedEnvs`` itself; across workers,
:class:`WorkerGroupEvalEnvs` binds one stage of an :class:`~vla_rl.workers.env_group.EnvWorkerGroup`.
Episodes run one per env per round (``auto_reset=False``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from contract.vec_env import VecEnv
from envs.remote.client import worker_factory
from vla_rl.workers.chunked_envs import ENV_FACTORY, ChunkedEnvs, ChunkResult, Observation
from vla_rl.workers.env_worker import env_maker

if TYPE_CHECKING:  # Ray's worker group is imported where envs run over workers
    from vla_rl.workers.env_group import EnvWorkerGroup


class WorkerGroupEvalEnvs(VecEnv):
    """Stage ``stage`` of an env worker group, seen as one batch of envs."""

    def __init__(self, group: EnvWorkerGroup, env_stage: int = 0, owns_group: bool = True):
        self.group = group
        self.env_stage = env_stage
        self.owns_group = owns_group
        self._pending: Any = None

    @property
    def num_envs(self) -> int:
        return self.group.stage_size

    def env_spec(self) -> Any:
        return self.group.env_spec(self.env_stage)

    def reset(self, seeds=None, init_states=None, tasks=None) -> Observation:
        return self.group.reset(self.env_stage, seeds, init_states, tasks)

    def step_async(self, action_chunks: np.ndarray) -> None:
        self._pending = self.group.step_async(self.env_stage, action_chunks)

    def step_wait(self) -> ChunkResult:
        if self._pending is None:
            raise RuntimeError("step_wait() without step_async()")
        pending, self._pending = self._pending, None
        return self.group.step_wait(pending)

    def env_method(self, name: str, *args: Any, indices=None, **kwargs: Any) -> Any:
        return self.group.env_method(self.env_stage, name, *args, indices=indices, **kwargs)

    def get_attr(self, name: str) -> list[Any]:
        return self.group.get_attr(self.env_stage, name)

    def close(self) -> None:
        if self.owns_group:
            self.group.close()


def make_eval_envs(
    env_id: str,
    env_kwargs: dict[str, Any],
    tasks: list[str],
    num_envs: int,
    num_workers: int = 0,
    seed: int = 0,
    ray_temp_dir: str | None = None,
    remote: Any = None,
) -> VecEnv:
    """``num_envs`` envs for evaluation: in this process (``num_workers=0``) or over Ray workers; with ``remote``
    (:class:`envs.remote.client.RemoteEnvConfig`) they are sessions of that env server.

    With workers, ``num_envs`` is rounded up to a multiple of ``num_workers``.
    """
    if num_envs < 1:
        raise ValueError(f"eval.num_envs must be >= 1, got {num_envs}")
    if num_workers < 0:
        raise ValueError(f"eval.num_workers must be >= 0, got {num_workers}")
    if num_workers == 0:
        make = env_maker(*worker_factory(remote, ENV_FACTORY))

        def make_env(index: int) -> Any:
            return make(f"{env_id}/{tasks[index % len(tasks)]}", **env_kwargs)

        return ChunkedEnvs(make_env, num_envs, base_seed=seed, auto_reset=False, env_id=env_id)
    from vla_rl.runtime.ray_cluster import init_ray
    from vla_rl.workers.env_group import EnvWorkerGroup
    from vla_rl.workers.env_worker import EnvWorkerConfig

    init_ray(temp_dir=ray_temp_dir)
    envs_per_worker = -(-num_envs // num_workers)
    config = EnvWorkerConfig(
        env_id=env_id, env_kwargs=dict(env_kwargs), tasks=tuple(tasks), envs_per_stage=envs_per_worker,
        num_stages=1, base_seed=seed, auto_reset=False,
    )  # fmt: skip
    factory, options = worker_factory(remote, ENV_FACTORY, num_workers)
    config = replace(config, env_factory=factory, env_factory_options=options)
    return WorkerGroupEvalEnvs(EnvWorkerGroup(config, num_workers=num_workers))
