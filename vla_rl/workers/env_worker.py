"""Env workers: Ray actors holding persistent envs, split into pipeline stages.

An :class:`EnvWorker` builds its envs once (inside its own process, so no fork happens
after rendering started) and keeps them across iterations. Its envs are split into
``num_stages`` :class:`~vla_rl.workers.chunked_envs.ChunkedEnvs`; while one stage steps,
the rollout worker computes actions for another.

:class:`EnvWorkerGroup` (driver side) owns the actors: it fans calls out, gathers the
results in env order, and replaces a worker that died (an exception in the simulator or a
crashed process): the replacement starts fresh episodes, the unfinished episodes of the
dead worker are reported as truncated, and ``restarts`` counts the replacements.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contract.import_path import import_object
from vla_rl.runtime.profiling import PhaseTimer, SpanTrace
from vla_rl.workers.chunked_envs import ENV_FACTORY, EXPERT_FACTORY, ChunkedEnvs, ChunkResult, Observation

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvWorkerConfig:
    """How to build the envs of one worker.

    ``tasks`` are assigned round-robin over the worker's envs; env ``j`` of the whole group
    (``global_offset + j``) gets ``tasks[(global_offset + j) % len(tasks)]``.
    ``env_factory`` and ``expert_factory`` are import paths (``module:function``) of ``make(name, **kwargs)``
    and of ``get_expert(env, task, env_instance, **options)``: the worker imports no env package itself.
    """

    env_id: str
    env_kwargs: dict[str, Any]
    tasks: tuple[str, ...]
    envs_per_stage: int
    num_stages: int = 1
    base_seed: int = 0
    auto_reset: bool = True
    global_offset: int = 0
    env_factory: str = ENV_FACTORY
    expert_factory: str = EXPERT_FACTORY
    #: Keyword arguments bound to the env factory (a remote env's server settings, see ``envs.remote.client``).
    env_factory_options: dict[str, Any] = field(default_factory=dict)


def limit_software_render_threads() -> None:
    """Give Mesa's llvmpipe (CPU rendering) as many threads as this worker has CPUs, unless the user chose.

    llvmpipe starts one rendering thread per core by default; on a small machine those threads
    compete with the rollout worker's inference and the pipeline stages stop overlapping (a 2-stage
    rollout on 2 cores slows down markedly). Ray sets ``OMP_NUM_THREADS`` to the actor's CPU count. GPU EGL
    ignores the variable; images do not depend on it. Must run before the first GL context exists.
    """
    os.environ.setdefault("LP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))


def env_maker(env_factory: str, options: dict[str, Any] | None = None) -> Any:
    """``make(env_id, **kwargs)``: the factory at the import path ``env_factory``, with ``options`` bound to it."""
    make = import_object(env_factory, "env factory")
    return functools.partial(make, **options) if options else make


class EnvWorker:
    """The process that simulates; wrapped by ``ray.remote`` in :class:`EnvWorkerGroup`."""

    def __init__(self, config: EnvWorkerConfig):
        from vla_rl.runtime.process_env import apply_runtime_defaults

        apply_runtime_defaults()
        limit_software_render_threads()
        self.config = config
        make = env_maker(config.env_factory, config.env_factory_options)
        self.stages: list[ChunkedEnvs] = []
        for env_stage in range(config.num_stages):
            first = config.global_offset + env_stage * config.envs_per_stage

            def make_env(index: int, first: int = first) -> Any:
                task = config.tasks[(first + index) % len(config.tasks)]
                return make(f"{config.env_id}/{task}", **config.env_kwargs)

            self.stages.append(
                ChunkedEnvs(make_env, config.envs_per_stage, config.base_seed + first * 100_003, config.auto_reset,
                            env_id=config.env_id, expert_factory=config.expert_factory,
                            expert_seed_offset=config.global_offset)
            )
        self._fail_after_steps: int | None = None
        self.spans = SpanTrace()  # the profile of chosen iterations (torch is never loaded here)
        self._profile_path = ""
        self.busy = PhaseTimer(self.spans)
        for envs in self.stages:
            envs.timer.spans = self.spans

    def reset(self, env_stage: int, seeds=None, init_states=None, tasks=None) -> Observation:
        with self.busy.phase(f"stage{env_stage}/reset_call"):
            return self.stages[env_stage].reset(seeds, init_states, tasks)

    def step(self, env_stage: int, action_chunks: np.ndarray) -> ChunkResult:
        if self._fail_after_steps is not None:
            self._fail_after_steps -= 1
            if self._fail_after_steps < 0:
                os._exit(1)  # a simulated simulator crash (fault-injection for tests)
        started = time.perf_counter()
        with self.spans.span("env_worker/step_chunk"):
            result = self.stages[env_stage].step(action_chunks)
        self.busy.add(f"stage{env_stage}/step_call", time.perf_counter() - started)
        return result

    def timings(self) -> dict[str, dict[str, float]]:
        """Seconds and calls per phase since the last call, per stage (``stage<s>/<phase>``); starts again."""
        table = self.busy.pop()
        for index, envs in enumerate(self.stages):
            table.update({f"stage{index}/{name}": value for name, value in envs.timer.pop().items()})
        return table

    def env_method(self, env_stage: int, name: str, *args: Any, indices: list[int] | None = None, **kwargs: Any) -> Any:
        """:meth:`ChunkedEnvs.env_method` of env stage ``env_stage`` (``indices`` local to this worker's stage)."""
        return self.stages[env_stage].env_method(name, *args, indices=indices, **kwargs)

    def get_attr(self, env_stage: int, name: str) -> Any:
        return self.stages[env_stage].get_attr(name)

    def start_profile(self, path: str) -> None:
        self._profile_path = path
        self.spans.start()

    def stop_profile(self) -> str | None:
        return self.spans.stop(self._profile_path)  # None when no profile was started

    def inject_crash(self, after_steps: int) -> None:
        """Test hook: the process dies (as a simulator segfault would) after ``after_steps`` more steps."""
        self._fail_after_steps = after_steps

    def close(self) -> None:
        for envs in self.stages:
            envs.close()


def describe_ray_failure(error: BaseException) -> str:
    """The original exception and its remote traceback for a failed Ray call, not only 'actor died' (a Ray actor: a worker process)."""
    import ray

    if isinstance(error, ray.exceptions.RayTaskError):
        cause = error.cause
        header = f"{type(cause).__name__}: {cause}\n" if cause is not None else ""
        return header + "remote traceback:\n" + str(error)
    return f"{type(error).__name__}: {error}\n" + "".join(traceback.format_exception(error))
