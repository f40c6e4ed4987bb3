"""Collecting one rollout batch: env workers and a rollout worker, pipelined over stages.

With ``S`` pipeline stages, while the env workers step stage ``s`` the rollout worker
computes the actions of stage ``s + 1``, and each stage's step is queued at the env workers as
soon as its actions exist, behind the step they are running, so that they never wait for the
driver between two steps::

    act(0)
    for t in steps:
        for s in stages:
            wait act(s) -> step_async(s) -> wait the steps queued before it -> act(s + 1)

(with one stage, ``act(s + 1)`` needs the result of ``step(s)``: nothing overlaps.) The rollout
worker's calls come in the same order either way, so the numbers do not depend on ``S``'s schedule.

The algorithm's registry entry says how (its :class:`~vla_rl.algos.algorithms.Collection`):

- ``continuing`` (PPO): every env resets at the start of the iteration (seeded from the run
  seed, the iteration and the env index), then runs ``num_steps`` chunks with auto-reset.
  Each iteration therefore starts from a known state, which makes resumed runs exact.
- ``episodes`` (GRPO): one episode per env; envs come in groups of ``group_size`` that share
  their task and initial state (``reset(options={"init_state": ...})``); the rollout ends
  when every episode has ended or after ``num_steps`` chunks; steps after an end are masked.

The result is a ``TensorDict`` with batch dims ``[num_envs, num_steps]`` in the layout of
:mod:`vla_rl.algos.batch`, rows ordered stage by stage.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
import torch
from tensordict import TensorDict

from vla_rl.algos.advantages import next_values_from
from vla_rl.algos.algorithms import CONTINUING, Collection
from vla_rl.runtime.profiling import PhaseTimer
from vla_rl.runtime.seeds import derived_seed
from vla_rl.workers.env_group import EnvWorkerGroup, concat_observations

NOT_EXTRAS = ("log_prob", "value")


@dataclass
class Rollout:
    batch: TensorDict  # [N, T]
    instructions: list[str]  # instruction_id -> text
    episodes: list[dict[str, Any]] = field(default_factory=list)  # finished episodes, in the order they ended
    env_steps: int = 0
    success: torch.Tensor | None = None  # (N,) per-row success (episodes mode)
    # with a rollout dump due: the finished episodes of every collection, with their chunks (episodes_with_chunks)
    dump_episodes: list[dict[str, Any]] = field(default_factory=list)


def episodes_from_reset(episodes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The finished episodes that began at their env's reset at the start of the rollout: one per env.

    Success rates, returns and lengths of the policy's episodes are measured on these alone. Every env resets
    when a rollout starts, so its first episode is a fair draw. The episodes after it are not: in a window of
    fixed length a quick episode leaves room for more, a slow one does not, so they overrepresent quick
    episodes, which in manipulation are mostly successes. (A policy that succeeds 80% of the time, in 80
    steps, and fails in 250 finishes about 91% successes in a 252-step window.) Episodes without the
    ``from_reset`` mark count as from a reset.
    """
    return [episode for episode in episodes if episode.get("from_reset", True)]


def finished_episode_steps(rollout: Rollout, stage_size: int) -> Iterator[tuple[int, np.ndarray, dict[str, Any]]]:
    """``(row, steps, record)`` for every finished episode of one collection, env by env (batch row), in time order.

    An episode is the run of valid steps (``mask``) of a batch row that ends at a step flagged ``terminated``
    or ``truncated``; steps after the row's last end belong to an episode the rollout window cut. ``steps``:
    its chunk steps (indices into the row); ``record``: its entry in ``rollout.episodes`` (row
    ``stage * stage_size + env_index``, in the order they ended), with its length in env steps, success, task
    and instruction. Call it before anything changes the batch's ``mask``.

    Raises:
        RuntimeError: the batch's episode ends and the env workers' records of finished episodes disagree.
    """
    batch = rollout.batch
    mask = batch["mask"].numpy()
    ends = (batch["terminated"] | batch["truncated"]).numpy() & mask
    records: dict[int, deque] = {}
    for record in rollout.episodes:
        records.setdefault(int(record["stage"]) * stage_size + int(record["env_index"]), deque()).append(record)
    for row in range(mask.shape[0]):
        start = 0
        for end in np.flatnonzero(ends[row]):
            steps = start + np.flatnonzero(mask[row, start : end + 1])
            start = end + 1
            if not records.get(row):
                raise RuntimeError(f"batch row {row} ends an episode at step {end} that no env worker reported")
            record = records[row].popleft()
            if bool(record["success"]) != bool(batch["success"][row, end]):
                raise RuntimeError(f"batch row {row}, step {end}: the batch's success and the env's record disagree")
            yield row, steps, record
    left = {row: len(queue) for row, queue in records.items() if queue}
    if left:
        raise RuntimeError(f"finished episodes reported by the env workers but not ended in the batch (row: count): {left}")


def episodes_with_chunks(rollout: Rollout, stage_size: int) -> list[dict[str, Any]]:
    """The finished episodes of one collection with their chunks (:func:`finished_episode_steps`).

    Returns dicts: ``actions (C_e, H, A)`` (env units), ``rewards (C_e,)``, ``success``, ``length``, ``env`` (row),
    ``from_reset``, ``instruction``, ``task`` (:func:`vla_rl.logging.rollout_dump.write_rollout_dump`).

    Raises:
        RuntimeError: the batch's episode ends and the env workers' records of finished episodes disagree.
    """
    chunks, rewards = rollout.batch["action_chunk"].numpy(), rollout.batch["reward"].numpy()
    return [
        {"actions": chunks[row, steps], "rewards": rewards[row, steps], "success": bool(record["success"]),
         "length": int(record["length"]), "env": row, "from_reset": bool(record.get("from_reset", True)),
         "instruction": str(record["instruction"]), "task": str(record.get("task", ""))}
        for row, steps, record in finished_episode_steps(rollout, stage_size)
    ]  # fmt: skip


def rows_without_episode_end(batch: TensorDict) -> int:
    """How many env rows ``[N, T]`` saw no episode end (neither terminated nor truncated) in the rollout.

    In ``continuing`` mode a row without an end means the rollout window (``num_steps`` chunks) is
    shorter than that episode: the learner never sees how it finishes, nor its success reward.
    """
    ended = (batch["terminated"] | batch["truncated"]) & batch["mask"]
    return int((~ended.any(dim=1)).sum())


def _still_running(result: Any) -> np.ndarray:
    return result.active & ~(result.terminated | result.truncated)


class RolloutCollector:
    """Drives ``env_group`` with the policy of ``rollout_worker`` (a Ray actor handle)."""

    def __init__(self, env_group: EnvWorkerGroup, rollout_worker: Any, tasks: tuple[str, ...]):
        self.env_group = env_group
        self.rollout_worker = rollout_worker
        self.tasks = tasks
        self.timer = PhaseTimer()  # where the driver waits: the rollout profile (profile_rollout)

    @property
    def num_stages(self) -> int:
        return self.env_group.num_stages

    def initial_env_tasks(self, group_size: int = 1) -> list[str]:
        """A first task for every env (global env order, stage by stage), ``tasks[group % K]`` per group of
        ``group_size`` envs: the layout the GRPO path resets to, and with one env worker the one the envs were
        built with (with several, the first task switch moves a few more envs; nothing else depends on it)."""
        count = self.env_group.num_stages * self.env_group.stage_size
        return [str(self.tasks[(env // group_size) % len(self.tasks)]) for env in range(count)]

    def _reset_env_stage(
        self, env_stage: int, collection: Collection, seed: int, iteration: int, attempt: int, group_size: int,
        env_tasks: Sequence[str] | None,
    ) -> dict:  # fmt: skip
        size = self.env_group.stage_size
        first = env_stage * size
        env_stage_tasks = None if env_tasks is None else list(env_tasks[first : first + size])
        if not collection.grouped_initial_states:
            seeds = [derived_seed(seed, iteration, attempt, first + j) for j in range(size)]
            return self.env_group.reset(env_stage, seeds=seeds, tasks=env_stage_tasks)
        if size % group_size:
            raise ValueError(f"a stage holds {size} envs, not a multiple of group_size={group_size}")
        groups = [(first + j) // group_size for j in range(size)]
        seeds = [derived_seed(seed, iteration, attempt, "group", g) for g in groups]
        tasks = env_stage_tasks or [self.tasks[g % len(self.tasks)] for g in groups]
        self.env_group.reset(env_stage, seeds=seeds, tasks=tasks)
        states = self.env_group.get_attr(env_stage, "init_states")
        leaders = [states[(g * group_size) - first] for g in groups]
        return self.env_group.reset(env_stage, seeds=seeds, init_states=leaders, tasks=tasks)

    def collect(
        self, num_steps: int, seed: int, iteration: int, collection: Collection = CONTINUING, group_size: int = 1,
        attempt: int = 0, deterministic: bool = False, env_tasks: Sequence[str] | None = None,
    ) -> Rollout:  # fmt: skip
        """Run ``num_steps`` chunk steps of every env (``one_episode_per_env``: until every episode has ended).

        ``env_tasks``: the task of every env (global env order, stage by stage; a GRPO group's envs share it);
        None: each env keeps the task it runs.
        """
        stages = self.num_stages
        act = self.rollout_worker.act.remote
        # A Ray actor runs one caller's calls in order: the seed is set before the first act.
        seeded = self.rollout_worker.set_seed.remote(derived_seed(seed, iteration, attempt, "policy"))
        timer = self.timer
        with timer.phase("reset_envs"):
            observation = [self._reset_env_stage(0, collection, seed, iteration, attempt, group_size, env_tasks)]
            pending_act = {0: act(observation[0], deterministic)}  # overlaps the reset of the other stages
            observation += [self._reset_env_stage(s, collection, seed, iteration, attempt, group_size, env_tasks)
                            for s in range(1, stages)]  # fmt: skip
            ray.get(seeded)
        records: list[list[dict]] = [[] for _ in range(stages)]
        episodes: list[dict] = []
        ended_envs: set[tuple[int, int]] = set()  # (stage, env index) of the envs whose reset episode has ended
        queued: deque = deque()  # steps sent to the env workers, oldest first

        def finish_oldest() -> None:
            pending, actions, extras = queued.popleft()
            s = pending.env_stage
            with timer.phase(f"stage{s}/wait_for_env_step"):
                result = self.env_group.step_wait(pending)
            records[s].append({"observation": observation[s], "actions": actions, "extras": extras, "result": result})
            for episode in result.finished_episodes:
                env = (s, int(episode["env_index"]))
                episodes.append({**episode, "stage": s, "from_reset": env not in ended_envs})
                ended_envs.add(env)
            observation[s] = result.observation

        for t in range(num_steps):
            for s in range(stages):
                with timer.phase(f"stage{s}/wait_for_actions"):
                    actions, extras = ray.get(pending_act.pop(s))
                queued.append((self.env_group.step_async(s, actions), actions, extras))
                following = (s + 1) % stages
                # Keep the newest step queued; the following stage's own step must be done before it acts.
                while len(queued) > 1 or (queued and queued[0][0].env_stage == following):
                    finish_oldest()
                if not (t == num_steps - 1 and following == 0):
                    pending_act[following] = act(observation[following], deterministic)
            if collection.one_episode_per_env:
                while queued:
                    finish_oldest()
                if not any(_still_running(r[-1]["result"]).any() for r in records):
                    break  # every episode has ended
        while queued:
            finish_oldest()
        with timer.phase("assemble_batch"):
            return self._assemble(records, observation, episodes, collection, group_size)

    def collect_profiled(self, num_steps: int, seed: int, iteration: int, collection: Collection = CONTINUING,
                         group_size: int = 1, attempt: int = 0,
                         env_tasks: Sequence[str] | None = None) -> tuple[Rollout, dict]:
        """:meth:`collect`, and where its time went: the driver's waits, each env worker's stepping,
        rendering and resets per stage, the rollout worker's inference per policy module (each denoising
        step is one call of the head's network). Seconds and calls per phase; ``wall_s`` for the rollout."""  # fmt: skip
        self.timer.pop()
        self.env_group.call_all("timings")
        ray.get(self.rollout_worker.timings.remote(forward_details=True))
        started = time.perf_counter()
        rollout = self.collect(num_steps, seed, iteration, collection, group_size, attempt, env_tasks=env_tasks)
        wall = time.perf_counter() - started
        workers = self.env_group.call_all("timings")
        return rollout, {
            "wall_s": wall,
            "env_steps": rollout.env_steps,
            "driver": self.timer.pop(),
            "env_workers": {f"env_worker{index}": table for index, table in enumerate(workers)},
            "rollout_worker": ray.get(self.rollout_worker.timings.remote()),
        }

    def _assemble(self, records, final_observation, episodes, collection: Collection, group_size) -> Rollout:
        steps = len(records[0])
        vocabulary: dict[str, int] = {}

        def per_step(getter) -> np.ndarray:
            # (stages, T, stage_size, ...) -> (N, T, ...)
            stacked = np.stack([np.stack([getter(r) for r in env_stage]) for env_stage in records])
            stacked = np.swapaxes(stacked, 1, 2)
            return stacked.reshape(-1, steps, *stacked.shape[3:])

        def ids(texts: list[str]) -> np.ndarray:
            return np.array([vocabulary.setdefault(text, len(vocabulary)) for text in texts], np.int64)

        first_obs = records[0][0]["observation"]
        images = {cam: torch.from_numpy(per_step(lambda r, c=cam: r["observation"]["images"][c])) for cam in first_obs["images"]}
        observation = TensorDict(
            {
                "images": images,
                "state": torch.from_numpy(per_step(lambda r: r["observation"]["state"])),
                "instruction_id": torch.from_numpy(per_step(lambda r: ids(r["observation"]["instruction"]))),
            },
            batch_size=[images[next(iter(images))].shape[0], steps],
        )
        extras_keys = [k for k in records[0][0]["extras"] if k not in NOT_EXTRAS]
        extras = {k: torch.from_numpy(per_step(lambda r, k=k: r["extras"][k])) for k in extras_keys}
        result = lambda name: torch.from_numpy(per_step(lambda r: getattr(r["result"], name)))  # noqa: E731
        mask = result("active")
        terminated, truncated = result("terminated") & mask, result("truncated") & mask
        values = torch.from_numpy(per_step(lambda r: r["extras"]["value"])).float()
        final_values, last_values = self._bootstrap_values(records, final_observation, truncated)
        batch = TensorDict(
            {
                "observation": observation,
                "action_chunk": torch.from_numpy(per_step(lambda r: r["actions"])).float(),
                "reward": result("reward").float() * mask,
                "terminated": terminated,
                "truncated": truncated,
                "mask": mask,
                "success": result("success") & mask,
                "rollout_log_prob": torch.from_numpy(per_step(lambda r: r["extras"]["log_prob"])).float(),
                "extras": TensorDict(extras, batch_size=mask.shape),
                "value": values,
                "next_value": next_values_from(values, last_values, final_values, terminated, truncated),
            },
            batch_size=mask.shape,
        )
        num_envs = mask.shape[0]
        group_ids = torch.arange(num_envs) // max(group_size, 1)
        batch["group_id"] = group_ids.reshape(-1, 1).expand(num_envs, steps).clone()
        env_steps = int(per_step(lambda r: r["result"].steps_executed).sum())
        success = batch["success"].any(dim=1) if collection.one_episode_per_env else None
        instructions = [text for text, _ in sorted(vocabulary.items(), key=lambda item: item[1])]
        return Rollout(batch, instructions, episodes, env_steps, success)

    def _bootstrap_values(self, records, final_observation, truncated) -> tuple[torch.Tensor, torch.Tensor]:
        """Critic values of the final observations of truncated episodes ``(N, T)`` and after the rollout ``(N,)``."""
        steps = len(records[0])
        size = self.env_group.stage_size
        final_values = torch.zeros(truncated.shape)
        wanted = [(s, t) for s in range(self.num_stages) for t in range(steps)
                  if truncated[s * size : (s + 1) * size, t].any()]  # fmt: skip
        observations = [records[s][t]["result"].final_observation for s, t in wanted] + list(final_observation)
        values = ray.get(self.rollout_worker.value.remote(concat_observations(observations)))
        values = torch.from_numpy(np.array(values)).float()
        for index, (s, t) in enumerate(wanted):
            final_values[s * size : (s + 1) * size, t] = values[index * size : (index + 1) * size]
        last_values = values[len(wanted) * size :]
        return final_values, last_values


def rollout_profile_table(profile: dict) -> str:
    """The profile of :meth:`RolloutCollector.collect_profiled` as Markdown: one row per process and phase,
    its seconds, share of the rollout's wall time, calls and milliseconds per call."""
    wall = profile["wall_s"]
    lines = [
        f"Rollout: {wall:.3f} s wall, {profile['env_steps']} env steps ({profile['env_steps'] / wall:.0f} env steps/s).",
        "",
        "| process | phase | seconds | share of wall | calls | ms per call |",
        "|---|---|---|---|---|---|",
    ]
    processes = {"driver": profile["driver"], **profile["env_workers"], "rollout_worker": profile["rollout_worker"]}
    for process, table in processes.items():
        for phase, entry in sorted(table.items()):
            seconds, calls = entry["seconds"], max(int(entry["calls"]), 1)
            lines.append(f"| {process} | {phase} | {seconds:.3f} | {seconds / wall:.0%} | {int(entry['calls'])} | "
                         f"{1000 * seconds / calls:.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"
