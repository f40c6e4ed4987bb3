"""What the trainer benchmarks share: the env and policy of a composed config, and a wall clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from omegaconf import DictConfig

# Before anything renders in this process (torchvision after MuJoCo's EGL rendering crashes).
import policies  # noqa: F401
from envs.registry import resolve
from vla_rl.config import ConfigError, env_kwargs, resolve_tasks
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig, section
from vla_rl.stages.rl.experiment import policy_spec_from_config, with_rollout_window
from vla_rl.workers.env_worker import EnvWorkerConfig
from vla_rl.workers.policy_factory import PolicySpec


@dataclass
class BenchSetup:
    """The parts of an RL run a benchmark builds its worker groups from."""

    trainer: TrainerConfig
    algo: AlgoConfig
    env_name: str
    tasks: tuple[str, ...]
    env_kwargs: dict[str, Any]
    io_spec: dict[str, Any]
    policy_spec: PolicySpec
    seed: int

    @property
    def chunk_size(self) -> int:
        return int(self.policy_spec.config.get("chunk_size", 1))

    def env_config(self, num_stages: int | None = None) -> EnvWorkerConfig:
        """The env worker config of the run; with ``num_stages``, the same envs split into that many stages.

        Raises:
            ConfigError: the run's envs per worker do not split evenly into ``num_stages`` stages.
        """
        envs_per_worker = self.trainer.envs_per_stage * self.trainer.num_stages
        stages = num_stages or self.trainer.num_stages
        if envs_per_worker % stages:
            raise ConfigError(
                f"'trainer.envs_per_stage' x 'trainer.num_stages' = {envs_per_worker} envs per worker do not split "
                f"into {stages} pipeline stages; choose an envs_per_stage that makes the product a multiple of {stages}"
            )
        config = EnvWorkerConfig(
            env_id=self.env_name, env_kwargs=self.env_kwargs, tasks=self.tasks,
            envs_per_stage=self.trainer.envs_per_stage, num_stages=self.trainer.num_stages,
            base_seed=self.seed, auto_reset=self.algo.collection.auto_reset,
        )  # fmt: skip
        return replace(config, envs_per_stage=envs_per_worker // stages, num_stages=stages)


def bench_setup(cfg: DictConfig) -> BenchSetup:
    """Read the env, policy, trainer and algo sections of ``cfg`` as ``vla-rl train`` does."""
    trainer = section(cfg, "trainer", TrainerConfig)
    algo = section(cfg, "algo", AlgoConfig)
    entry, _ = resolve(str(cfg.env.id))
    tasks = tuple(resolve_tasks(cfg.env, entry.tasks)) or (None,)
    kwargs = env_kwargs(cfg.env)
    io_spec = env_io_spec(entry.name, tasks[0], kwargs)
    spec = policy_spec_from_config(cfg, io_spec, trainer.init_policy)
    trainer = with_rollout_window(trainer, entry.name, tasks, kwargs, int(spec.config.get("chunk_size", 1)))
    return BenchSetup(trainer, algo, entry.name, tasks, kwargs, io_spec, spec, int(cfg.seed))


def fits_at_once(num_cpus: float) -> bool:
    """Whether Ray has ``num_cpus`` logical CPUs free now (else workers started together would wait for each other)."""
    import ray

    return ray.available_resources().get("CPU", 0.0) >= num_cpus


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock seconds of one call, and its result."""
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result
