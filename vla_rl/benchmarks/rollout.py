"""`vla-rl bench rollout`: env throughput with random actions (the limit) vs. full pipelined rollouts.

For each pipeline stage count (1 and 2 by default, the same envs in total), one env worker group
is built from the run's config and measured two ways, in alternating rounds:

- raw: reset every env as a rollout does, then step ``trainer.rollout_steps`` chunks of uniform
  random actions (within the action bounds) through every stage, all stages submitted at once
  so the env workers never wait: the most env steps per second these workers can give;
- rollout: :meth:`vla_rl.stages.rl.rollout.RolloutCollector.collect` with the policy of a rollout worker
  (inference, pipelining, observation transfer, batch assembly and bootstrap values included).

``ratio`` = rollout / raw env steps per second, per round; near 1 means the policy and the driver hide
behind simulation. Each figure runs for at least ``MIN_SECONDS_PER_FIGURE``; the JSON gives the median
and range over ``repeats`` rounds, and a profile of one more rollout (each process's busy share of its
wall time, where the driver waited; :meth:`vla_rl.stages.rl.rollout.RolloutCollector.collect_profiled`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import ray
from omegaconf import DictConfig

from vla_rl.benchmarks.compare import spread
from vla_rl.benchmarks.setup import fits_at_once, timed
from vla_rl.runtime.ray_cluster import init_ray
from vla_rl.runtime.seeds import derived_seed
from vla_rl.stages.rl.experiment import RLRunPlan, plan_rl_run
from vla_rl.stages.rl.rollout import RolloutCollector
from vla_rl.stages.run_plan import read_run_plan
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
    for env_stage in range(env_group.num_stages):
        env_group.reset(env_stage, seeds=[derived_seed(seed, round_index, 0, env_stage * size + j) for j in range(size)])
    executed = 0
    for _ in range(num_steps):
        chunks = [rng.uniform(low, high, (size, chunk_size, low.shape[0])).astype(np.float32)
                  for _ in range(env_group.num_stages)]  # fmt: skip
        pending = [env_group.step_async(env_stage, chunk) for env_stage, chunk in enumerate(chunks)]
        executed += sum(int(env_group.step_wait(p).steps_executed.sum()) for p in pending)
    return executed


MIN_SECONDS_PER_FIGURE = 3.0


def until(seconds: float, function) -> tuple[float, int]:
    """Call ``function(call_index) -> env steps`` until ``seconds`` have passed; (seconds, env steps)."""
    elapsed, steps, calls = 0.0, 0, 0
    while elapsed < seconds or calls == 0:
        spent, executed = timed(lambda c=calls: function(c))
        elapsed, steps, calls = elapsed + spent, steps + executed, calls + 1
    return elapsed, steps


def profile_summary(profile: dict) -> dict[str, float]:
    """Each process's busy share of one rollout's wall time, and where the driver waited (fractions)."""
    wall = profile["wall_s"]

    def share(table: dict, suffixes: tuple[str, ...]) -> float:
        return round(sum(e["seconds"] for k, e in table.items() if k.endswith(suffixes)) / wall, 3)

    def module_share(table: dict, module: str) -> float:  # the module's own forward calls (not nested ones)
        return round(sum(e["seconds"] for k, e in table.items() if k.startswith(f"forward/{module}.")) / wall, 3)

    summary = {"wall_s": round(wall, 3)}
    for name, table in profile["env_workers"].items():
        summary[f"{name}_busy"] = share(table, ("step_call", "reset_call"))
        summary[f"{name}_env_step"] = share(table, ("/env_step",))
        summary[f"{name}_render"] = share(table, ("/render_at_chunk_end",))
        summary[f"{name}_auto_reset"] = share(table, ("/auto_reset",))
    inference = profile["rollout_worker"]
    summary["rollout_worker_busy"] = share(inference, ("act_call", "value_call"))
    summary["rollout_worker_encoders"] = share(inference, ("forward/encoder",))
    summary["rollout_worker_head_networks"] = module_share(inference, "head")
    summary["driver_wait_for_actions"] = share(profile["driver"], ("wait_for_actions",))
    summary["driver_wait_for_env_step"] = share(profile["driver"], ("wait_for_env_step",))
    summary["driver_reset_envs"] = share(profile["driver"], ("reset_envs",))
    summary["driver_assemble_batch"] = share(profile["driver"], ("assemble_batch",))
    return summary


def measure_stage_count(setup: RLRunPlan, env_group: EnvWorkerGroup, rollout_worker: Any, repeats: int,
                        min_seconds: float = MIN_SECONDS_PER_FIGURE) -> dict:  # fmt: skip
    """Raw and rollout env steps/s of ``env_group`` (one split of the run's envs into stages).

    ``repeats`` alternating rounds (both see the same machine load), each figure at least ``min_seconds``
    long; the ratio is taken per round; median and range over the rounds. Then one profiled rollout.
    """
    collector = RolloutCollector(env_group, rollout_worker, setup.tasks)
    low = np.asarray(setup.io_spec["action_low"], np.float32)
    high = np.asarray(setup.io_spec["action_high"], np.float32)
    num_steps, collection, group_size = setup.trainer.rollout_steps, setup.algo.collection, setup.algo.group_size

    def raw(round_index: int) -> int:
        return random_action_steps(env_group, num_steps, setup.policy_spec.chunk_size, low, high, setup.seed, round_index)

    def rollout(round_index: int) -> int:
        return collector.collect(num_steps, setup.seed, round_index, collection, group_size).env_steps

    raw(-1), rollout(-1)  # warm-up: first renders, first forward passes
    raw_rates, rollout_rates, ratios = [], [], []
    for round_index in range(repeats):
        raw_s, raw_steps = until(min_seconds, lambda c, r=round_index: raw(1000 * r + c))
        rollout_s, rollout_steps = until(min_seconds, lambda c, r=round_index: rollout(1000 * r + c))
        raw_rates.append(raw_steps / raw_s)
        rollout_rates.append(rollout_steps / rollout_s)
        ratios.append(rollout_rates[-1] / raw_rates[-1])
    _, profile = collector.collect_profiled(num_steps, setup.seed, -2, collection, group_size)
    return {
        "envs_per_stage": env_group.envs_per_stage,
        "raw_env_steps_per_s": spread(raw_rates),
        "rollout_env_steps_per_s": spread(rollout_rates),
        "ratio": spread(ratios),
        "profile": profile_summary(profile),
    }


def run_rollout_benchmark(cfg: DictConfig, repeats: int = 3, stage_counts: tuple[int, ...] = (1, 2),
                          min_seconds: float = MIN_SECONDS_PER_FIGURE) -> dict[str, Any]:  # fmt: skip
    """Measure raw and rollout throughput for each of ``stage_counts``; see the module docstring."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
    setup = plan_rl_run(read_run_plan(cfg))
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
                group.get_attr(0, "tasks")  # every worker answers once its envs exist
        for num_stages in stage_counts:
            group = env_groups.get(num_stages) or start(num_stages)
            per_stage_count[str(num_stages)] = measure_stage_count(setup, group, rollout_worker, repeats, min_seconds)
            env_groups.pop(num_stages).close()
    finally:
        for group in env_groups.values():
            group.close()
        ray.kill(rollout_worker, no_restart=True)
    best = max(per_stage_count, key=lambda n: per_stage_count[n]["rollout_env_steps_per_s"]["median"])
    return {
        "benchmark": "rollout",
        "env": setup.env_name,
        "tasks": list(setup.tasks),
        "policy_head": setup.policy_spec.config.get("head", {}).get("name"),
        "num_env_workers": trainer.num_env_workers,
        "num_envs": trainer.num_envs,
        "rollout_steps": trainer.rollout_steps,
        "chunk_size": setup.policy_spec.chunk_size,
        "repeats": repeats,
        "min_seconds_per_figure": min_seconds,
        "stages": per_stage_count,
        "best_num_stages": int(best),
        "raw_env_steps_per_s": per_stage_count[best]["raw_env_steps_per_s"]["median"],
        "rollout_env_steps_per_s": per_stage_count[best]["rollout_env_steps_per_s"]["median"],
        "ratio": per_stage_count[best]["ratio"]["median"],
    }
