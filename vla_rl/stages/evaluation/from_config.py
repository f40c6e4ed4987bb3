"""Evaluation as the config says: the shared body of `vla-rl eval` and the experiment's eval stage."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from vla_rl.config import read_env_section, read_section
from vla_rl.logging import make_trackers
from vla_rl.logging.console import ConsoleTracker
from vla_rl.stages.evaluation.action_sources import (
    ExpertActionSource,
    PolicyActionSource,
    load_policy_for_eval,
    resolve_policy_folder,
)
from vla_rl.stages.evaluation.config import EvalConfig, VideoConfig
from vla_rl.stages.evaluation.env_backends import make_eval_envs
from vla_rl.stages.evaluation.runner import EvalSettings, VideoSettings
from vla_rl.stages.evaluation.session import evaluate_and_report


def video_settings(video: VideoConfig) -> VideoSettings:
    """The runner's video settings of the ``eval.video`` section."""
    return VideoSettings(episodes_per_task=video.episodes_per_task, grid_envs=video.grid_envs,
                         cameras=tuple(video.cameras), size=tuple(video.size))  # fmt: skip


def read_eval_section(cfg: DictConfig) -> EvalConfig:
    """The ``eval`` section as an :class:`EvalConfig` (checked by ``load_config`` already).

    Raises:
        ConfigError: a wrong key or value (for a config that ``load_config`` did not compose).
    """
    return read_section(cfg, "eval", EvalConfig)


def evaluate_from_config(
    cfg: DictConfig, policy_path: str, output: Path, run_record: Path | None = None
) -> tuple[dict, Path]:
    """Evaluate ``policy_path`` (a policy/checkpoint/run folder, or ``expert``) as ``cfg.eval`` says.

    Writes ``output/eval_info.json`` (naming ``run_record``, the command's run.json), metrics and videos;
    returns (eval_info document, its path).

    Raises:
        PolicyLoadError: the policy path cannot be read (the message names it).
    """

    eval_config = read_eval_section(cfg)
    env = read_env_section(cfg)
    tasks = list(env.tasks)
    policy_info: dict = {"path": None if policy_path == "expert" else policy_path}
    if policy_path == "expert":
        source = ExpertActionSource(noise_std=eval_config.expert_noise_std, seed=int(cfg.seed))
        policy_info.update(kind="expert", expert_noise_std=eval_config.expert_noise_std)
    else:  # the policy is loaded before any env renders in this process (see docs/platform.md)
        policy_info.update(kind="pretrained", resolved_path=str(resolve_policy_folder(policy_path)),
                           deterministic=eval_config.deterministic)  # fmt: skip
        source = PolicyActionSource(load_policy_for_eval(policy_path), eval_config.deterministic)
    settings = EvalSettings(episodes_per_task=eval_config.episodes_per_task, seed=int(cfg.seed),
                            split=eval_config.split, protocol=eval_config.protocol,
                            video=video_settings(eval_config.video))  # fmt: skip
    num_workers = eval_config.num_workers
    envs = make_eval_envs(env.factory_id, env.kwargs, tasks, eval_config.num_envs, num_workers, seed=int(cfg.seed),
                          remote=env.remote)  # fmt: skip
    config_dict = OmegaConf.to_container(cfg, resolve=True)
    tracker = make_trackers(list(eval_config.trackers), output, config_dict, project=eval_config.project)
    console = tracker.find(ConsoleTracker)
    bar = console.progress("episodes", len(tasks) * settings.episodes_per_task) if console else None
    env_info = {"id": env.id, "kwargs": env.kwargs_record(), "num_envs": envs.num_envs, "num_workers": num_workers}
    try:
        document, path = evaluate_and_report(
            envs, source, tasks, settings, output, policy_info, env_info, config_dict, tracker=tracker,
            on_episode=(lambda _episode: bar.advance()) if bar else None, run_record=run_record,
        )  # fmt: skip
    finally:
        tracker.close()
        envs.close()
    return document, path


def evaluate_policy_folders(
    cfg: DictConfig, folders: dict[str, str], output: Path, run_record: Path | None = None
) -> dict[str, dict]:
    """Evaluate several policies (name -> folder) into ``output/<name>``, all on the same episodes (the split
    and seeds of ``cfg``); returns name -> eval_info."""
    documents = {}
    for name, folder in folders.items():
        document, path = evaluate_from_config(cfg, folder, output / name, run_record)
        overall = document["overall"]
        print(f"[eval] {name}: success {overall['success_rate']:.3f} ({overall['successes']}/{overall['episodes']}); "
              f"{path}")  # fmt: skip
        documents[name] = document
    return documents
