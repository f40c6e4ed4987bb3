"""`vla-rl bench update`: training samples per second of PPO updates at actor world sizes 1 and 2.

The batch is synthetic but real (:func:`real_batch`): the observations of the run's envs and the
act extras, log-probs and values of the run's policy, the size of one PPO rollout
(``trainer.num_envs x trainer.rollout_steps`` steps). Every world size updates the same batch from
the same initial weights. ``samples_per_s`` counts one sample per step per epoch:
``batch_size * epochs / seconds per update``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from tensordict import TensorDict

from envs.registry import make
from vla_rl.benchmarks.setup import fits_at_once, timed
from vla_rl.runtime.ray_cluster import init_ray
from vla_rl.stages.rl.experiment import RLRunPlan, plan_rl_run
from vla_rl.stages.rl.rollout import NOT_EXTRAS
from vla_rl.stages.run_plan import read_run_plan
from vla_rl.workers.actor_group import ActorGroup
from vla_rl.workers.chunked_envs import ChunkedEnvs


def real_batch(setup: RLRunPlan) -> tuple[TensorDict, list[str]]:
    """``trainer.num_envs x trainer.rollout_steps`` steps ``[B]`` of real envs acted on by the real policy.

    Runs in this process (envs and policy, no workers to start). Observations, actions' extras and
    log-probs and values are real; advantages are standard normal draws and returns are value +
    advantage (the update's cost does not depend on them). Returns the batch and its instructions.
    """
    trainer = setup.trainer
    tasks = setup.tasks
    envs = ChunkedEnvs(lambda i: make(f"{setup.env_name}/{tasks[i % len(tasks)]}", **setup.env_kwargs),
                       trainer.num_envs, base_seed=setup.seed)  # fmt: skip
    policy = setup.policy_spec.build("cpu").eval()
    generator = torch.Generator().manual_seed(setup.seed)
    observations, extras = [], []
    try:
        observation = envs.reset()
        for _ in range(trainer.rollout_steps):
            with torch.no_grad():
                actions, step_extras = policy.act(observation, generator=generator)
            observations.append(observation)
            extras.append(step_extras)
            observation = envs.step(actions.cpu().numpy()).observation
    finally:
        envs.close()
    instructions = sorted({text for o in observations for text in o["instruction"]})
    size = trainer.num_envs * trainer.rollout_steps
    advantage = torch.randn(size, generator=generator)
    value = torch.cat([e["value"] for e in extras]).float()
    batch = TensorDict(
        {
            "observation": {
                "images": {camera: torch.from_numpy(np.concatenate([o["images"][camera] for o in observations]))
                           for camera in observations[0]["images"]},  # fmt: skip
                "state": torch.from_numpy(np.concatenate([o["state"] for o in observations])),
                "instruction_id": torch.tensor([instructions.index(t) for o in observations for t in o["instruction"]]),
            },
            "extras": {key: torch.cat([e[key] for e in extras]) for key in extras[0] if key not in NOT_EXTRAS},
            "old_log_prob": torch.cat([e["log_prob"] for e in extras]).float(),
            "value": value,
            "advantage": advantage,
            "return": value + advantage,
            "mask": torch.ones(size, dtype=torch.bool),
        },
        batch_size=[size],
    )
    return batch, instructions


def start_actor_group(setup: RLRunPlan, world_size: int) -> ActorGroup:
    trainer, algo = setup.trainer, setup.algo
    device = None if trainer.device == "auto" else trainer.device
    return ActorGroup(
        world_size, setup.policy_spec, algo.optim, algo.update, trainer.sharding,
        trainer.actor_cpus, trainer.actor_gpus, device, trainer.actor_threads,
    )  # fmt: skip


def measure_world_size(group: ActorGroup, batch: TensorDict, instructions: list[str], repeats: int, epochs: int,
                       num_minibatches: int) -> dict[str, float]:  # fmt: skip
    """Mean seconds per update (after one warm-up update) and samples/s of an actor group."""
    group.update(batch, instructions, seed=0)  # warm-up: first backward, optimizer state
    seconds = sum(timed(lambda i=i: group.update(batch, instructions, seed=i + 1))[0] for i in range(repeats))
    per_update = seconds / repeats
    return {
        "update_s": round(per_update, 4),
        "samples_per_s": round(batch.shape[0] * epochs / per_update, 2),
        "optimizer_steps_per_s": round(epochs * num_minibatches / per_update, 3),
    }


def run_update_benchmark(cfg: DictConfig, repeats: int = 3, world_sizes: tuple[int, ...] = (1, 2)) -> dict[str, Any]:
    """Measure PPO updates of the same real batch at each of ``world_sizes``; see the module docstring."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
    setup = plan_rl_run(read_run_plan(cfg))
    trainer = setup.trainer
    init_ray(trainer.ray_num_cpus or None, trainer.ray_address)
    start_together = fits_at_once(sum(n * trainer.actor_cpus for n in world_sizes))
    update = setup.algo.update
    groups: dict[int, ActorGroup] = {}
    shut_down: set[int] = set()
    per_world_size = {}
    threads_seen: set[int] = set()  # what the actor processes report, not what the config asked for
    with ThreadPoolExecutor(len(world_sizes)) as pool:
        # The ranks start (in threads) while the batch is made; each group is measured alone once all are ready.
        starting = {n: pool.submit(start_actor_group, setup, n) for n in world_sizes} if start_together else {}
        try:
            batch, instructions = real_batch(setup)
            groups.update({n: future.result() for n, future in starting.items()})
            for world_size in world_sizes:
                if world_size not in groups:  # not started together (too few free CPUs)
                    groups[world_size] = start_actor_group(setup, world_size)
                group = groups[world_size]
                per_world_size[str(world_size)] = measure_world_size(
                    group, batch, instructions, repeats, update.epochs, update.num_minibatches
                )
                threads_seen.update(group.call("torch_threads"))
                group.shutdown()
                shut_down.add(world_size)
        finally:
            for world_size, future in starting.items():
                if world_size not in groups and future.exception() is None:
                    groups[world_size] = future.result()
            for world_size, group in groups.items():
                if world_size not in shut_down:
                    group.shutdown()
    best = max(per_world_size, key=lambda n: per_world_size[n]["samples_per_s"])
    return {
        "benchmark": "update",
        "algo": setup.algo.name,
        "policy_head": setup.policy_spec.config.get("head", {}).get("name"),
        "batch_size": int(batch.shape[0]),
        "epochs": update.epochs,
        "num_minibatches": update.num_minibatches,
        "micro_batch_size": update.micro_batch_size,
        "torch_threads": min(threads_seen) if len(threads_seen) == 1 else sorted(threads_seen),
        "repeats": repeats,
        "world_sizes": per_world_size,
        "best_world_size": int(best),
        "samples_per_s": per_world_size[best]["samples_per_s"],
    }
