"""The fit loop: a short sequence of named phases per iteration.

    sync weights -> rollout -> advantages -> update -> (evaluate) -> (checkpoint) -> log

PPO (with critic, continuing envs) and GRPO (critic-free, groups of envs sharing an initial
state) are chosen by ``algo.name``; both work with every action head. The worker groups
(env workers, one rollout worker, FSDP2 actor ranks) are Ray actors built by
:class:`vla_rl.stages.rl.experiment.Experiment`; this module only orchestrates them.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import ray
import torch
from tensordict import TensorDict

from vla_rl.algos import compute_advantages, valid_steps
from vla_rl.algos.dynamic_sampling import DynamicSamplingAccumulator
from vla_rl.algos.groups import filter_groups_by_success_rate
from vla_rl.logging.console import ConsoleTracker
from vla_rl.logging.rollout_dump import RolloutDumper
from vla_rl.runtime import checkpoint
from vla_rl.runtime.files import write_json_atomic
from vla_rl.runtime.profiling import PhaseTimer, write_timing_table
from vla_rl.runtime.seeds import derived_seed
from vla_rl.stages.rl import task_sampling
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig
from vla_rl.stages.rl.rollout import (
    Rollout,
    RolloutCollector,
    episodes_from_reset,
    episodes_with_chunks,
    rollout_profile_table,
    rows_without_episode_end,
)
from vla_rl.stages.rl.task_pools import TaskPools, regression_metrics, replay_tensors, updated_best
from vla_rl.workers.actor_group import ActorGroup
from vla_rl.workers.success_replay import SuccessReplay

logger = logging.getLogger(__name__)

#: The task pools of a checkpoint (trainer.task_pools), beside trainer_state.pt.
POOLS_FILE = "task_pools.pt"


class NonFiniteLossError(FloatingPointError):
    """An update's loss or gradient norm is NaN or infinite: the run stops (exit status 1) before it saves a policy."""


def check_finite_update(iteration: int, metrics: dict[str, float]) -> None:
    """Raise :class:`NonFiniteLossError` naming each loss (``loss/...``) or gradient norm of ``metrics`` that is not
    finite. The envs' states and rewards were checked where the env workers received them."""
    bad = {key: value for key, value in metrics.items()
           if (key.startswith("loss/") or "grad_norm" in key) and not math.isfinite(float(value))}  # fmt: skip
    if bad:
        listed = ", ".join(f"{key} = {value}" for key, value in sorted(bad.items()))
        raise NonFiniteLossError(
            f"RL iteration {iteration + 1}: {listed}. The env's states and rewards were finite (they are checked as the "
            "env workers receive them): look at the policy (its log-probs and values on the rollout, `vla-rl policies "
            "check`) and the learning rates (algo.optim.lr, algo.optim.critic_lr)"
        )


def _first_line(error: BaseException) -> str:
    """The innermost useful line of an error (a Ray task error wraps the worker's traceback)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    keyed = [line for line in lines if "key" in line.lower() or "Error" in line]
    return (keyed[-1] if keyed else lines[-1] if lines else type(error).__name__)[:500]


def iterations_left(
    config: TrainerConfig, iteration: int, env_steps: int, done: int, done_env_steps: int, elapsed_s: float
) -> int:
    """How many more iterations ``fit`` will run: the first of ``trainer.iterations``, ``max_env_steps`` and
    ``time_limit_minutes`` to stop it, the last two judged by the mean of the ``done`` iterations this ``fit`` has
    run (``done_env_steps`` env steps in ``elapsed_s`` seconds). For the progress bar's ETA only.
    """
    left = max(config.iterations - iteration, 0)
    if done == 0:
        return left
    if config.max_env_steps is not None and done_env_steps > 0:
        left = min(left, int(np.ceil(max(config.max_env_steps - env_steps, 0) * done / done_env_steps)))
    if config.time_limit_minutes is not None and elapsed_s > 0:
        left = min(left, int(max(60 * config.time_limit_minutes - elapsed_s, 0) * done / elapsed_s))
    return left


@dataclass
class TrainerState:
    """What a checkpoint needs besides weights and optimizer: where the run stands."""

    iteration: int = 0  # the next iteration to run
    env_steps: int = 0
    weights_version: int = 0
    env_restarts: int = 0
    # trainer.task_sampling=failure or trainer.task_pools: each task's training success (moving average);
    # failure sampling: the last iteration's task of every env (empty otherwise)
    task_success: dict[str, float] = field(default_factory=dict)
    env_tasks: list[str] = field(default_factory=list)
    # each task's best moving average of training success so far (tracked with task_success)
    task_best_success: dict[str, float] = field(default_factory=dict)


class Trainer:
    """Runs ``trainer.iterations`` iterations; see the module docstring."""

    def __init__(
        self, trainer: TrainerConfig, algo: AlgoConfig, collector: RolloutCollector, actors: ActorGroup,
        rollout_worker: Any, tracker: Any, run_dir: Path, seed: int, evaluate: Any = None, export: Any = None,
    ):  # fmt: skip
        self.config, self.algo = trainer, algo
        self.collector, self.actors, self.rollout_worker = collector, actors, rollout_worker
        self.tracker, self.run_dir, self.seed = tracker, Path(run_dir), seed
        self.evaluate_fn, self.export_fn = evaluate, export
        self.checkpoint_root = self.run_dir / "checkpoints"
        self.dumper = RolloutDumper(self.run_dir, trainer.dump_rollouts_every)
        self.state = TrainerState()
        # trainer.task_pools: the chunks of successful and failed episodes per task (saved with each checkpoint)
        self.pools = TaskPools(trainer.task_pools, derived_seed(seed, "task_pools")) if trainer.task_pools.enabled else None
        self.synced_version = -1
        self.timing_rows: list[dict[str, float]] = []
        self._warned_window = False
        self.stop_reason: str | None = None  # why fit() ended before trainer.iterations: "time limit", "env-step budget"

    # ------------------------------------------------------------------ the loop
    def fit(self) -> TrainerState:
        if self.config.resume:
            self.resume()
        self.collector.env_group.restarts = self.state.env_restarts  # counted over the run, not the process
        started, last_iteration_s = time.monotonic(), None
        first_iteration, first_env_steps = self.state.iteration, self.state.env_steps
        console = self.tracker.find(ConsoleTracker) if self.tracker is not None else None
        bar = console.progress("rl", self.config.iterations - self.state.iteration) if console else None
        while self.state.iteration < self.config.iterations:
            elapsed_s = time.monotonic() - started
            if self._out_of_time(elapsed_s, last_iteration_s):
                self._stop_for_time_limit(elapsed_s, last_iteration_s)
                break
            budget = self.config.max_env_steps
            if budget is not None and self.state.env_steps >= budget:
                self.stop_reason = "env-step budget"
                self._checkpoint_where_it_stands()
                logger.warning("trainer.max_env_steps=%d: stopping after iteration %d of %d (%d env steps)",
                               budget, self.state.iteration, self.config.iterations, self.state.env_steps)  # fmt: skip
                break
            iteration_started = time.monotonic()
            iteration = self.state.iteration
            timer = PhaseTimer()
            profiling = iteration in self.config.profile_iterations
            if profiling:
                self._start_profiling(iteration)
            with timer.phase("sync_weights"):
                self.sync_weights()
            with timer.phase("rollout"):
                rollout = self.collect_rollout(iteration, self._profile_folder(iteration) if profiling else None)
            if self.dumper.due(iteration + 1):
                with timer.phase("dump_rollouts"):
                    self.dumper.maybe_dump(iteration + 1, rollout.dump_episodes)
            with timer.phase("advantages"):
                batch, advantage_metrics = self.compute_advantages(rollout)
            update_metrics = {"train/skipped_update": 1.0}
            if batch is not None:  # None: every group was filtered out (all succeeded or all failed)
                with timer.phase("update"):
                    train_policy = iteration >= self.algo.critic_warmup_iterations
                    replay = self.success_replay(iteration) if train_policy else None
                    update_metrics = self.actors.update(
                        batch, rollout.instructions, derived_seed(self.seed, iteration, "update"), train_policy,
                        **({} if replay is None else {"replay": replay}),
                    )
                check_finite_update(iteration, update_metrics)
                self.state.weights_version += 1
            self.state.env_steps += rollout.env_steps
            self.state.iteration += 1
            if self.tracks_tasks:
                self.update_task_success(rollout.episodes)
            eval_metrics = {}
            if self.config.eval_every and self.state.iteration % self.config.eval_every == 0:
                with timer.phase("evaluate"):
                    eval_metrics = self.evaluate(self.state.iteration)
            if self.config.checkpoint_every and (
                self.state.iteration % self.config.checkpoint_every == 0 or self.state.iteration == self.config.iterations
            ):
                with timer.phase("checkpoint"):
                    self.save_checkpoint()
            if profiling:
                self._stop_profiling(iteration, timer)
            if bar is not None:
                done = self.state.iteration - first_iteration
                left = iterations_left(self.config, self.state.iteration, self.state.env_steps, done,
                                       self.state.env_steps - first_env_steps, time.monotonic() - started)  # fmt: skip
                bar.set_total(done + left)
                bar.advance()
            self.log(iteration, rollout, {**advantage_metrics, **update_metrics}, eval_metrics, timer)
            last_iteration_s = time.monotonic() - iteration_started
        return self.state

    def _out_of_time(self, elapsed_s: float, last_iteration_s: float | None) -> bool:
        """Whether the next iteration would end past ``time_limit_minutes``, judged by the last one's duration.

        ``last_iteration_s`` is None before the first iteration of this ``fit``: that one always runs.
        """
        limit = self.config.time_limit_minutes
        return limit is not None and last_iteration_s is not None and elapsed_s + last_iteration_s > 60 * limit

    def _stop_for_time_limit(self, elapsed_s: float, last_iteration_s: float) -> None:
        """Checkpoint where the run stands (unless that checkpoint exists) and say why it stops."""
        self.stop_reason = "time limit"
        self._checkpoint_where_it_stands()
        logger.warning(
            "trainer.time_limit_minutes=%g: stopping after iteration %d of %d (%.1f min of RL; the last iteration "
            "took %.1f s); trainer.resume=true continues from its checkpoint",
            self.config.time_limit_minutes, self.state.iteration, self.config.iterations, elapsed_s / 60,
            last_iteration_s,
        )  # fmt: skip

    def _checkpoint_where_it_stands(self) -> None:
        """Checkpoint the current iteration (unless that checkpoint exists), so that ``resume`` continues here."""
        latest = checkpoint.latest_checkpoint(self.checkpoint_root)
        if self.config.checkpoint_every and (latest is None or latest.name != checkpoint.checkpoint_name(self.state.iteration)):
            self.save_checkpoint()

    # ------------------------------------------------------------------ phases
    def sync_weights(self) -> None:
        """Push the actor's weights to the rollout worker, unless it already has this version: all of them the
        first time, then only those training changes (a frozen backbone travels once; weight_sync.py)."""
        if self.synced_version == self.state.weights_version:
            return
        changing_only = self.synced_version >= 0
        weights = ray.put(self.actors.full_weights(changing_only))
        ray.get(self.rollout_worker.set_weights.remote(weights, self.state.weights_version, changing_only))
        self.synced_version = self.state.weights_version

    def collect_rollout(self, iteration: int, profile_folder: Path | None = None) -> Rollout:
        """The iteration's rollout (with dynamic sampling: several); with ``profile_folder``, the first one's
        profile goes to ``rollout_profile.json`` and ``rollout_profile.md`` there."""
        algo = self.algo
        steps, collection = self.config.rollout_steps, algo.collection
        env_tasks = self.next_env_tasks()
        dumped: list[dict[str, Any]] = []  # every collection's finished episodes, when a rollout dump is due

        def collect(attempt: int) -> Rollout:
            if profile_folder is None or attempt:
                rollout = self.collector.collect(steps, self.seed, iteration, collection, algo.group_size, attempt,
                                                 env_tasks=env_tasks)  # fmt: skip
            else:
                rollout, profile = self.collector.collect_profiled(steps, self.seed, iteration, collection,
                                                                   algo.group_size, env_tasks=env_tasks)  # fmt: skip
                profile_folder.mkdir(parents=True, exist_ok=True)
                write_json_atomic(profile_folder / "rollout_profile.json", profile)
                (profile_folder / "rollout_profile.md").write_text(rollout_profile_table(profile))
            if self.dumper.due(iteration + 1):
                dumped.extend(episodes_with_chunks(rollout, self.collector.env_group.stage_size))
            if self.pools is not None:
                self.pools.add_rollout(rollout, self.collector.env_group.stage_size, iteration)
            return rollout

        if not algo.dynamic_sampling:
            rollout = collect(0)
            if algo.filter_groups and collection.grouped_initial_states:
                keep = filter_groups_by_success_rate(
                    rollout.success, rollout.batch["group_id"][:, 0], algo.min_success_rate, algo.max_success_rate
                )
                rollout.batch["mask"] &= keep.reshape(-1, 1)
            rollout.dump_episodes = dumped
            return rollout
        accumulator = DynamicSamplingAccumulator(
            self.config.num_envs // algo.group_size, algo.max_sampling_attempts, algo.min_success_rate,
            algo.max_success_rate,
        )  # fmt: skip
        rollouts, instructions = [], []
        while accumulator.can_collect:
            rollout = collect(accumulator.attempts)
            rollouts.append(rollout)
            # instruction ids are per rollout: shift them into one vocabulary shared by the merged batch
            batch = rollout.batch.clone()
            batch["observation", "instruction_id"] += len(instructions)
            instructions.extend(rollout.instructions)
            accumulator.add(batch, rollout.success)
        episodes = [e for r in rollouts for e in r.episodes]
        return Rollout(accumulator.result(), instructions, episodes, sum(r.env_steps for r in rollouts),
                       dump_episodes=dumped)

    def update_task_success(self, episodes: list[dict[str, Any]]) -> None:
        """Fold an iteration's finished episodes into each task's moving average of training success
        (those from a reset only: :func:`~vla_rl.stages.rl.rollout.episodes_from_reset`)."""
        self.state.task_success = task_sampling.updated_success(
            self.state.task_success, episodes_from_reset(episodes), self.config.task_sampling.decay
        )
        self.state.task_best_success = updated_best(self.state.task_best_success, self.state.task_success)

    @property
    def tracks_tasks(self) -> bool:
        """Whether this run keeps each task's moving average of training success: for failure-rate sampling, or
        for the regression metrics that come with the task pools."""
        return self.samples_tasks or self.pools is not None

    def success_replay(self, iteration: int) -> SuccessReplay | None:
        """The success replay of this iteration's update (``algo.success_replay_weight``): one batch of chunks from
        the success pools per optimizer step, drawn from a generator derived from the run seed and the iteration;
        None when the replay is off or no task has succeeded yet."""
        if self.pools is None or self.algo.success_replay_weight == 0:
            return None
        update = self.algo.update
        rng = np.random.default_rng(derived_seed(self.seed, iteration, "success_replay"))
        batches = self.pools.sample_replay(self.algo.success_replay_batch_size, update.epochs * update.num_minibatches,
                                           rng)  # fmt: skip
        return None if batches is None else SuccessReplay(self.algo.success_replay_weight, replay_tensors(batches))

    @property
    def samples_tasks(self) -> bool:
        """Whether this run shares its envs among its tasks by ``trainer.task_sampling`` (two tasks or more)."""
        if self.config.task_sampling.mode == "uniform":
            return False
        tasks = self.collector.tasks
        return len(tasks) > 1 and None not in tasks

    def next_env_tasks(self) -> list[str] | None:
        """The task of every env in this iteration (None: each env keeps its task); recorded in the state."""
        if not self.samples_tasks:
            return None
        group_size = self.algo.group_size if self.algo.collection.grouped_initial_states else 1
        previous = self.state.env_tasks or self.collector.initial_env_tasks(group_size)
        self.state.env_tasks = task_sampling.next_assignment(
            self.config.task_sampling, [str(t) for t in self.collector.tasks], self.state.task_success, previous,
            group_size, self.state.task_best_success,
        )  # fmt: skip
        return self.state.env_tasks

    def compute_advantages(self, rollout: Rollout) -> tuple[TensorDict | None, dict[str, float]]:
        """Advantages and returns over ``[N, T]``; returns the flat batch of valid steps for the update
        (None when there is none: with group filtering, every group may have all failed or all succeeded)."""
        batch = rollout.batch
        result = compute_advantages(batch, self.algo.advantage_estimator, **self.algo.advantage_options)
        batch["advantage"] = result.advantages
        batch["return"] = result.returns
        batch["old_log_prob"] = batch["rollout_log_prob"]
        flat = valid_steps(batch.exclude("success"))
        mask = batch["mask"]
        if flat.shape[0] == 0:
            logger.warning("no valid step to train on (every group filtered out); skipping this update")
            return None, {"train/valid_steps": 0.0}
        metrics = {
            "train/advantage_mean": float(result.advantages[mask].mean()),
            "train/return_mean": float(result.returns[mask].mean()),
            "train/valid_steps": float(flat.shape[0]),
        }
        return flat, metrics

    def _check_rollout_window(self, batch: TensorDict) -> int:
        """Count rows with no episode end; warn once when the rollout window cuts every episode of a row."""
        unfinished = rows_without_episode_end(batch)
        if unfinished and not self._warned_window:
            self._warned_window = True
            logger.warning(
                "%d of %d envs finished no episode within trainer.rollout_steps=%d chunks: episodes longer than "
                "the rollout window never show their end (or success) to the learner; raise trainer.rollout_steps "
                "to at least the longest episode in chunks (max_episode_steps / chunk_size)",
                unfinished, batch.shape[0], self.config.rollout_steps,
            )  # fmt: skip
        return unfinished

    def evaluate(self, iteration: int) -> dict[str, float]:
        if self.evaluate_fn is None:
            return {}
        weights = self.actors.full_weights()
        return self.evaluate_fn(weights, iteration)

    def save_checkpoint(self) -> Path:
        """Actor/critic/optimizer shards (DCP), trainer state and the exported policy; atomically renamed."""
        iteration = self.state.iteration
        folder = checkpoint.temporary_path(self.checkpoint_root, iteration)
        if folder.exists():  # left by a crash during an earlier save
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        self.actors.save(str(folder))
        self.state.env_restarts = self.collector.env_group.restarts
        torch.save(vars(self.state), folder / "trainer_state.pt")
        if self.pools is not None:
            torch.save(self.pools.state_dict(), folder / POOLS_FILE)
        if self.export_fn is not None:
            self.export_fn(self.actors.full_weights(), folder / "policy")
        return checkpoint.finalize(self.checkpoint_root, iteration, self.config.keep_last)

    def resume(self) -> None:
        """Load the newest checkpoint that loads; set aside (``.corrupt``) any newer one that does not, with a
        warning; rewind the trackers to its iteration, so the resumed run logs what an uninterrupted one would.

        Raises:
            checkpoint.CheckpointLoadError: no checkpoint loads; the message names the folder, the failure and what to do.
        """
        candidates = checkpoint.complete_checkpoints(self.checkpoint_root)
        if not candidates:
            logger.warning("trainer.resume=true but %s holds no checkpoint yet; RL starts from its beginning",
                           self.checkpoint_root)  # fmt: skip
            self.tracker.rewind(0)
            return
        for index, folder in enumerate(candidates):
            try:
                self.actors.load(str(folder))
                state = TrainerState(**torch.load(folder / "trainer_state.pt", weights_only=False))
            except Exception as error:  # noqa: BLE001 - a corrupt checkpoint: fall back to the previous one
                reason = _first_line(error)
                if index + 1 == len(candidates):
                    raise checkpoint.CheckpointLoadError(
                        f"checkpoint {folder} does not load: {reason}. If the run's policy or optimizer config "
                        f"changed since it was written, resume with the config of {self.run_dir.parent / 'config.yaml'}, "
                        "or start a new run_dir with trainer.init_policy=<checkpoint>/policy"
                    ) from error
                fallback = candidates[index + 1]
                aside = checkpoint.set_aside(self.checkpoint_root, folder, fallback)
                logger.warning("checkpoint %s does not load (%s); set aside as %s, falling back to %s",
                               folder, reason, aside.name, fallback.name)  # fmt: skip
                continue
            self.state, self.synced_version = state, -1
            self._resume_pools(folder)
            self.tracker.rewind(state.iteration)
            logger.info("resumed from %s at iteration %d", folder, state.iteration)
            return

    def _resume_pools(self, folder: Path) -> None:
        """The task pools as ``folder`` saved them (they start empty if it has none: a run that had no pools).

        Raises:
            PoolStateError: the checkpoint's pools have other capacities than ``trainer.task_pools``.
        """
        if self.pools is None:
            return
        path = folder / POOLS_FILE
        if not path.is_file():
            logger.warning("checkpoint %s holds no task pools (written without trainer.task_pools); they start empty",
                           folder)  # fmt: skip
            return
        self.pools.load_state_dict(torch.load(path, weights_only=False), str(path))

    def log(self, iteration: int, rollout: Rollout, train: dict, evaluation: dict, timer: PhaseTimer) -> None:
        episodes = episodes_from_reset(rollout.episodes)  # the fair sample: success rates, returns, lengths
        metrics = {k if k.startswith(("train/", "eval/", "timing/")) else f"train/{k}": v for k, v in train.items()}
        if not self.algo.collection.one_episode_per_env:  # one episode per env: no window that cuts episodes
            metrics["train/rows_without_episode_end"] = float(self._check_rollout_window(rollout.batch))
        if episodes:
            metrics["train/success_rate"] = float(np.mean([e["success"] for e in episodes]))
            for task in sorted({e.get("task") for e in episodes} - {None, ""}):
                metrics[f"train/{task}/success_rate"] = float(np.mean([e["success"] for e in episodes if e.get("task") == task]))
            metrics["train/episode_return"] = float(np.mean([e["return"] for e in episodes]))
            metrics["train/episode_length"] = float(np.mean([e["length"] for e in episodes]))
        metrics["train/episodes"] = float(len(rollout.episodes))
        if self.samples_tasks:  # the envs this iteration gave each task, and the averages the next one uses
            for task in self.collector.tasks:
                metrics[f"task_sampling/{task}/envs"] = float(self.state.env_tasks.count(task))
                if task in self.state.task_success:
                    metrics[f"task_sampling/{task}/success_average"] = self.state.task_success[task]
        if self.pools is not None:  # what each task's pools hold, and how far each task lies below its best
            tasks = [str(task) for task in self.collector.tasks if task]
            for outcome, name in (("success", "successes"), ("failure", "failures")):
                sizes = self.pools.sizes(outcome)
                for task in sorted(set(tasks) | set(sizes)):
                    metrics[f"task_pools/{task or 'all'}/{name}"] = float(sizes.get(task, 0))
            metrics.update(regression_metrics(tasks, self.state.task_success, self.state.task_best_success,
                                              self.config.task_pools.regression_threshold))  # fmt: skip
        metrics["train/env_steps"] = float(self.state.env_steps)
        metrics["train/env_restarts"] = float(self.collector.env_group.restarts)
        total = sum(timer.seconds.values())
        metrics.update(timer.metrics())
        metrics["timing/iteration_s"] = total
        metrics["timing/env_steps_per_s"] = rollout.env_steps / max(timer.seconds.get("rollout", 1e-9), 1e-9)
        metrics["memory/driver_rss_mib"] = psutil.Process().memory_info().rss / 2**20
        metrics.update(evaluation)
        self.tracker.log_scalars(metrics, step=iteration + 1)

    # ------------------------------------------------------------------ profiling
    def _profile_folder(self, iteration: int) -> Path:
        return self.run_dir / "profile" / f"iter_{iteration:06d}"

    def _start_profiling(self, iteration: int) -> None:
        folder = self._profile_folder(iteration)
        self.actors.call("start_profile", str(folder / "actor_rank{rank}.json"))
        ray.get(self.rollout_worker.start_profile.remote(str(folder / "rollout_worker.json")))
        self.collector.env_group.call_all("start_profile", str(folder / "env_worker{index}.json"))

    def _stop_profiling(self, iteration: int, timer: PhaseTimer) -> None:
        self.actors.call("stop_profile")
        ray.get(self.rollout_worker.stop_profile.remote())
        self.collector.env_group.call_all("stop_profile")
        self.timing_rows.append({"iteration": iteration, **timer.seconds})
        write_timing_table(self.timing_rows, self.run_dir / "profile" / "timings.md")
