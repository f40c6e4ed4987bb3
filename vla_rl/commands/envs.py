"""`vla-rl envs list | check`: the registered envs, and the conformance kit."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from vla_rl.commands.common import add_config_arguments, add_config_dir_argument


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


@dataclass(frozen=True)
class EnvUnderTest:
    """What ``vla-rl envs check TARGET`` checks: the env id, its tasks (None: a factory without tasks), kwargs."""

    env_id: str
    tasks: tuple[str | None, ...]
    kwargs: dict[str, Any]


def env_under_test(target: str, overrides: list[str], all_tasks: bool) -> EnvUnderTest:
    """TARGET is an env id (``tabletop/lift``, ``my_pkg.env:make[/TASK]``) or an env config's name
    (``DIR/env/NAME.yaml``: its id, tasks and kwargs); ``overrides`` (``env.kwargs.image_size=32``) apply to either.

    Raises:
        ConfigError: the name is neither, or an override is bad.
        UnknownEnvError, ImportError, ValueError: the env id does not resolve (the message says why).
    """
    from envs.registry import registered, resolve
    from vla_rl.config import ConfigError, read_env_section
    from vla_rl.config.loading import group_options, load_config

    name, _, task = target.partition("/")
    if ":" in name or name in registered():
        entry, default_task = resolve(target)
        if not overrides:
            tasks = (entry.tasks or (None,)) if all_tasks else (default_task,)
            return EnvUnderTest(name, tuple(tasks), {})
        cfg = load_config([f"env.id={name}", *([f"env.tasks=[{task}]"] if task else []), *overrides])
    elif name in group_options("env"):
        cfg = load_config([f"env={name}", *([f"env.tasks=[{task}]"] if task else []), *overrides])
    else:
        raise ConfigError(f"{target!r} is no registered env (`vla-rl envs list`), no import path "
                          f"'package.module:function' and no env config; env configs: {', '.join(group_options('env'))} "
                          "(add your folder with --config-dir DIR)")  # fmt: skip
    env = read_env_section(cfg)
    tasks = tuple(resolve(env.id)[0].tasks or (None,)) if all_tasks else env.tasks or (None,)
    return EnvUnderTest(env.factory_id, tasks, env.kwargs)


def cmd_envs_check(args: argparse.Namespace) -> int:
    from envs.checks import CheckResult, ConformanceError, run_checks
    from envs.experts import get_expert, has_expert
    from envs.registry import UnknownEnvError, make

    try:
        target = env_under_test(args.env, list(args.overrides), args.all_tasks)
    except (UnknownEnvError, ImportError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    def report(result: CheckResult) -> None:
        status = "ok  " if result.passed else "FAIL"
        print(f"  [{status}] {result.name}" + (f": {result.detail}" if result.detail else ""), flush=True)

    for task in target.tasks:
        full_id = target.env_id if task is None else f"{target.env_id}/{task}"
        print(full_id + (f" {target.kwargs}" if target.kwargs else ""))
        expert = None
        if task is not None and has_expert(target.env_id, task):
            expert = lambda env, task=task: get_expert(target.env_id, task, env)  # noqa: E731
        try:
            run_checks(lambda full_id=full_id: make(full_id, **target.kwargs), report=report, make_expert=expert)
        except ConformanceError as error:
            print(f"conformance check failed for {full_id}: {error}", file=sys.stderr)
            return 1
        if expert is None:
            print("  [--  ] expert: none (no scripted expert: `make.expert` on the factory adds one)")
    print("all checks passed")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    envs = commands.add_parser("envs", help="list the registered envs, or check one for conformance")
    envs_commands = envs.add_subparsers(dest="envs_command", required=True, metavar="ACTION")
    envs_list = envs_commands.add_parser(
        "list", help="print the registered envs (built-in and installed plug-ins, with their package) and their tasks"
    )
    add_config_dir_argument(envs_list)
    envs_list.set_defaults(func=cmd_envs_list)
    envs_check = envs_commands.add_parser(
        "check", help="run the conformance kit on NAME[/TASK], package.module:function[/TASK] or an env config's name"
    )
    envs_check.add_argument("env", help="env id (tabletop/lift, my_pkg.my_env:make) or env config name (DIR/env/NAME.yaml "
                            "with --config-dir DIR: its id, tasks and kwargs)")  # fmt: skip
    envs_check.add_argument("--all-tasks", action="store_true", help="check every task of the env")
    add_config_arguments(envs_check, "env overrides, e.g. env.kwargs.image_size=32")
    envs_check.set_defaults(func=cmd_envs_check)
