"""The `vla-rl` command: train | eval | collect | sft | bench | envs.

Commands that take a config accept Hydra overrides after their name, e.g.
``vla-rl collect env=tabletop_all collect.episodes_per_task=5``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from vla_rl.config import ConfigError

NOT_YET = {
    "train": "the trainer (Ray worker groups, FSDP2 actors, PPO/GRPO fit loop) lands with issue 5",
    "eval": "evaluation with videos and eval_info.json lands with issue 6",
    "sft": "behaviour-cloning pre-training lands with issue 7",
}

OVERRIDES_HELP = "Hydra config overrides, e.g. env.tasks=[lift] seed=3 (see configs/)"


def _not_available(command: str) -> int:
    print(f"vla-rl {command}: not available yet: {NOT_YET[command]}.", file=sys.stderr)
    return 2


def cmd_collect(args: argparse.Namespace) -> int:
    from envs.registry import resolve
    from vla_rl.collect import collect_demonstrations
    from vla_rl.config import env_kwargs, load_config, resolve_tasks

    cfg = load_config(args.overrides)
    entry, _ = resolve(cfg.env.id)
    tasks = resolve_tasks(cfg.env, entry.tasks)
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
        seed=int(cfg.seed),
    )
    print(f"demonstrations: {result.dataset_path}")
    print(f"statistics:     {result.stats_path}")
    for task, count in sorted(result.episodes_by_task.items()):
        attempts = result.attempts_by_task.get(task)
        note = f" ({attempts} attempts this run)" if attempts else ""
        print(f"  {task}: {count} episodes{note}")
    return 0


def cmd_envs_list(args: argparse.Namespace) -> int:
    from envs.registry import registered

    for name, entry in sorted(registered().items()):
        print(f"{name}: {entry.description}")
        for task in entry.tasks:
            marker = " (default)" if task == entry.default_task else ""
            print(f"  {name}/{task}{marker}")
    return 0


def cmd_envs_check(args: argparse.Namespace) -> int:
    from envs.checks import CheckResult, ConformanceError, run_checks
    from envs.registry import UnknownEnvError, make, resolve

    try:
        entry, task = resolve(args.env)
    except (UnknownEnvError, ImportError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    tasks = entry.tasks if args.all_tasks else (task,)
    env_id = args.env.partition("/")[0]

    def report(result: CheckResult) -> None:
        status = "ok  " if result.passed else "FAIL"
        print(f"  [{status}] {result.name}" + (f": {result.detail}" if result.detail else ""), flush=True)

    for current in tasks:
        print(f"{env_id}/{current}")
        try:
            run_checks(lambda current=current: make(f"{env_id}/{current}"), report=report)
        except ConformanceError as error:
            print(f"conformance check failed for {env_id}/{current}: {error}", file=sys.stderr)
            return 1
    print("all checks passed")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.target == "env":
        from envs.registry import resolve

        entry, task = resolve(args.task if "/" in args.task else f"{args.env}/{args.task}")
        if entry.name != "tabletop":
            print(f"vla-rl bench env: no benchmark for env {entry.name!r} yet; available for: tabletop",
                  file=sys.stderr)  # fmt: skip
            return 2
        from envs.builtin.benchmark import measure_env_speed

        result = measure_env_speed(task=task, num_steps=args.steps, seed=args.seed)
        result = {"env": entry.name, "task": task, **result}
    elif args.target == "policy":
        from policies.benchmark import run_policy_benchmark

        result = run_policy_benchmark(batch_size=args.batch_size)
    else:
        print(f"vla-rl bench {args.target}: not available yet: the rollout benchmark lands with issue 5.",
              file=sys.stderr)  # fmt: skip
        return 2
    print(json.dumps(result))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vla-rl", description="Train vision-language-action robot policies with RL in simulation."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, summary in (
        ("train", "run an experiment: collect demos, SFT, RL, evaluate"),
        ("eval", "evaluate a policy or checkpoint, with videos"),
        ("sft", "behaviour-cloning pre-training on demonstrations"),
    ):
        sub = commands.add_parser(name, help=summary, description=f"{summary}. ({NOT_YET[name]})")
        sub.add_argument("overrides", nargs="*", help=OVERRIDES_HELP)
        sub.set_defaults(func=lambda args, name=name: _not_available(name))

    collect = commands.add_parser(
        "collect",
        help="write scripted-expert demonstrations (HDF5) and their statistics",
        description="Collect demonstrations with the scripted experts into collect.output "
        "(demos.hdf5 in robomimic layout, stats.json). Interrupt any time: a rerun continues.",
    )
    collect.add_argument("overrides", nargs="*", help=OVERRIDES_HELP)
    collect.set_defaults(func=cmd_collect)

    bench = commands.add_parser("bench", help="speed benchmarks; print one JSON object as the last line")
    bench.add_argument("target", choices=["env", "policy", "rollout"], help="what to measure")
    bench.add_argument("--env", default="tabletop", help="env name (bench env)")
    bench.add_argument("--task", default="reach", help="task, or NAME/TASK (bench env)")
    bench.add_argument("--steps", type=int, default=2000, help="env steps per measurement (bench env)")
    bench.add_argument("--batch-size", type=int, default=32, help="batch size (bench policy)")
    bench.add_argument("--seed", type=int, default=0)
    bench.set_defaults(func=cmd_bench)

    envs = commands.add_parser("envs", help="list the registered envs, or check one for conformance")
    envs_commands = envs.add_subparsers(dest="envs_command", required=True, metavar="ACTION")
    envs_list = envs_commands.add_parser("list", help="print the registered envs and their tasks")
    envs_list.set_defaults(func=cmd_envs_list)
    envs_check = envs_commands.add_parser(
        "check", help="run the conformance kit on NAME[/TASK] or package.module:function[/TASK]"
    )
    envs_check.add_argument("env", help="env id, e.g. tabletop/lift or my_pkg.my_env:make")
    envs_check.add_argument("--all-tasks", action="store_true", help="check every task of the env")
    envs_check.set_defaults(func=cmd_envs_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from vla_rl.runtime_env import apply_runtime_defaults

    apply_runtime_defaults()
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
