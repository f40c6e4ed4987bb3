"""`vla-rl eval`: evaluate a policy (or the scripted experts) with videos and eval_info.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vla_rl.commands.common import OVERRIDES_HELP


def video_settings(eval_cfg):
    from vla_rl.evaluation import VideoSettings

    video = eval_cfg.video
    size = tuple(int(v) for v in video.size)
    if len(size) != 2 or min(size) < 1:
        from vla_rl.config import ConfigError

        raise ConfigError(f"'eval.video.size' must be [height, width] of positive integers, got {list(video.size)}")
    return VideoSettings(
        episodes_per_task=int(video.episodes_per_task), grid_envs=int(video.grid_envs),
        cameras=tuple(str(c) for c in video.cameras), size=size,
    )  # fmt: skip


def cmd_eval(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from envs.registry import resolve
    from vla_rl.config import env_kwargs, load_config, resolve_tasks
    from vla_rl.evaluation import (
        EvalSettings,
        ExpertActionSource,
        PolicyActionSource,
        PolicyLoadError,
        evaluate_and_report,
        load_policy_for_eval,
        make_eval_envs,
        resolve_policy_folder,
    )  # fmt: skip
    from vla_rl.logging import make_trackers
    from vla_rl.logging.console import ConsoleTracker

    cfg = load_config(args.overrides)
    eval_cfg = cfg.eval
    entry, _ = resolve(str(cfg.env.id))  # validated by load_config
    tasks = resolve_tasks(cfg.env, entry.tasks)
    policy_path = str(eval_cfg.policy)
    policy_info: dict = {"path": None if policy_path == "expert" else policy_path}
    try:
        if policy_path == "expert":
            source = ExpertActionSource(noise_std=float(eval_cfg.expert_noise_std), seed=int(cfg.seed))
            policy_info.update(kind="expert", expert_noise_std=float(eval_cfg.expert_noise_std))
        else:
            policy_info.update(kind="pretrained", resolved_path=str(resolve_policy_folder(policy_path)),
                               deterministic=bool(eval_cfg.deterministic))  # fmt: skip
            source = PolicyActionSource(load_policy_for_eval(policy_path), bool(eval_cfg.deterministic))
    except PolicyLoadError as error:
        print(f"vla-rl eval: {error}", file=sys.stderr)
        return 2
    output = Path(str(eval_cfg.output))
    settings = EvalSettings(episodes_per_task=int(eval_cfg.episodes_per_task), seed=int(cfg.seed),
                            video=video_settings(eval_cfg))  # fmt: skip
    kwargs = env_kwargs(cfg.env)
    num_workers = int(eval_cfg.num_workers)
    env_id = str(cfg.env.id).partition("/")[0]  # NAME or package.module:function, without a /TASK
    envs = make_eval_envs(env_id, kwargs, tasks, int(eval_cfg.num_envs), num_workers, seed=int(cfg.seed))
    config_dict = OmegaConf.to_container(cfg, resolve=True)
    tracker = make_trackers(list(eval_cfg.trackers), output, config_dict, project=str(eval_cfg.project))
    console = tracker.find(ConsoleTracker)
    bar = console.progress("episodes", len(tasks) * settings.episodes_per_task) if console else None
    env_info = {"id": str(cfg.env.id), "kwargs": {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()},
                "num_envs": envs.num_envs, "num_workers": num_workers}  # fmt: skip
    try:
        document, path = evaluate_and_report(
            envs, source, tasks, settings, output, policy_info, env_info, config_dict, tracker=tracker,
            on_episode=(lambda _episode: bar.advance()) if bar else None,
        )  # fmt: skip
    finally:
        tracker.close()
        envs.close()
    for task, summary in document["tasks"].items():
        _print_summary(task, summary)
    _print_summary("overall", document["overall"])
    print(f"eval_info: {path}")
    return 0


def _print_summary(name: str, summary: dict) -> None:
    low, high = summary["success_ci95"]
    print(f"{name}: success {summary['success_rate']:.3f} (95% CI {low:.3f}-{high:.3f}, "
          f"{summary['successes']}/{summary['episodes']}), return {summary['mean_return']:.3f}, "
          f"length {summary['mean_length']:.1f}, {summary['wall_time_s']:.1f} s")  # fmt: skip


def register(commands: argparse._SubParsersAction) -> None:
    evaluate = commands.add_parser(
        "eval",
        help="evaluate a policy or checkpoint, with videos",
        description="Run eval.episodes_per_task seeded episodes per task with eval.policy (a policy folder, a "
        "checkpoint, a run folder, or `expert`); write eval_info.json, metrics.jsonl and videos to eval.output.",
    )
    evaluate.add_argument("overrides", nargs="*", help=OVERRIDES_HELP)
    evaluate.set_defaults(func=cmd_eval)
