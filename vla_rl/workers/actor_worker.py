"""Actor workers: the FSDP2-sharded training ranks of the policy (actor and critic).

One :class:`ActorWorker` per data-parallel rank, each a Ray actor. Rank 0 is the rendezvous
(its host and a free port); every rank builds the same policy from a :class:`PolicySpec`,
shards it with FSDP2 (blocks, then root), and creates the optimizer after sharding (the
optimizer state dict needs that order; docs/platform.md). The critic (``value_head``
parameters) gets its own parameter group and learning rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from contract.config_reader import FieldError, check_types, require
from vla_rl.algos.lr_schedules import warmup_cosine_factor
from vla_rl.runtime.checkpoint import load_sharded, save_sharded
from vla_rl.runtime.device import resolve_device
from vla_rl.runtime.distributed import (
    connect_rendezvous,
    init_distributed,
    open_rendezvous,
    shutdown_distributed,
)
from vla_rl.runtime.fsdp import ShardingConfig, full_state_dict, shard_model
from vla_rl.workers.policy_factory import PolicySpec
from vla_rl.workers.ppo_update import UpdateConfig, UpdateContext, ppo_update
from vla_rl.workers.success_replay import SuccessReplay

CRITIC_PREFIXES = ("value_head.",)


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with a warmup + constant/cosine schedule, per optimizer step.

    lr (1e-4 actor), critic_lr (1e-3), weight_decay (0.0), betas ((0.9, 0.999)),
    warmup_steps (0), schedule ("constant" or "cosine"), total_steps (the cosine's length, warmup included;
    unused by "constant"),
    min_lr_ratio (0.1: cosine floor as a fraction of the peak).
    """

    lr: float = 1e-4
    critic_lr: float = 1e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = 0
    schedule: str = "constant"
    total_steps: int = 0
    min_lr_ratio: float = 0.1

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("lr", "critic_lr"):
            require(self, name, low=0, low_open=True)
        require(self, "weight_decay", low=0)
        for beta in self.betas:
            if not 0 <= beta < 1:
                raise FieldError("betas", list(self.betas), "each must lie in [0, 1)")
        for name in ("warmup_steps", "total_steps"):
            require(self, name, low=0)
        require(self, "schedule", choices=("constant", "cosine"))
        require(self, "min_lr_ratio", low=0, high=1)
        if self.schedule == "cosine" and self.total_steps <= self.warmup_steps:
            raise FieldError("total_steps", self.total_steps,
                             f"a cosine schedule needs more optimiser steps than its warmup ({self.warmup_steps}); "
                             "e.g. ${product:${trainer.iterations},${algo.update.epochs},${algo.update.num_minibatches}}")  # fmt: skip

    def lr_factor(self, step: int) -> float:
        if self.warmup_steps and step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return 1.0
        if self.schedule != "cosine":
            raise ValueError(f"optim.schedule={self.schedule!r}; allowed: constant, cosine")
        return warmup_cosine_factor(step, self.warmup_steps, self.total_steps - self.warmup_steps, self.min_lr_ratio)


def build_optimizer(model: torch.nn.Module, config: OptimConfig) -> torch.optim.Optimizer:
    actor, critic = [], []
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            (critic if name.startswith(CRITIC_PREFIXES) else actor).append(parameter)
    groups = [{"params": actor, "lr": config.lr, "name": "actor"}]
    if critic:
        groups.append({"params": critic, "lr": config.critic_lr, "name": "critic"})
    optimizer = torch.optim.AdamW(groups, betas=config.betas, weight_decay=config.weight_decay)
    initialize_adam_state(optimizer)
    return optimizer


def initialize_adam_state(optimizer: torch.optim.Optimizer) -> None:
    """Give every parameter the state Adam would create at its first step (step 0, zero moments).

    Adam creates a parameter's state lazily, at the first step where it has a gradient, so a
    checkpoint would lack the parameters that have had none yet (a detached embedding, the
    flow during critic warm-up, the critic under GRPO), and loading it into a fresh optimizer,
    which asks for every parameter, would fail. Filled in advance, the state is the same as
    Adam's own lazy initialisation, so training is unchanged and every checkpoint is complete.
    """
    moments = ("exp_avg", "exp_avg_sq")
    for group in optimizer.param_groups:
        names = (*moments, "max_exp_avg_sq") if group.get("amsgrad") else moments
        for parameter in group["params"]:
            if not optimizer.state[parameter]:
                state = {name: torch.zeros_like(parameter, memory_format=torch.preserve_format) for name in names}
                optimizer.state[parameter] = {"step": torch.tensor(0.0, dtype=torch.float32), **state}


class ActorWorker:
    """One training rank; wrapped by ``ray.remote`` in the trainer's actor group."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        policy_spec: PolicySpec,
        optim: OptimConfig,
        update: UpdateConfig,
        sharding: ShardingConfig = ShardingConfig(),  # noqa: B008 (frozen)
        device: str | None = None,
        num_threads: int | None = None,
    ):
        from vla_rl.runtime.process_env import apply_runtime_defaults

        apply_runtime_defaults()
        if num_threads:
            torch.set_num_threads(num_threads)
        self.rank, self.world_size = rank, world_size
        self.spec, self.optim_config, self.update_config = policy_spec, optim, update
        self.sharding = sharding
        self.device = resolve_device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.model = None
        self._profiler = None
        self._rendezvous = None  # rank 0's store, from address() until the process group is up

    def address(self) -> tuple[str, int]:
        """Open the rendezvous (called on rank 0): its host and the port its store listens on."""
        import ray

        self._rendezvous = open_rendezvous()
        return ray.util.get_node_ip_address(), self._rendezvous.port

    def setup(self, master_addr: str, master_port: int) -> int:
        """Join the process group, build and shard the policy, create the optimizer. Returns the parameter count."""
        store = self._rendezvous if self.rank == 0 else connect_rendezvous(master_addr, master_port)
        mesh = init_distributed(self.rank, self.world_size, master_addr, master_port, self.device, store=store)
        policy = self.spec.build(self.device)
        self.reference = None
        if self.update_config.kl_coef > 0:
            self.reference = self.spec.build(self.device).eval().requires_grad_(False)
        self.model = shard_model(policy, mesh, self.sharding)
        self.optimizer = build_optimizer(self.model, self.optim_config)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.optim_config.lr_factor)
        self.training_step = 0
        return sum(p.numel() for p in policy.parameters())

    def update(
        self, batch: TensorDict, instructions: list[str], seed: int, train_policy: bool = True,
        replay: SuccessReplay | None = None,
    ) -> dict[str, float]:
        """PPO/GRPO update on the whole flat batch (each rank takes its shard of every mini-batch).

        ``train_policy=False`` (critic warm-up) minimises the value loss only. ``replay``: the success replay's
        behaviour-cloning batches (:mod:`vla_rl.workers.success_replay`), None: none.
        """
        if hasattr(self.model, "head") and hasattr(self.model.head, "set_training_step"):
            self.model.head.set_training_step(self.training_step)
        context = UpdateContext(
            self.model, self.optimizer, self.scheduler, self.rank, self.world_size, self.reference, train_policy
        )
        metrics = ppo_update(context, self.update_config, batch.to(self.device), instructions, seed, replay)
        self.training_step += 1
        return metrics

    def torch_threads(self) -> int:
        """The torch threads this process computes with (``torch.get_num_threads()``)."""
        return torch.get_num_threads()

    def full_weights(self, changing_only: bool = False) -> dict[str, torch.Tensor] | None:
        """Unsharded CPU weights (a collective: every rank must be called); rank 0 returns them.

        ``changing_only``: only what training changes (``vla_rl.workers.weight_sync``), for a rollout worker
        that already holds the rest.
        """
        weights = full_state_dict(self.model)
        if changing_only:
            from vla_rl.workers.weight_sync import changing_keys, select

            weights = select(weights, changing_keys(self.model))
        return weights if self.rank == 0 else None

    def save(self, folder: str) -> None:
        """DCP shards of model and optimizer (every rank), plus the schedule position (rank 0)."""
        save_sharded(self.model, self.optimizer, Path(folder))
        if self.rank == 0:
            torch.save(
                {"scheduler": self.scheduler.state_dict(), "training_step": self.training_step},
                Path(folder) / "actor_state.pt",
            )

    def load(self, folder: str) -> None:
        """Load a checkpoint saved at any world size."""
        load_sharded(self.model, self.optimizer, Path(folder))
        state = torch.load(Path(folder) / "actor_state.pt", weights_only=False)
        self.scheduler.load_state_dict(state["scheduler"])
        self.training_step = state["training_step"]

    def learning_rates(self) -> dict[str, Any]:
        """What the next optimizer step uses: each parameter group's ``lr`` by name, the scheduler's step, and
        the updates taken (``training_step``); for checks that a resumed run continues its schedule."""
        groups = enumerate(self.optimizer.param_groups)
        lrs = {str(group.get("name", index)): float(group["lr"]) for index, group in groups}
        return {"lr": lrs, "scheduler_step": int(self.scheduler.last_epoch), "training_step": self.training_step}

    def start_profile(self, path: str) -> None:
        from vla_rl.runtime.profiling import start_torch_profiler

        self._profiler = start_torch_profiler(path.format(rank=self.rank))

    def stop_profile(self) -> str | None:
        from vla_rl.runtime.profiling import stop_torch_profiler

        path, self._profiler = stop_torch_profiler(self._profiler), None
        return path

    def shutdown(self) -> None:
        shutdown_distributed()


def collect_rank_metrics(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """Average each metric over ranks (see :func:`vla_rl.workers.ppo_update.ppo_update`)."""
    keys = sorted({key for metrics in per_rank for key in metrics})
    return {key: sum(m.get(key, 0.0) for m in per_rank) / len(per_rank) for key in keys}
