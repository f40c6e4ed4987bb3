"""Which task each env runs in an iteration of multi-task RL (``trainer.task_sampling``).

``uniform`` (the default) keeps every env on the task it was built with: env ``j`` runs ``tasks[j % K]``,
so each of the K tasks gets the same share of the env steps, solved or not. ``failure`` gives the envs
(GRPO: the groups) of the next iteration to the tasks in proportion to how often they fail in training,
``max(1 - success, floor)``, where ``success`` is an exponential moving average of each task's training
success over the episodes of past iterations that began at a reset (the trainer passes
``rollout.episodes_from_reset``: the later episodes of a window overrepresent quick successes). A task the policy has solved keeps ``floor``'s
share, so that fine-tuning the shared network for the others cannot make it forget that task unseen;
every task keeps at least ``min_envs_per_task`` envs, and a task once solved (its moving average reached
``solved_threshold``) keeps at least the weight ``solved_floor`` from then on. The idea is that of prioritised level replay
(Jiang et al. 2021, arXiv 2010.03934) and of the task schedules of multi-task RL, here in its simplest form.

Everything here is a pure function of its arguments; the trainer keeps the state (the moving averages and
the last assignment) in its checkpoint, so a resumed run assigns what an uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from contract.config_reader import check_types, require

MODES = ("uniform", "failure")


@dataclass
class TaskSamplingConfig:
    """``trainer.task_sampling``: how envs are shared among the tasks of a multi-task run.

    - ``mode``: "uniform" (every env keeps its task) or "failure" (envs in proportion to the failure rate).
    - ``floor``: the smallest weight of a task, however often it succeeds (0 < floor <= 1).
    - ``decay``: weight of the past in the moving average of a task's training success (0 <= decay < 1).
    - ``min_envs_per_task``: envs (GRPO: groups) every task keeps in every iteration.
    - ``solved_threshold``: a task counts as solved once its moving average of training success has reached this.
    - ``solved_floor``: the smallest weight of a solved task, from then on, however often it succeeds or fails
      now (0: no more than ``floor``); e.g. 0.5 keeps a solved task at half the share of a task that always fails.
    """

    mode: str = "uniform"
    floor: float = 0.1
    decay: float = 0.8
    min_envs_per_task: int = 1
    solved_threshold: float = 0.9
    solved_floor: float = 0.0

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "mode", choices=MODES)
        require(self, "floor", low=0, high=1, low_open=True)
        require(self, "decay", low=0, high=1, high_open=True)
        require(self, "min_envs_per_task", low=0)
        require(self, "solved_threshold", low=0, high=1, low_open=True)
        require(self, "solved_floor", low=0, high=1)


def updated_success(
    average: Mapping[str, float], episodes: Iterable[Mapping[str, Any]], decay: float
) -> dict[str, float]:
    """The moving average of each task's training success after one iteration's finished ``episodes``.

    A task seen for the first time starts at its mean success this iteration; a task with no finished
    episode keeps its average. ``episodes``: dicts with ``task`` and ``success``.
    """
    outcomes: dict[str, list[float]] = {}
    for episode in episodes:
        task = episode.get("task")
        if task:
            outcomes.setdefault(str(task), []).append(float(episode["success"]))
    result = dict(average)
    for task, values in outcomes.items():
        mean = float(np.mean(values))
        result[task] = mean if task not in result else decay * result[task] + (1 - decay) * mean
    return result


def failure_weights(
    tasks: Sequence[str], success: Mapping[str, float], floor: float, solved: Collection[str] = (),
    solved_floor: float = 0.0,
) -> np.ndarray:  # fmt: skip
    """``max(1 - success, floor)`` per task, in the order of ``tasks``, and at least ``solved_floor`` for the tasks
    in ``solved``; a task never seen weighs 1. Shape (K,)."""
    return np.array([max(1.0 - float(success.get(task, 0.0)), floor, solved_floor if task in solved else 0.0)
                     for task in tasks], np.float64)  # fmt: skip


def solved_tasks(best_success: Mapping[str, float], threshold: float) -> set[str]:
    """The tasks whose best moving average of training success so far has reached ``threshold``."""
    return {task for task, best in best_success.items() if float(best) >= threshold}


def apportion(weights: Sequence[float], total: int, minimum: int = 0) -> list[int]:
    """Split ``total`` slots among len(weights) tasks: ``minimum`` each, the rest in proportion to ``weights``
    by the largest-remainder method (ties to the earlier task). The counts sum to ``total``.

    Raises:
        ValueError: ``total`` cannot give every task ``minimum`` slots, or a weight is negative or all are 0.
    """
    weights = np.asarray(weights, np.float64)
    count = len(weights)
    if total < minimum * count:
        raise ValueError(
            f"{total} envs cannot give each of the {count} tasks trainer.task_sampling.min_envs_per_task={minimum}; "
            "lower it or add envs (trainer.envs_per_stage)"
        )
    if (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"task weights must be >= 0 and not all 0, got {weights.tolist()}")
    free = total - minimum * count
    exact = free * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    remainders = exact - counts
    order = sorted(range(count), key=lambda i: (-remainders[i], i))
    for i in order[: free - int(counts.sum())]:
        counts[i] += 1
    return [int(c) + minimum for c in counts]


def assign_slots(previous: Sequence[str], tasks: Sequence[str], counts: Sequence[int]) -> list[str]:
    """A task for each slot, ``counts[k]`` slots of ``tasks[k]``, moving as few slots off their ``previous``
    task as possible (a task switch can rebuild an env's simulation): slots keep their task while it has room,
    then the freed slots go, in slot order, to the tasks still short. Shape: len(previous) == sum(counts)."""
    if len(previous) != sum(counts):
        raise ValueError(f"{len(previous)} slots but the counts sum to {sum(counts)}")
    room = dict(zip(tasks, counts, strict=True))
    assigned: list[str | None] = [None] * len(previous)
    for slot, task in enumerate(previous):
        if room.get(task, 0) > 0:
            assigned[slot] = task
            room[task] -= 1
    short = [task for task in tasks for _ in range(room[task])]
    for slot in range(len(assigned)):
        if assigned[slot] is None:
            assigned[slot] = short.pop(0)
    return [str(task) for task in assigned]


def next_assignment(
    config: TaskSamplingConfig, tasks: Sequence[str], success: Mapping[str, float], previous: Sequence[str],
    group_size: int = 1, best_success: Mapping[str, float] | None = None,
) -> list[str]:  # fmt: skip
    """The task of every env for the next iteration (len(previous) envs; GRPO groups of ``group_size`` envs
    share one task, so the groups are apportioned and each group's task repeated). ``best_success``: each
    task's best moving average so far, which says the solved tasks that ``solved_floor`` holds up."""
    groups = [previous[g] for g in range(0, len(previous), group_size)]
    if config.mode == "uniform":
        per_group = groups
    else:
        solved = solved_tasks(best_success or {}, config.solved_threshold)
        weights = failure_weights(tasks, success, config.floor, solved, config.solved_floor)
        counts = apportion(weights, len(groups), config.min_envs_per_task)
        per_group = assign_slots(groups, tasks, counts)
    return [task for task in per_group for _ in range(group_size)]
