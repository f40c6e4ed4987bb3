"""Schemas of the ``algo`` and ``trainer`` config sections (``configs/algo/``, ``configs/trainer/``).

Each section is read into a dataclass by :func:`contract.config_reader.read_dataclass` (nested sections too:
``algo.update``, ``algo.optim``, ``trainer.sharding``); an unknown key or a value of the wrong type is a
:class:`vla_rl.config.ConfigError` that names the key and lists the allowed ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from contract.config_reader import FieldError, check_types, require
from vla_rl.algos.algorithms import ALGORITHMS, Collection, get_algorithm
from vla_rl.config import ConfigError, read_section
from vla_rl.runtime.fsdp import ShardingConfig
from vla_rl.stages.rl.task_pools import TaskPoolsConfig
from vla_rl.stages.rl.task_sampling import TaskSamplingConfig
from vla_rl.workers.actor_worker import OptimConfig
from vla_rl.workers.ppo_update import UpdateConfig


@dataclass
class AlgoConfig:
    """PPO (with critic) or GRPO (critic-free); both work with every action head.

    - ``name``: an algorithm of :data:`vla_rl.algos.algorithms.ALGORITHMS` ("ppo", "grpo"), whose entry says
      how rollouts are collected (continuing envs, or one episode per env in groups).
    - ``advantage_estimator``: a name of ``vla_rl.algos.ADVANTAGE_ESTIMATORS`` (gae, grpo, dr_grpo, rloo, ...).
    - ``advantage_options``: keyword arguments of the estimator (e.g. ``gamma``, ``lam``, ``whiten``); empty:
      the estimator function's own defaults. A mapping, so each algo file sets it whole (yaml merges mappings).
    - ``group_size``: envs per GRPO group (they share task and initial state).
    - ``filter_groups``: drop groups whose success rate is outside [min_success_rate, max_success_rate].
    - ``dynamic_sampling``: collect again until ``num_envs / group_size`` groups pass the filter, at most
      ``max_sampling_attempts`` collections.
    - ``critic_warmup_iterations``: first iterations that train only the critic (a fresh value head on a
      pre-trained policy would otherwise feed the actor noise advantages).
    - ``update``: the update's hyper-parameters (:class:`UpdateConfig`); ``optim``: optimizer and schedule
      (:class:`OptimConfig`).
    - ``success_replay_weight``: weight of a behaviour-cloning loss (the policy's ``bc_loss``) on successful
      chunks replayed from the tasks' success pools (``trainer.task_pools``), equal shares per task, added to
      every optimizer step's loss (:mod:`vla_rl.workers.success_replay`); 0: off.
    - ``success_replay_batch_size``: replayed chunks per optimizer step (a multiple of ``trainer.actor_world_size``).
    """

    name: str = "ppo"
    advantage_estimator: str = "gae"
    advantage_options: dict[str, Any] = field(default_factory=dict)
    group_size: int = 1
    filter_groups: bool = False
    min_success_rate: float = 0.1
    max_success_rate: float = 0.9
    dynamic_sampling: bool = False
    max_sampling_attempts: int = 4
    critic_warmup_iterations: int = 0
    update: UpdateConfig = field(default_factory=UpdateConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    success_replay_weight: float = 0.0
    success_replay_batch_size: int = 32

    def __post_init__(self) -> None:
        from vla_rl.algos import ADVANTAGE_ESTIMATORS

        check_types(self)
        require(self, "success_replay_weight", low=0)
        require(self, "success_replay_batch_size", low=1)
        require(self, "name", choices=sorted(ALGORITHMS))
        require(self, "advantage_estimator", choices=sorted(ADVANTAGE_ESTIMATORS))
        require(self, "group_size", low=1)
        require(self, "max_sampling_attempts", low=1)
        require(self, "critic_warmup_iterations", low=0)
        for name in ("min_success_rate", "max_success_rate"):
            require(self, name, low=0, high=1)
        if self.min_success_rate > self.max_success_rate:
            raise FieldError("min_success_rate", self.min_success_rate, f"must be <= max_success_rate={self.max_success_rate}")
        self._refuse_unimplemented_combinations()

    def _refuse_unimplemented_combinations(self) -> None:
        """Options that would pass the types and ranges above but fail (or be ignored) in the first iteration."""
        from vla_rl.algos import ADVANTAGE_ESTIMATORS

        grouped = self.collection.grouped_initial_states
        for name in ("filter_groups", "dynamic_sampling"):
            if getattr(self, name) and not grouped:
                raise FieldError(name, True, f"needs groups of envs that share an initial state, which algo.name="
                                 f"{self.name!r} does not collect; use algo=grpo or set it to false")  # fmt: skip
        if "group_id" in ADVANTAGE_ESTIMATORS[self.advantage_estimator].required_keys and self.group_size < 2:
            raise FieldError("group_size", self.group_size, f"advantage_estimator={self.advantage_estimator!r} compares "
                             "envs within a group: set algo.group_size >= 2 (e.g. algo=grpo)")  # fmt: skip

    @property
    def collection(self) -> Collection:
        """How this algorithm collects its rollouts (its registry entry, :mod:`vla_rl.algos.algorithms`)."""
        return get_algorithm(self.name).collection



@dataclass
class TrainerConfig:
    """The fit loop and the placement of its worker groups (defaults: one 2-core machine).

    - ``iterations``: rollout + update cycles. ``rollout_steps``: chunk steps per env per iteration
      (GRPO: the longest episode in chunks); null: derived where the run is built
      (:func:`vla_rl.stages.rl.experiment.with_rollout_window`), the env's longest episode in chunks.
    - ``num_env_workers`` x ``num_stages`` x ``envs_per_stage`` envs; pipeline stages overlap
      simulation with inference (1 = no overlap).
    - ``actor_world_size``: FSDP2 ranks; ``sharding``: :class:`ShardingConfig` fields.
    - ``device``: "auto" (``VLA_RL_DEVICE``, else CUDA if available, else CPU), "cpu" or "cuda".
    - ``init_policy``: a ``save_pretrained`` folder to start from (e.g. the SFT policy); null: random init,
      with action statistics from the env's bounds.
    - ``eval_every`` / ``eval_episodes_per_task``: evaluation (0 = never); ``checkpoint_every`` / ``keep_last``.
    - ``resume``: continue from the latest checkpoint in ``run_dir``.
    - ``time_limit_minutes``: stop early (with a checkpoint, so ``resume`` continues) before an iteration
      that would end past this many minutes of ``fit``, judged by the previous iteration's duration;
      null: no limit. A stopped run's metrics equal those of a run with that many iterations.
    - ``max_env_steps``: stop (with a checkpoint) before an iteration once the run has taken this many env
      steps: an env-step budget that compares methods whose iterations take different numbers of steps
      (GRPO's episodes end early, PPO's windows do not); null: no budget.
    - ``task_sampling``: how a multi-task run shares its envs among the tasks (:class:`TaskSamplingConfig`:
      "uniform", each env keeps its task; "failure", envs in proportion to each task's training failure rate).
    - ``task_pools``: per-task pools of the chunks of successful and failed episodes (:class:`TaskPoolsConfig`:
      their capacity; the success replay reads them), and the per-task regression metrics they come with.
    - ``dump_rollouts_every``: every this many iterations, the rollout's finished episodes to ``rollouts/`` (0 = off).
    - ``profile_iterations``: iterations to profile (torch.profiler traces of every worker group).
    - ``trackers``: any of console, jsonl, tensorboard, wandb (jsonl is always on).
    - Resources: CPUs (and GPUs) per worker; ``ray_num_cpus`` logical CPUs of a local Ray (0: automatic);
      ``ray_address`` joins a running cluster. ``torch_threads`` per worker process; ``actor_torch_threads``
      per actor process (null: ``torch_threads``). The actors update while the env and rollout workers wait,
      so the actors may use the cores those leave idle: on 2 cores one actor with 2 threads updated MetaWorld
      MT10's batch 1.25x (1.22-1.25) as fast as with 1, and as fast as two 1-thread FSDP ranks
      (`vla-rl bench update experiment=metaworld_mt10 --compare trainer.actor_torch_threads=1,2`, docs/results.md).
    - ``placement``: custom Ray resources each worker of a group asks for, by group (``env_worker``,
      ``rollout_worker``, ``actor``), e.g. ``+trainer.placement.env_worker={sim_node: 1}`` puts the env workers
      on the nodes started with ``ray start --resources='{"sim_node": 8}'``.
    """

    iterations: int = 20
    rollout_steps: int | None = None
    num_env_workers: int = 1
    num_stages: int = 2
    envs_per_stage: int = 4
    actor_world_size: int = 1
    sharding: ShardingConfig = field(default_factory=ShardingConfig)
    device: str = "auto"
    init_policy: str | None = None
    eval_every: int = 0
    eval_episodes_per_task: int = 10
    checkpoint_every: int = 10
    keep_last: int = 2
    resume: bool = False
    time_limit_minutes: float | None = None
    max_env_steps: int | None = None
    task_sampling: TaskSamplingConfig = field(default_factory=TaskSamplingConfig)
    task_pools: TaskPoolsConfig = field(default_factory=TaskPoolsConfig)
    dump_rollouts_every: int = 0
    profile_iterations: list[int] = field(default_factory=list)
    trackers: list[str] = field(default_factory=lambda: ["console", "jsonl"])
    env_worker_cpus: float = 1.0
    rollout_worker_cpus: float = 1.0
    actor_cpus: float = 1.0
    actor_gpus: float = 0.0
    rollout_gpus: float = 0.0
    ray_num_cpus: int = 0
    ray_address: str | None = None
    torch_threads: int = 1
    actor_torch_threads: int | None = None
    placement: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from vla_rl.logging.trackers import TRACKERS

        check_types(self)
        for name in ("iterations", "rollout_steps", "num_env_workers", "num_stages", "envs_per_stage",
                     "actor_world_size", "eval_episodes_per_task", "keep_last", "torch_threads", "max_env_steps",
                     "actor_torch_threads"):
            require(self, name, low=1)
        for name in ("eval_every", "checkpoint_every", "dump_rollouts_every", "ray_num_cpus", "env_worker_cpus", "rollout_worker_cpus",
                     "actor_cpus", "actor_gpus", "rollout_gpus"):
            require(self, name, low=0)
        require(self, "time_limit_minutes", low=0, low_open=True)
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise FieldError("device", self.device, "allowed: auto, cpu, cuda, cuda:N")
        if any(i < 0 for i in self.profile_iterations):
            raise FieldError("profile_iterations", self.profile_iterations, "iteration numbers must be >= 0")
        unknown = [name for name in self.trackers if name not in TRACKERS]
        if unknown:
            raise FieldError("trackers", self.trackers, f"allowed: {', '.join(sorted(TRACKERS))}")
        groups = ("env_worker", "rollout_worker", "actor")
        for group, resources in self.placement.items():
            if group not in groups:
                raise FieldError("placement", dict(self.placement), f"groups allowed: {', '.join(groups)}")
            if not isinstance(resources, dict) or any(float(v) <= 0 for v in resources.values()):
                raise FieldError(f"placement.{group}", resources, "must map Ray resource names to amounts > 0")
        if self.init_policy is not None and not (Path(self.init_policy) / "config.json").is_file():
            raise FieldError("init_policy", self.init_policy,
                             "must be a save_pretrained folder (with config.json), e.g. RUN_DIR/sft/best")

    def resources_of(self, group: str) -> dict[str, float]:
        """The custom Ray resources each worker of ``group`` asks for (``placement``)."""
        return {name: float(amount) for name, amount in self.placement.get(group, {}).items()}

    @property
    def actor_threads(self) -> int:
        """torch threads of each actor process: ``actor_torch_threads``, else ``torch_threads``."""
        return self.actor_torch_threads or self.torch_threads

    @property
    def num_envs(self) -> int:
        return self.num_env_workers * self.num_stages * self.envs_per_stage


def section(cfg: DictConfig, key: str, cls: type) -> Any:
    """The config section ``key`` as a ``cls`` dataclass (:func:`vla_rl.config.read_section`)."""
    return read_section(cfg, key, cls)


def validate_rl_sections(cfg: DictConfig, num_tasks: int = 1) -> tuple[AlgoConfig, TrainerConfig]:
    """The ``algo`` (with ``update`` and ``optim``) and ``trainer`` (with ``sharding``) sections, read;
    ``num_tasks``: how many tasks the run's env trains on (the entry layer resolves them).

    Raises:
        ConfigError: the first wrong key, with its value and what is allowed.
    """
    algo = section(cfg, "algo", AlgoConfig)
    trainer = section(cfg, "trainer", TrainerConfig)
    if algo.collection.grouped_initial_states and trainer.envs_per_stage % algo.group_size:
        raise ConfigError(
            f"'trainer.envs_per_stage'={trainer.envs_per_stage} must be a multiple of "
            f"'algo.group_size'={algo.group_size} (a GRPO group lives in one pipeline stage)"
        )
    _check_task_sampling(num_tasks, algo, trainer)
    _check_success_replay(algo, trainer)
    return algo, trainer


def _check_success_replay(algo: AlgoConfig, trainer: TrainerConfig) -> None:
    """The success replay reads the success pools, and splits its chunks equally among the actor ranks."""
    if algo.success_replay_weight == 0:
        return
    if not trainer.task_pools.enabled:
        raise ConfigError(
            f"'algo.success_replay_weight'={algo.success_replay_weight} replays the tasks' success pools, but "
            "'trainer.task_pools.capacity'=0 keeps none: set it (e.g. trainer.task_pools.capacity=256) or set "
            "algo.success_replay_weight=0"
        )
    if algo.success_replay_batch_size % trainer.actor_world_size:
        raise ConfigError(
            f"'algo.success_replay_batch_size'={algo.success_replay_batch_size} must be a multiple of "
            f"'trainer.actor_world_size'={trainer.actor_world_size} (each rank replays an equal share)"
        )


def _check_task_sampling(num_tasks: int, algo: AlgoConfig, trainer: TrainerConfig) -> None:
    """``failure`` sampling must be able to give every task ``min_envs_per_task`` envs (GRPO: groups), else its
    first assignment fails after the workers have started."""
    sampling = trainer.task_sampling
    if sampling.mode != "failure":
        if sampling.solved_floor > 0:
            raise ConfigError(
                f"'trainer.task_sampling.solved_floor'={sampling.solved_floor} weighs the tasks of failure-rate "
                f"sampling, which 'trainer.task_sampling.mode'={sampling.mode!r} does not do: set mode=failure or "
                "solved_floor=0"
            )
        return
    units = trainer.num_envs // (algo.group_size if algo.collection.grouped_initial_states else 1)
    if num_tasks > 1 and units < sampling.min_envs_per_task * num_tasks:
        unit = "groups" if algo.collection.grouped_initial_states else "envs"
        raise ConfigError(
            f"'trainer.task_sampling.min_envs_per_task'={sampling.min_envs_per_task}: {units} {unit} cannot give each "
            f"of the {num_tasks} tasks that many; lower it or add envs (trainer.envs_per_stage)"
        )
