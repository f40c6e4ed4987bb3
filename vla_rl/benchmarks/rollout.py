"""`vla-rl bench rollout`: env throughput with random actions (the limit) vs. full pipelined rollouts.

For each pipeline stage count (1 and 2 by default, the same envs in total), one env worker group
is built from the run's config and measured two ways, in alternating rounds:

- raw: reset every env as a rollout does, then step ``trainer.rollout_steps`` chunks of uniform
  random actions (within the action bounds) through every stage, all stages submitted at once
  so the env workers never wait: the most env steps per second these workers can give;
- rollout: :meth:`vla_rl.rollout.RolloutCollector.collect` with the policy of a rollout worker
  (inference, pipelining, observation transfer, batch assembly and bootstrap values included).

``ratio`` = rollout / raw env steps per second; near 1 means the policy and the driver hide
behind simulation.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import ray
from omegaconf import DictConfig

from vla_rl.benchmarks.setup import BenchSetup, bench_setup, fits_at_once, timed
from vla_rl.rollout import RolloutCollector, derived_seed
from vla_rl.runtime.ray_cluster import init_ray
from vla_rl.workers.env_group import EnvWorkerGroup
from vla_rl.workers.rollout_worker import RolloutWorker

logger = logging.getLogger(__name__)


def random_action_steps(
    env_group: EnvWorkerGroup, num_steps: int, chunk_size: int, low: np.ndarray, high: np.ndarray, seed: int,
    round_index: int,
) -> int:  # fmt: skip
    """Reset every stage, then step ``num_steps`` random chunks ``(stage_size, chunk_size, A)`` per stage.

    Returns the env steps executed.
    """
    rng = np.random.default_rng(derived_seed(seed, round_index, "random actions"))
    size = env_group.stage_size
    for stage in range(env_group.num_stages):
        env_group.reset(stage, seeds=[derived_seed(seed, round_index, 0, stage * size + j) for j in range(size)])
    executed = 0
    for _ in range(num_steps):
        chunks = [rng.uniform(low, high, (size, chunk_size, low.shape[0])).astype(np.float32)
                  for _ in range(env_group.num_stages)]  # fmt: skip
        pending = [env_group.step_async(stage, chunk) for stage, chunk in enumerate(chunks)]
        executed += sum(int(env_group.wait(p).steps_executed.sum()) for p in pending)
    return executed


def measure_stage_count(setup: BenchSetup, env_group: EnvWorkerGroup, rollout_worker: Any, repeats: int) -> dict:
    """Raw and rollout env steps/s of ``env_group`` (one split of the run's envs into stages)."""
    collector = RolloutCollector(env_group, rollout_worker, setup.tasks)
    low = np.asarray(setup.io_spec["action_low"], np.float32)
    high = np.asarray(setup.io_spec["action_high"], np.float32)
    num_steps, mode, group_size = setup.trainer.rollout_steps, setup.algo.rollout_mode, setup.algo.group_size

    def raw(round_index: int) -> int:
        return random_action_steps(env_group, num_steps, setup.chunk_size, low, high, setup.seed, round_index)

    def rollout(round_index: int) -> int:
        return collector.collect(num_steps, setup.seed, round_index, mode, group_size).env_steps

    raw(-1), rollout(-1)  # warm-up: first renders, first forward passes
    totals = {"raw_s": 0.0, "raw_steps": 0, "rollout_s": 0.0, "rollout_steps": 0}
    for round_index in range(repeats):  # alternating rounds: both see the same machine load
        for name, function in (("raw", raw), ("rollout", rollout)):
            seconds, steps = timed(lambda f=function, r=round_index: f(r))
            totals[f"{name}_s"] += seconds
            totals[f"{name}_steps"] += steps
    raw_rate = totals["raw_steps"] / totals["raw_s"]
    rollout_rate = totals["rollout_steps"] / totals["rollout_s"]
    return {
        "envs_per_stage": env_group.envs_per_stage,
        "raw_env_steps_per_s": round(raw_rate, 2),
        "rollout_env_steps_per_s": round(rollout_rate, 2),
        "ratio": round(rollout_rate / raw_rate, 3),
        "rollout_s": round(totals["rollout_s"] / repeats, 3),
    }


def run_rollout_benchmark(cfg: DictConfig, repeats: int = 3, stage_counts: tuple[int, ...] = (1, 2)) -> dict[str, Any]:
    """Measure raw and rollout throughput for each of ``stage_counts``; see the module docstring."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
    setup = bench_setup(cfg)
    for num_stages in stage_counts:
        setup.env_config(num_stages)  # fail early on an uneven split
    trainer = setup.trainer
    init_ray(trainer.ray_num_cpus or None, trainer.ray_address)
    device = None if trainer.device == "auto" else trainer.device
    env_cpus = trainer.num_env_workers * trainer.env_worker_cpus
    start_together = fits_at_once(trainer.rollout_worker_cpus + env_cpus * len(stage_counts))
    rollout_worker = (
        ray.remote(RolloutWorker)
        .options(num_cpus=trainer.rollout_worker_cpus, num_gpus=trainer.rollout_gpus)
        .remote(setup.policy_spec, device, trainer.torch_threads)
    )
    env_groups: dict[int, EnvWorkerGroup] = {}

    def start(num_stages: int) -> EnvWorkerGroup:
        group = EnvWorkerGroup(setup.env_config(num_stages), trainer.num_env_workers, trainer.env_worker_cpus)
        env_groups[num_stages] = group
        return group

    per_stage_count = {}
    try:
        if start_together:  # start-ups overlap; each group is measured alone, once every worker is ready
            for num_stages in stage_counts:
                start(num_stages)
            for group in env_groups.values():
                group.call_all("env_spec")
        for num_stages in stage_counts:
            group = env_groups.get(num_stages) or start(num_stages)
            per_stage_count[str(num_stages)] = measure_stage_count(setup, group, rollout_worker, repeats)
            env_groups.pop(num_stages).close()
    finally:
        for group in env_groups.values():
            group.close()
        ray.kill(rollout_worker, no_restart=True)
    best = max(per_stage_count, key=lambda n: per_stage_count[n]["rollout_env_steps_per_s"])
    return {
        "benchmark": "rollout",
        "env": setup.env_name,
        "tasks": list(setup.tasks),
        "policy_head": setup.policy_spec.config.get("head", {}).get("name"),
        "num_env_workers": trainer.num_env_workers,
        "num_envs": trainer.num_envs,
        "rollout_steps": trainer.rollout_steps,
        "chunk_size": setup.chunk_size,
        "repeats": repeats,
        "stages": per_stage_count,
        "best_num_stages": int(best),
        "raw_env_steps_per_s": per_stage_count[best]["raw_env_steps_per_s"],
        "rollout_env_steps_per_s": per_stage_count[best]["rollout_env_steps_per_s"],
        "ratio": per_stage_count[best]["ratio"],
    }
