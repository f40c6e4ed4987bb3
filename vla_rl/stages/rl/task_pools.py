"""Per-task pools of the chunks of successful and failed training episodes (``trainer.task_pools``).

Every finished episode of a rollout batch puts its chunks (the observation the policy read, the action chunk it
took, the env task) into its task's success or failure pool. A pool is bounded: ``capacity`` chunks, kept by
reservoir sampling (Vitter's Algorithm R), so that it holds a uniform sample of every chunk its task has ever
offered it, from the SFT policy's first successes to the last, whatever the rate at which they come (a task
that stops succeeding keeps its successes; one that succeeds in every env does not flush its history in a
few iterations, as a FIFO would). The reservoir's decisions come from the pools' own generator, seeded from
the run seed; its state and the pools' contents are saved with each checkpoint (:meth:`TaskPools.state_dict`),
so that a resumed run holds what an uninterrupted one holds.

Users: the success replay (``algo.success_replay_weight``, :meth:`TaskPools.sample_replay`: equal shares of
successful chunks per task, a behaviour-cloning loss beside the RL loss), and the pool sizes logged per task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from contract.config_reader import check_types, require
from vla_rl.config import ConfigError
from vla_rl.stages.rl.rollout import Rollout, finished_episode_steps

OUTCOMES = ("success", "failure")


@dataclass
class TaskPoolsConfig:
    """``trainer.task_pools``: bounded per-task pools of the chunks of successful and failed episodes.

    - ``capacity``: chunks kept per task in its success pool (0: no pools; ``algo.success_replay_weight`` needs them).
    - ``failure_capacity``: chunks kept per task in its failure pool (null: ``capacity``; 0: no failure pool).
    - ``regression_threshold``: a task counts as regressed (``regression/tasks_regressed``) when its training
      success (the moving average of ``trainer.task_sampling.decay``) lies more than this below its best so far.
    """

    capacity: int = 0
    failure_capacity: int | None = None
    regression_threshold: float = 0.2

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "capacity", low=0)
        require(self, "failure_capacity", low=0)
        require(self, "regression_threshold", low=0, high=1)

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def capacity_of(self, outcome: str) -> int:
        if outcome == "success" or self.failure_capacity is None:
            return self.capacity
        return self.failure_capacity


class PoolStateError(ConfigError):
    """A checkpoint's pools do not fit this run's ``trainer.task_pools``; the message says what to do (the CLI
    reports it as a config error)."""


class ChunkPool:
    """At most ``capacity`` chunks of one task and outcome, a uniform sample of all offered (Algorithm R).

    Arrays are allocated at the first chunk: ``images/<camera>`` uint8 ``(C, H, W, 3)``, ``state`` ``(C, S)``,
    ``action`` ``(C, H_chunk, A)`` (env units), ``action_mask`` bool ``(C, H_chunk)`` (the actions the env
    executed), ``iteration`` ``(C,)`` (when it was collected); ``instructions``: C strings.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.arrays: dict[str, np.ndarray] = {}
        self.instructions: list[str] = []
        self.size = 0  # chunks held
        self.seen = 0  # chunks offered since the pool began

    def add(self, chunk: Mapping[str, np.ndarray], instruction: str, rng: np.random.Generator) -> int | None:
        """Offer one chunk (arrays without the leading dim); returns the slot it took, or None (not kept).

        The first ``capacity`` chunks fill the slots in order; the k-th after (0-based count ``seen``) replaces
        slot ``j`` with ``j`` drawn uniformly from ``[0, seen]`` when ``j < capacity``, else is dropped.
        """
        if self.capacity == 0:
            return None
        if self.seen < self.capacity:
            slot = self.seen
        else:
            draw = int(rng.integers(0, self.seen + 1))
            slot = draw if draw < self.capacity else None
        self.seen += 1
        if slot is None:
            return None
        if not self.arrays:
            self.arrays = {key: np.zeros((self.capacity, *np.shape(value)), np.asarray(value).dtype)
                           for key, value in chunk.items()}  # fmt: skip
        for key, value in chunk.items():
            self.arrays[key][slot] = value
        if slot == len(self.instructions):
            self.instructions.append(instruction)
            self.size += 1
        else:
            self.instructions[slot] = instruction
        return slot

    def state_dict(self) -> dict[str, Any]:
        """The pool; its arrays as torch tensors, which ``torch.save`` writes as raw bytes (numpy arrays would be
        pickled, half again as large for random bytes)."""
        return {"capacity": self.capacity, "size": self.size, "seen": self.seen,
                "arrays": {key: torch.from_numpy(value[: self.size].copy()) for key, value in self.arrays.items()},
                "instructions": list(self.instructions)}  # fmt: skip

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> ChunkPool:
        pool = cls(int(state["capacity"]))
        pool.size, pool.seen = int(state["size"]), int(state["seen"])
        pool.instructions = list(state["instructions"])
        for key, value in state["arrays"].items():
            value = np.asarray(value)
            pool.arrays[key] = np.zeros((pool.capacity, *value.shape[1:]), value.dtype)
            pool.arrays[key][: pool.size] = value
        return pool


def episode_chunks(rollout: Rollout, stage_size: int, iteration: int) -> Iterable[tuple[str, bool, dict, str]]:
    """``(task, success, chunk, instruction)`` for every chunk of every finished episode of ``rollout``, env by
    env (batch row) and in time order; ``chunk`` as :meth:`ChunkPool.add` takes it.

    The chunk ``c`` of an episode of ``L`` env steps executed ``min(H, L - c * H)`` of its ``H`` actions (an
    episode that ends mid-chunk ends the chunk): ``action_mask`` marks those.
    """
    batch = rollout.batch
    observation = batch["observation"]
    cameras = list(observation["images"].keys())
    images = {camera: observation["images", camera].numpy() for camera in cameras}
    state, instruction_ids = observation["state"].numpy(), observation["instruction_id"].numpy()
    actions = batch["action_chunk"].numpy()
    horizon = actions.shape[2]
    for row, steps, record in finished_episode_steps(rollout, stage_size):
        executed = int(record["length"]) - horizon * np.arange(len(steps))
        for index, step in enumerate(steps):
            chunk = {f"images/{camera}": images[camera][row, step] for camera in cameras}
            chunk.update({
                "state": state[row, step], "action": actions[row, step],
                "action_mask": np.arange(horizon) < executed[index], "iteration": np.int64(iteration),
            })  # fmt: skip
            instruction = rollout.instructions[int(instruction_ids[row, step])]
            yield str(record.get("task") or ""), bool(record["success"]), chunk, instruction


class TaskPools:
    """The success and failure pools of every task (keyed by the env's task name; "" for an env without tasks)."""

    def __init__(self, config: TaskPoolsConfig, seed: int):
        self.config = config
        self.pools: dict[str, dict[str, ChunkPool]] = {outcome: {} for outcome in OUTCOMES}
        self.rng = np.random.default_rng(seed)

    def pool(self, outcome: str, task: str) -> ChunkPool:
        pools = self.pools[outcome]
        if task not in pools:
            pools[task] = ChunkPool(self.config.capacity_of(outcome))
        return pools[task]

    def add_rollout(self, rollout: Rollout, stage_size: int, iteration: int) -> int:
        """Offer every chunk of the finished episodes of one collection (before a group filter changes its mask);
        returns how many chunks were offered."""
        offered = 0
        for task, success, chunk, instruction in episode_chunks(rollout, stage_size, iteration):
            self.pool("success" if success else "failure", task).add(chunk, instruction, self.rng)
            offered += 1
        return offered

    def sizes(self, outcome: str) -> dict[str, int]:
        return {task: pool.size for task, pool in sorted(self.pools[outcome].items())}

    def sample_replay(self, chunks_per_step: int, steps: int, rng: np.random.Generator) -> dict[str, Any] | None:
        """``steps`` batches of ``chunks_per_step`` successful chunks, each with an equal share per task that has
        one (the remainder to tasks drawn without replacement), uniform with replacement within a task's pool.

        Returns None when no task has a success yet, else arrays with leading dims ``(steps, chunks_per_step)``:
        ``images`` {camera: uint8 (S, R, H, W, 3)}, ``state``, ``action``, ``action_mask``, and lists of lists
        ``instruction`` and ``task``.
        """
        tasks = [task for task, pool in sorted(self.pools["success"].items()) if pool.size > 0]
        if not tasks:
            return None
        picks: list[list[tuple[str, int]]] = []
        for _ in range(steps):
            counts = np.full(len(tasks), chunks_per_step // len(tasks))
            counts[rng.permutation(len(tasks))[: chunks_per_step % len(tasks)]] += 1
            step = []
            for task, count in zip(tasks, counts, strict=True):
                pool = self.pools["success"][task]
                step += [(task, int(slot)) for slot in rng.integers(0, pool.size, count)]
            picks.append(step)
        first = self.pools["success"][tasks[0]]

        def gather(key: str) -> np.ndarray:
            return np.stack([np.stack([self.pools["success"][task].arrays[key][slot] for task, slot in step])
                             for step in picks])  # fmt: skip

        cameras = [key.split("/", 1)[1] for key in first.arrays if key.startswith("images/")]
        return {
            "images": {camera: gather(f"images/{camera}") for camera in cameras},
            "state": gather("state"), "action": gather("action"), "action_mask": gather("action_mask"),
            "instruction": [[self.pools["success"][task].instructions[slot] for task, slot in step] for step in picks],
            "task": [[task for task, _ in step] for step in picks],
        }  # fmt: skip

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "capacity": {outcome: self.config.capacity_of(outcome) for outcome in OUTCOMES},
            "pools": {outcome: {task: pool.state_dict() for task, pool in pools.items()}
                      for outcome, pools in self.pools.items()},
            "rng": self.rng.bit_generator.state,
        }  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any], source: str = "the checkpoint") -> None:
        """Restore what :meth:`state_dict` saved.

        Raises:
            PoolStateError: the pools were saved with other capacities than ``trainer.task_pools`` now has.
        """
        for outcome in OUTCOMES:
            saved, wanted = int(state["capacity"][outcome]), self.config.capacity_of(outcome)
            if saved != wanted:
                key = "capacity" if outcome == "success" else "failure_capacity"
                raise PoolStateError(
                    f"{source} holds {outcome} pools of {saved} chunks per task but 'trainer.task_pools.{key}' gives "
                    f"{wanted}; resume with the run's own config, or start a new run_dir with "
                    "trainer.init_policy=<checkpoint>/policy"
                )
        self.pools = {outcome: {task: ChunkPool.from_state_dict(pool) for task, pool in state["pools"][outcome].items()}
                      for outcome in OUTCOMES}  # fmt: skip
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state["rng"]


def replay_tensors(replay: Mapping[str, Any]) -> dict[str, Any]:
    """:meth:`TaskPools.sample_replay`'s arrays as torch CPU tensors (the behaviour-cloning batch's types)."""
    return {
        "images": {camera: torch.from_numpy(frames) for camera, frames in replay["images"].items()},
        "state": torch.from_numpy(replay["state"]).float(),
        "action": torch.from_numpy(replay["action"]).float(),
        "action_mask": torch.from_numpy(replay["action_mask"]).bool(),
        "instruction": replay["instruction"],
    }


def regression_metrics(
    tasks: Sequence[str], success: Mapping[str, float], best: Mapping[str, float], threshold: float
) -> dict[str, float]:
    """Per task ``regression/<task>``: its best training success so far minus its current one (>= 0); and
    ``regression/tasks_regressed``: how many tasks lie more than ``threshold`` below their best, and
    ``regression/max``. Tasks without a training success yet are left out."""
    gaps = {task: max(float(best[task]) - float(success[task]), 0.0) for task in tasks if task in success and task in best}
    metrics = {f"regression/{task}": gap for task, gap in gaps.items()}
    metrics["regression/tasks_regressed"] = float(sum(gap > threshold for gap in gaps.values()))
    metrics["regression/max"] = max(gaps.values(), default=0.0)
    return metrics


def updated_best(best: Mapping[str, float], success: Mapping[str, float]) -> dict[str, float]:
    """Each task's best training success so far, after the moving averages ``success`` of this iteration."""
    return {task: max(float(best.get(task, value)), float(value)) for task, value in {**best, **success}.items()}
