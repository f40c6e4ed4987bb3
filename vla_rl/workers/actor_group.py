"""The driver's handle on the actor ranks: create, rendezvous, and fan calls out to all ranks."""

from __future__ import annotations

from typing import Any

import ray
from tensordict import TensorDict

from vla_rl.runtime.fsdp import ShardingConfig
from vla_rl.workers.actor_worker import ActorWorker, OptimConfig, collect_rank_metrics
from vla_rl.workers.policy_factory import PolicySpec
from vla_rl.workers.ppo_update import UpdateConfig
from vla_rl.workers.success_replay import SuccessReplay


class ActorGroup:
    """``world_size`` :class:`ActorWorker` ranks (collectives need every rank in every call)."""

    def __init__(
        self,
        world_size: int,
        policy_spec: PolicySpec,
        optim: OptimConfig,
        update: UpdateConfig,
        sharding: ShardingConfig,
        num_cpus_per_rank: float = 1.0,
        num_gpus_per_rank: float = 0.0,
        device: str | None = None,
        num_threads: int | None = None,
        resources: dict[str, float] | None = None,
    ):
        if world_size < 1:
            raise ValueError(f"actor world_size={world_size} must be >= 1")
        remote = ray.remote(ActorWorker)
        self.workers = [
            remote.options(num_cpus=num_cpus_per_rank, num_gpus=num_gpus_per_rank, resources=dict(resources or {})).remote(
                rank, world_size, policy_spec, optim, update, sharding, device, num_threads
            )
            for rank in range(world_size)
        ]
        master_addr, master_port = ray.get(self.workers[0].address.remote())
        self.num_parameters = ray.get([w.setup.remote(master_addr, master_port) for w in self.workers])[0]

    @property
    def world_size(self) -> int:
        return len(self.workers)

    def update(
        self, batch: TensorDict, instructions: list[str], seed: int, train_policy: bool = True,
        replay: SuccessReplay | None = None,
    ) -> dict[str, float]:
        batch_ref = ray.put(batch)  # one copy in the object store, read by every rank
        replay_ref = None if replay is None else ray.put(replay)
        futures = [w.update.remote(batch_ref, instructions, seed, train_policy, replay_ref) for w in self.workers]
        return collect_rank_metrics(ray.get(futures))

    def full_weights(self, changing_only: bool = False) -> dict:
        return ray.get([w.full_weights.remote(changing_only) for w in self.workers])[0]

    def save(self, folder: str) -> None:
        ray.get([w.save.remote(folder) for w in self.workers])

    def load(self, folder: str) -> None:
        ray.get([w.load.remote(folder) for w in self.workers])

    def call(self, method: str, *args: Any) -> list[Any]:
        return ray.get([getattr(w, method).remote(*args) for w in self.workers])

    def shutdown(self) -> None:
        try:
            ray.get([w.shutdown.remote() for w in self.workers], timeout=60)
        finally:
            for worker in self.workers:
                ray.kill(worker, no_restart=True)
