"""`vla-rl envs list | check`: the registered envs, and the conformance kit."""

from __future__ import annotations

import argparse
import sys


def cmd_envs_list(args: argparse.Namespace) -> int:
    """Every registered env with where it comes from (vla-rl, or an installed plug-in's package and version)."""
    from envs.registry import broken_plugins, registered

    for name, entry in sorted(registered().items()):
        print(f"{name} [{entry.source}]: {entry.description}")
        for task in entry.tasks:
            marker = " (default)" if task == entry.default_task else ""
            print(f"  {name}/{task}{marker}")
    for name, error in sorted(broken_plugins().items()):
        print(f"{name} [does not load]: {error}")
    return 0


def cmd_envs_check(args: argparse.Namespace) -> int:
    from envs.checks import CheckResult, ConformanceError, run_checks
    from envs.registry import UnknownEnvError, make, resolve

    try:
        entry, task = resolve(args.env)
    except (UnknownEnvError, ImportError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    tasks = (entry.tasks or (None,)) if args.all_tasks else (task,)
    env_id = args.env.partition("/")[0]

    def report(result: CheckResult) -> None:
        status = "ok  " if result.passed else "FAIL"
        print(f"  [{status}] {result.name}" + (f": {result.detail}" if result.detail else ""), flush=True)

    for current in tasks:
        full_id = env_id if current is None else f"{env_id}/{current}"
        print(full_id)
        try:
            run_checks(lambda full_id=full_id: make(full_id), report=report)
        except ConformanceError as error:
            print(f"conformance check failed for {full_id}: {error}", file=sys.stderr)
            return 1
    print("all checks passed")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    envs = commands.add_parser("envs", help="list the registered envs, or check one for conformance")
    envs_commands = envs.add_subparsers(dest="envs_command", required=True, metavar="ACTION")
    envs_list = envs_commands.add_parser(
        "list", help="print the registered envs (built-in and installed plug-ins, with their package) and their tasks"
    )
    envs_list.set_defaults(func=cmd_envs_list)
    envs_check = envs_commands.add_parser(
        "check", help="run the conformance kit on NAME[/TASK] or package.module:function[/TASK]"
    )
    envs_check.add_argument("env", help="env id, e.g. tabletop/lift or my_pkg.my_env:make")
    envs_check.add_argument("--all-tasks", action="store_true", help="check every task of the env")
    envs_check.set_defaults(func=cmd_envs_check)
