"""`vla-rl eval`: evaluate a policy (or the scripted experts) with videos and eval_info.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vla_rl.commands.common import add_config_arguments, recording


def cmd_eval(args: argparse.Namespace) -> int:
    from vla_rl.config.loading import load_config
    from vla_rl.stages.evaluation import PolicyLoadError, from_config
    from vla_rl.stages.run_plan import read_run_plan

    cfg = load_config(args.overrides)
    run = read_run_plan(cfg)
    try:
        with recording(args, cfg, run, "eval") as record:
            plan = run.eval_plan(record.path)
            document, path = from_config.run(plan, Path(plan.eval.output))
            record.add_output("eval_info", path)
    except PolicyLoadError as error:
        print(f"vla-rl eval: {error}", file=sys.stderr)
        return 2
    for task, summary in document["tasks"].items():
        print_summary(task, summary)
    for suite, summary in document.get("suites", {}).items():
        print_summary(f"suite {suite}", summary)
    print_summary("overall", document["overall"])
    print(f"eval_info: {path} ({plan.eval.split} split)")
    return 0


def print_summary(name: str, summary: dict) -> None:
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
    add_config_arguments(evaluate)
    evaluate.set_defaults(func=cmd_eval)
