"""`vla-rl collect`: scripted-expert demonstrations (HDF5) and their statistics."""

from __future__ import annotations

import argparse

from vla_rl.commands.common import add_config_arguments, recording


def cmd_collect(args: argparse.Namespace) -> int:
    from envs.registry import resolve
    from vla_rl.config import env_kwargs, load_config, resolve_tasks
    from vla_rl.stages.collect import collect_demonstrations

    cfg = load_config(args.overrides)
    entry, _ = resolve(cfg.env.id)
    tasks = resolve_tasks(cfg.env, entry.tasks)
    with recording(args, cfg, "collect") as record:
        result = collect_demonstrations(
            env_id=str(cfg.env.id),
            tasks=tasks,
            env_kwargs=env_kwargs(cfg.env),
            output=cfg.collect.output,
            episodes_per_task=cfg.collect.episodes_per_task,
            noise_std=float(cfg.collect.noise_std),
            keep_failed=bool(cfg.collect.keep_failed),
            max_attempts_per_episode=int(cfg.collect.max_attempts_per_episode),
            valid_fraction=float(cfg.collect.valid_fraction),
            seed=int(cfg.collect.seed),
            target_frames_per_task=int(cfg.collect.get("target_frames_per_task", 0)),
            dataset_format=str(cfg.collect.format),
            video_codec=str(cfg.collect.video_codec),
        )
        record.add_output("demonstrations", result.dataset_path)
        record.add_output("statistics", result.stats_path)
    print(f"demonstrations: {result.dataset_path}")
    print(f"statistics:     {result.stats_path}")
    if result.target_frames_path:
        print(f"target frames:  {result.target_frames_path}")
    for task, count in sorted(result.episodes_by_task.items()):
        attempts = result.attempts_by_task.get(task)
        note = f" ({attempts} attempts this run)" if attempts else ""
        print(f"  {task}: {count} episodes{note}")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    collect = commands.add_parser(
        "collect",
        help="write scripted-expert demonstrations (HDF5, or LeRobot v3 with collect.format=lerobot) and statistics",
        description="Collect demonstrations with the scripted experts into collect.output "
        "(demos.hdf5 in robomimic layout, stats.json). Interrupt any time: a rerun continues.",
    )
    add_config_arguments(collect)
    collect.set_defaults(func=cmd_collect)
