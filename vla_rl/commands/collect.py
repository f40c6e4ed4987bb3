"""`vla-rl collect`: scripted-expert demonstrations (HDF5) and their statistics."""

from __future__ import annotations

import argparse

from vla_rl.commands.common import add_config_arguments, recording


def cmd_collect(args: argparse.Namespace) -> int:
    from pathlib import Path

    from vla_rl.config.loading import load_config
    from vla_rl.stages import collect
    from vla_rl.stages.run_plan import read_run_plan

    cfg = load_config(args.overrides)
    run = read_run_plan(cfg)
    plan = run.collect_plan()
    with recording(args, cfg, run, "collect") as record:
        result = collect.run(plan, Path(plan.collect.output))
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
