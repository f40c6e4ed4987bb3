"""Assembling an RL run from the composed config: the one place that names concrete envs and policies.

:func:`plan_rl_run` reads the config once into an :class:`RLRunPlan`; :func:`rl_trainer` starts Ray, builds the
env worker group, the rollout worker and the FSDP2 actor group, and yields a
:class:`vla_rl.stages.rl.trainer.Trainer` ready to ``fit``; :func:`run` is the RL stage: ``fit`` to the end. The
policy starts from ``trainer.init_policy`` (a ``save_pretrained`` folder, e.g. the SFT
policy: its config, weights and dataset statistics) or from ``policy`` with random weights
and action statistics taken from the env's action bounds.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ray
from omegaconf import DictConfig

# The policies (timm, hence torchvision) must be imported before any env renders in this process:
# torchvision imported after MuJoCo's EGL rendering crashes (see docs/platform.md).
import policies  # noqa: F401
from envs.registry import make
from envs.remote.client import worker_factory
from vla_rl.config import ConfigError, EnvConfig, dotted_leaves
from vla_rl.runtime.ray_cluster import init_ray
from vla_rl.runtime.run_record import RECORD_FILE
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.evaluation.config import EvalConfig
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig
from vla_rl.stages.rl.rollout import RolloutCollector
from vla_rl.stages.rl.trainer import Trainer
from vla_rl.stages.run_plan import PolicySection, RunPlan, read_policy_section
from vla_rl.workers.actor_group import ActorGroup
from vla_rl.workers.env_group import EnvWorkerGroup
from vla_rl.workers.env_worker import EnvWorkerConfig
from vla_rl.workers.policy_factory import PolicySpec
from vla_rl.workers.rollout_worker import RolloutWorker

logger = logging.getLogger(__name__)


def longest_episode_steps(env_id: str, tasks: tuple[str | None, ...], kwargs: dict[str, Any]) -> int:
    """The longest default episode (``EnvSpec.max_episode_steps``) over ``tasks``, in env steps."""
    longest = 0
    for task in tasks:
        env = make(env_id if task is None else f"{env_id}/{task}", **kwargs)
        try:
            longest = max(longest, int(env.unwrapped.env_spec.max_episode_steps))
        finally:
            env.close()
    return longest


def rollout_window(longest_episode: int, chunk_size: int) -> int:
    """Chunk steps that hold an episode of ``longest_episode`` env steps: ``ceil(longest / chunk_size)``."""
    return max(1, -(-int(longest_episode) // int(chunk_size)))


def with_rollout_window(
    trainer: TrainerConfig, env_id: str, tasks: tuple[str | None, ...], kwargs: dict[str, Any], chunk_size: int
) -> TrainerConfig:
    """``trainer`` with ``rollout_steps`` set: as given, or (null) the envs' longest episode in chunks, rounded up.

    Each PPO iteration starts from reset envs (docs/architecture.md), so the window must hold the longest
    episode for the learner to see how episodes end; a GRPO rollout holds one whole episode per env.
    """
    if trainer.rollout_steps is not None:
        return trainer
    longest = longest_episode_steps(env_id, tasks, kwargs)
    steps = rollout_window(longest, chunk_size)
    print(f"[rl] trainer.rollout_steps={steps}: the longest episode ({longest} env steps) in chunks of "
          f"{chunk_size} actions")  # fmt: skip
    return dataclasses.replace(trainer, rollout_steps=steps)


def statistics_from_bounds(io_spec: dict[str, Any]) -> dict[str, Any]:
    """Action statistics from the env's bounds and unit state statistics, for a policy without a dataset.

    Stated, not silent: with min_max action normalisation this maps the bounds to [-1, 1].
    """
    low, high = io_spec["action_low"], io_spec["action_high"]
    mid = [(a + b) / 2 for a, b in zip(low, high, strict=True)]
    half = [(b - a) / 2 for a, b in zip(low, high, strict=True)]
    dim = io_spec["state_dim"]
    return {
        "action": {"mean": mid, "std": half, "min": list(low), "max": list(high), "q01": list(low), "q99": list(high)},
        "state": {"mean": [0.0] * dim, "std": [1.0] * dim, "min": [-1.0] * dim, "max": [1.0] * dim,
                  "q01": [-1.0] * dim, "q99": [1.0] * dim},
    }  # fmt: skip


def policy_config_differences(loaded: dict[str, Any], requested: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``policy.<key>`` -> (loaded value, requested value) where the requested policy section says otherwise.

    Keys only the loaded config holds (defaults its schema filled in) are no difference; ``"<unset>"`` marks a
    key the loaded config lacks.
    """
    loaded_flat, requested_flat = dotted_leaves(loaded), dotted_leaves(requested)
    return {
        f"policy.{key}": (loaded_flat.get(key, "<unset>"), value)
        for key, value in requested_flat.items()
        if loaded_flat.get(key, "<unset>") != value
    }


def check_loaded_policy(folder: Path, loaded: dict[str, Any], requested: dict[str, Any]) -> None:
    """``trainer.init_policy`` is what the config asks for: the same head, else an error; other keys, else a warning.

    RL builds the loaded policy (its weights need its config), so a different head would be trained with the
    algorithm settings chosen for another (e.g. ``experiment=flow_residual_ppo`` on a plain flow policy).

    Raises:
        ConfigError: the loaded policy's head differs from ``policy.head.name``.
    """
    differences = policy_config_differences(loaded, requested)
    if "policy.head.name" in differences:
        have, want = differences["policy.head.name"]
        raise ConfigError(
            f"'trainer.init_policy'={str(folder)!r} holds a policy with head {have!r}, but the config asks for "
            f"policy.head.name={want!r} (from policy= or experiment=): RL would train the loaded {have!r} head with "
            f"settings chosen for {want!r}. Start from a policy trained with this config (the same experiment= or "
            f"policy= for `vla-rl sft` and `vla-rl train`), or choose an experiment/policy whose head is {have!r}"
        )
    if differences:
        listed = "; ".join(f"{key}: loaded {have!r}, asked {want!r}" for key, (have, want) in sorted(differences.items()))
        logger.warning("trainer.init_policy=%s: its policy config differs from the policy section (%s); RL uses the "
                       "loaded values, which its weights were trained with", folder, listed)  # fmt: skip


def with_requested_rl_only_sections(
    loaded: dict[str, Any], requested: dict[str, Any], rl_only_keys: tuple[str, ...]
) -> tuple[dict[str, Any], list[str]]:
    """The loaded policy config with the requested values of ``rl_only_keys`` (sections SFT never trains).

    Returns the config and the keys whose values changed, e.g. ``["rl_vision"]`` for an SFT policy saved with
    pooled pixels and a run asking for keypoints.
    """
    config, retuned = dict(loaded), []
    for key in rl_only_keys:
        if isinstance(requested.get(key), dict) and policy_config_differences(loaded.get(key) or {}, requested[key]):
            config[key], retuned = {**(loaded.get(key) or {}), **requested[key]}, [*retuned, key]
    return config, retuned


def with_fresh_rl_only_parts(spec: PolicySpec, folder: Path, retuned: list[str]) -> PolicySpec:
    """``spec`` whose initial weights fit its (retuned) config: the loaded weights wherever name and shape
    match, the seeded initialisation of ``spec.config`` elsewhere (the RL-only parts those sections rebuild).
    """
    loaded = spec.initial_weights or {}
    fresh = dataclasses.replace(spec, initial_weights=None).build("cpu").state_dict()
    fitting = {name: value for name, value in loaded.items() if name in fresh and fresh[name].shape == value.shape}
    started_fresh = sorted(set(fresh) - set(fitting))
    weights = {name: fitting.get(name, value) for name, value in fresh.items()}
    logger.warning("trainer.init_policy=%s: policy.%s as this run asks (sections SFT never trains); %d of %d weight "
                   "tensors start fresh: %s", folder, ", policy.".join(retuned), len(started_fresh), len(fresh),
                   ", ".join(started_fresh))  # fmt: skip
    return dataclasses.replace(spec, initial_weights=weights)


def policy_spec_from_config(cfg: DictConfig, io_spec: dict[str, Any], init_policy: str | None) -> PolicySpec:
    """:func:`policy_spec` of the ``policy`` section and the seed of a composed config."""
    return policy_spec(read_policy_section(cfg), io_spec, init_policy, int(cfg.seed))


def policy_spec(section: PolicySection, io_spec: dict[str, Any], init_policy: str | None, seed: int) -> PolicySpec:
    """The :class:`PolicySpec` of ``section`` for an env of ``io_spec``; with ``init_policy`` (a ``save_pretrained``
    folder), its config, weights and statistics where they fit the section.

    Raises:
        ConfigError: ``init_policy`` is no policy folder, or was built by another factory.
    """
    if init_policy:
        from policies.hub import load_pretrained

        folder = Path(init_policy)
        if not (folder / "config.json").is_file():
            raise ConfigError(f"'trainer.init_policy': {folder} is not a save_pretrained folder (no config.json)")
        from policies.factory import factory_of, plain_dict

        policy = load_pretrained(folder)
        weights = {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()}
        config = plain_dict(policy.config, "config")
        requested = copy.deepcopy(section.config)
        factory = factory_of(policy)
        if section.factory != factory:
            raise ConfigError(
                f"'trainer.init_policy'={str(folder)!r} holds a policy built by {factory!r}, but the config asks for "
                f"policy.factory={section.factory!r}; choose policy= (or policy.factory=) as when it was trained"
            )
        config, retuned = with_requested_rl_only_sections(config, requested, getattr(policy, "rl_only_config_keys", ()))
        check_loaded_policy(folder, config, requested)
        stats = json.loads(json.dumps(policy.stats))
        logger.info("starting from %s (its config, weights and statistics)", folder)
        spec = PolicySpec(config, io_spec, stats, factory, seed, weights)
        return with_fresh_rl_only_parts(spec, folder, retuned) if retuned else spec
    config = copy.deepcopy(section.config)
    return PolicySpec(config, io_spec, statistics_from_bounds(io_spec), section.factory, seed)


def export_policy(spec: PolicySpec, weights: dict, folder: Path) -> Path:
    """Write the trained policy as a ``save_pretrained`` folder."""
    policy = spec.build("cpu")
    policy.load_state_dict(weights, strict=True)
    from policies.factory import save_policy

    return save_policy(policy, folder)


@dataclasses.dataclass(frozen=True)
class RLRunPlan:
    """The typed parts of an RL run, read once from the composed config (:func:`plan_rl_run`): what ``rl_run``
    and the trainer benchmarks build their worker groups from.

    ``trainer.rollout_steps`` is set (the longest episode in chunks of ``policy_spec.chunk_size`` where the config
    leaves it null); ``tasks`` is ``env.tasks``, or ``(None,)`` for an env without tasks. ``eval`` is what the
    periodic evaluation reads of the ``eval`` section, ``config`` the resolved config the trackers record and
    ``run_record`` the run's ``run.json``.
    """

    trainer: TrainerConfig
    algo: AlgoConfig
    env: EnvConfig
    tasks: tuple[str | None, ...]
    io_spec: dict[str, Any]
    policy_spec: PolicySpec
    seed: int
    eval: EvalConfig
    config: dict[str, Any]
    run_record: Path

    @property
    def env_name(self) -> str:
        return self.env.name

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return self.env.kwargs

    def env_config(self, num_stages: int | None = None) -> EnvWorkerConfig:
        """The env worker config of the run; with ``num_stages``, the same envs split into that many stages.

        Raises:
            ConfigError: the run's envs per worker do not split evenly into ``num_stages`` stages.
        """
        config = EnvWorkerConfig(
            env_id=self.env_name, env_kwargs=self.env_kwargs, tasks=self.tasks,
            envs_per_stage=self.trainer.envs_per_stage, num_stages=self.trainer.num_stages,
            base_seed=self.seed, auto_reset=self.algo.collection.auto_reset,
        )  # fmt: skip
        if num_stages is None:
            return config
        envs_per_worker = self.trainer.envs_per_stage * self.trainer.num_stages
        if envs_per_worker % num_stages:
            raise ConfigError(
                f"'trainer.envs_per_stage' x 'trainer.num_stages' = {envs_per_worker} envs per worker do not split "
                f"into {num_stages} pipeline stages; choose an envs_per_stage that makes the product a multiple of "
                f"{num_stages}"
            )
        return dataclasses.replace(config, envs_per_stage=envs_per_worker // num_stages, num_stages=num_stages)


def plan_rl_run(run: RunPlan, init_policy: str | None = None) -> RLRunPlan:
    """The env, policy, algo, trainer and eval sections of ``run`` as an :class:`RLRunPlan`; ``init_policy`` (else
    ``trainer.init_policy``) is the ``save_pretrained`` folder RL starts from.

    Raises:
        ConfigError: a missing section, or an ``init_policy`` that does not fit the config.
    """
    run.require("policy", "algo", "trainer", "eval")
    env, algo, trainer = run.env, run.algo, run.trainer
    tasks = env.tasks or (None,)
    io_spec = env_io_spec(env.name, tasks[0], env.kwargs)
    spec = policy_spec(run.policy, io_spec, init_policy or trainer.init_policy, run.seed)
    trainer = with_rollout_window(trainer, env.name, tasks, env.kwargs, spec.chunk_size)
    return RLRunPlan(trainer, algo, env, tasks, io_spec, spec, run.seed, run.eval, run.config,
                     run.run_dir / RECORD_FILE)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class RLResult:
    """What the RL stage ends with: its iterations and env steps, why it stopped early (None: it did not) and the
    policy folder of its last checkpoint (None: no checkpoint)."""

    iterations: int
    env_steps: int
    planned_iterations: int
    stop_reason: str | None
    policy: Path | None


def run(plan: RLRunPlan, run_dir: Path) -> RLResult:
    """The RL stage: :func:`rl_trainer` fitted to the end (``trainer.iterations``, or its time limit)."""
    with rl_trainer(plan, run_dir) as trainer:
        final = trainer.fit()
        latest = trainer.checkpoint_root / "latest"
    policy = trainer.checkpoint_root / latest.read_text().strip() / "policy" if latest.is_file() else None
    return RLResult(final.iteration, final.env_steps, trainer.config.iterations, trainer.stop_reason, policy)


@contextlib.contextmanager
def rl_trainer(plan: RLRunPlan, run_dir: Path) -> Iterator[Trainer]:
    """Build the worker groups and the trainer of ``plan``, writing into ``run_dir``; tear everything down on exit."""
    algo, trainer_cfg, spec, tasks = plan.algo, plan.trainer, plan.policy_spec, plan.tasks
    init_ray(trainer_cfg.ray_num_cpus or None, trainer_cfg.ray_address)
    env_config = plan.env_config()
    factory, options = worker_factory(plan.env.remote, env_config.env_factory, trainer_cfg.num_env_workers)
    env_config = dataclasses.replace(env_config, env_factory=factory, env_factory_options=options)
    env_group = rollout_worker = actors = tracker = evaluator = None
    try:
        env_group = EnvWorkerGroup(env_config, trainer_cfg.num_env_workers, trainer_cfg.env_worker_cpus,
                                   trainer_cfg.resources_of("env_worker"))  # fmt: skip
        device = None if trainer_cfg.device == "auto" else trainer_cfg.device
        rollout_worker = (
            ray.remote(RolloutWorker)
            .options(num_cpus=trainer_cfg.rollout_worker_cpus, num_gpus=trainer_cfg.rollout_gpus,
                     resources=trainer_cfg.resources_of("rollout_worker"))  # fmt: skip
            .remote(spec, device, trainer_cfg.torch_threads)
        )
        actors = ActorGroup(
            trainer_cfg.actor_world_size, spec, algo.optim, algo.update,
            trainer_cfg.sharding, trainer_cfg.actor_cpus, trainer_cfg.actor_gpus, device,
            trainer_cfg.actor_threads, trainer_cfg.resources_of("actor"),
        )  # fmt: skip
        from vla_rl.logging.trackers import make_trackers

        tracker = make_trackers(trainer_cfg.trackers, run_dir, plan.config, project="vla-rl")
        collector = RolloutCollector(env_group, rollout_worker, tasks)
        if trainer_cfg.eval_every:
            evaluator = PeriodicEvaluation(plan, run_dir, tracker)
        yield Trainer(
            trainer_cfg, algo, collector, actors, rollout_worker, tracker, run_dir, plan.seed,
            evaluate=evaluator, export=lambda weights, folder: export_policy(spec, weights, folder),
        )  # fmt: skip
    finally:
        if evaluator is not None:
            evaluator.close()
        if tracker is not None:
            tracker.close()
        if actors is not None:
            actors.shutdown()
        if env_group is not None:
            env_group.close()
        if rollout_worker is not None:
            ray.kill(rollout_worker, no_restart=True)


class PeriodicEvaluation:
    """The trainer's evaluation every k iterations: persistent eval envs, videos, eval_info.json per run."""

    def __init__(self, plan: RLRunPlan, run_dir: Path, tracker: Any):
        from vla_rl.stages.evaluation import EvalSettings, make_eval_envs

        config, env = plan.eval, plan.env
        self.spec, self.tasks, self.run_dir, self.tracker = plan.policy_spec, list(plan.tasks), Path(run_dir), tracker
        self.policy = plan.policy_spec.build("cpu").eval()
        # Always the dev episodes: they watch training; the test episodes are kept for the final scores.
        self.settings = EvalSettings(episodes_per_task=plan.trainer.eval_episodes_per_task, seed=plan.seed,
                                     split="dev", protocol=config.protocol, video=config.video)
        self.run_record = plan.run_record
        self.envs = make_eval_envs(env.name, env.kwargs, self.tasks, config.num_envs, config.num_workers,
                                   seed=plan.seed, remote=env.remote)  # fmt: skip
        self.env_info = {"id": env.name, "kwargs": env.kwargs_record(), "num_envs": self.envs.num_envs,
                         "num_workers": config.num_workers}  # fmt: skip
        self.deterministic = config.deterministic

    def __call__(self, weights: dict, iteration: int) -> dict[str, float]:
        from vla_rl.stages.evaluation import PolicyActionSource, evaluate_and_report

        self.policy.load_state_dict(weights, strict=True)
        output = self.run_dir / "eval" / f"iter_{iteration:06d}"
        document, _ = evaluate_and_report(
            self.envs, PolicyActionSource(self.policy, self.deterministic), self.tasks, self.settings, output,
            {"kind": "actor", "iteration": iteration}, self.env_info, tracker=self.tracker, step=iteration,
            run_record=self.run_record if self.run_record.is_file() else None,
        )  # fmt: skip
        overall = document["overall"]
        print(f"[eval] iteration {iteration}: success {overall['success_rate']:.3f} "
              f"({overall['successes']}/{overall['episodes']}), videos in {output}")  # fmt: skip
        return {}  # already logged to the trackers at this step

    def close(self) -> None:
        self.envs.close()
