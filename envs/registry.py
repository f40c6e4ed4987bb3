"""Env registry: names to factories.

An env id is ``NAME`` or ``NAME/TASK`` (``tabletop/lift``, ``robosuite/Lift``).
A factory is a callable ``factory(task=..., **kwargs) -> gymnasium.Env`` that
follows the protocol of :mod:`envs.base`. Users plug in their own env without
editing this repository, either by registering it::

    from envs.registry import register
    register("my_robot", "my_pkg.my_env:make", tasks=("pick", "place"))

by giving the factory's import path wherever a name is expected
(``env.id=my_pkg.my_env:make`` in a config or on the command line,
``vla-rl envs check my_pkg.my_env:make``), or by installing a package that declares the factory as an
entry point of the group ``vla_rl.envs`` (:mod:`contract.plugins`)::

    [project.entry-points."vla_rl.envs"]
    my_robot = "my_pkg.my_env:make"    # make.tasks names the tasks; make.benchmark, make.expert optional
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from contract.import_path import import_object
from contract.plugins import ENV_GROUP, installed_plugins


class UnknownEnvError(KeyError):
    """An env name or task that is not registered; the message lists what is."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0])


@dataclass(frozen=True)
class EnvEntry:
    """One registered env: where its factory lives and which tasks it offers."""

    name: str
    factory: str | Callable[..., gym.Env]
    tasks: tuple[str, ...]  # empty: the factory does not declare its tasks
    default_task: str | None
    description: str = ""
    #: import path (or callable) of ``measure(task=..., num_steps=..., seed=...) -> dict`` for
    #: ``vla-rl bench env``; None: the env has no benchmark.
    benchmark: str | Callable[..., dict] | None = None
    #: where the env comes from: "vla-rl", the package and version of a plug-in, or "register()".
    source: str = "register()"

    def load_factory(self) -> Callable[..., gym.Env]:
        if callable(self.factory):
            return self.factory
        return import_object(self.factory)

    def load_benchmark(self) -> Callable[..., dict] | None:
        if self.benchmark is None or callable(self.benchmark):
            return self.benchmark
        return import_object(self.benchmark)


_REGISTRY: dict[str, EnvEntry] = {}
#: Env plug-ins whose entry point could not be loaded: name -> why (reported when the name is used).
_BROKEN_PLUGINS: dict[str, str] = {}


def register(
    name: str,
    factory: str | Callable[..., gym.Env],
    tasks: Sequence[str],
    default_task: str | None = None,
    description: str = "",
    overwrite: bool = False,
    benchmark: str | Callable[..., dict] | None = None,
    source: str = "register()",
) -> EnvEntry:
    """Register an env factory under ``name``; returns the entry."""
    if "/" in name or ":" in name:
        raise ValueError(f"env name {name!r} may not contain '/' or ':'")
    if not tasks:
        raise ValueError(f"env {name!r} must offer at least one task")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"env {name!r} is already registered; pass overwrite=True to replace it")
    entry = EnvEntry(name, factory, tuple(tasks), default_task or tasks[0], description, benchmark, source)
    _REGISTRY[name] = entry
    return entry


def registered() -> dict[str, EnvEntry]:
    """All registered envs by name (built-ins and installed plug-ins included)."""
    _register_builtins()
    _register_plugins()
    return dict(_REGISTRY)


def broken_plugins() -> dict[str, str]:
    """Installed env plug-ins that failed to load: name -> the error (``vla-rl envs list`` shows them)."""
    registered()
    return dict(_BROKEN_PLUGINS)


def parse_env_id(env_id: str) -> tuple[str, str | None]:
    """Split ``NAME/TASK`` into (name, task); task is None when absent."""
    name, _, task = env_id.partition("/")
    return name, (task or None)


def resolve(env_id: str) -> tuple[EnvEntry, str]:
    """Find the entry and task of an env id or import path.

    Raises:
        UnknownEnvError: the name or task is unknown; lists the available ones.
    """
    if ":" in env_id:  # a factory import path, optionally followed by /TASK
        path, _, task = env_id.partition("/")
        factory = import_object(path)
        tasks = tuple(getattr(factory, "tasks", ()) or ())
        benchmark = getattr(factory, "benchmark", None)  # a factory may carry its own, like its tasks
        entry = EnvEntry(path, factory, tasks, tasks[0] if tasks else None, benchmark=benchmark)
        if task and tasks and task not in tasks:
            raise UnknownEnvError(f"env {path!r} has no task {task!r}; available tasks: {', '.join(tasks)}")
        return entry, task or entry.default_task
    entries = registered()
    name, task = parse_env_id(env_id)
    if name not in entries and name in _BROKEN_PLUGINS:
        raise UnknownEnvError(f"env plug-in {name!r} is installed but does not load: {_BROKEN_PLUGINS[name]}")
    if name not in entries:
        raise UnknownEnvError(
            f"unknown env {name!r}; available envs: {', '.join(sorted(entries))} "
            "(or give a factory as 'package.module:function')"
        )
    entry = entries[name]
    task = task or entry.default_task
    if task not in entry.tasks:
        raise UnknownEnvError(
            f"env {name!r} has no task {task!r}; available tasks: {', '.join(entry.tasks)}"
        )
    return entry, task


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """Build the env ``NAME[/TASK]`` (or ``package.module:function[/TASK]``).

    A factory that declares no tasks and gets none is called without ``task``.
    """
    entry, task = resolve(env_id)
    factory = entry.load_factory()
    return factory(**kwargs) if task is None else factory(task=task, **kwargs)


_BUILTINS_REGISTERED = False
_PLUGINS_REGISTERED = False


def _register_plugins() -> None:
    """Register the envs of installed packages (entry points ``vla_rl.envs``), once, after the built-ins.

    The factory is imported to read its tasks; a plug-in that fails to import, declares no tasks or takes a
    built-in's name is left out and remembered in :func:`broken_plugins` with the reason.
    """
    global _PLUGINS_REGISTERED
    if _PLUGINS_REGISTERED:
        return
    _PLUGINS_REGISTERED = True
    for plugin in installed_plugins(ENV_GROUP):
        where = f"entry point {plugin.name} = {plugin.value!r} of package {plugin.source}"
        try:
            if plugin.name in _REGISTRY:
                raise ValueError(f"the name {plugin.name!r} is taken by {_REGISTRY[plugin.name].source}")
            factory = import_object(plugin.value)
            tasks = tuple(getattr(factory, "tasks", ()) or ())
            if not tasks:
                raise ValueError("its factory declares no tasks; set `make.tasks = (...)`")
            register(plugin.name, plugin.value, tasks, description=plugin.summary,
                     benchmark=getattr(factory, "benchmark", None), source=plugin.source)  # fmt: skip
        except Exception as error:  # noqa: BLE001 - one broken package must not hide the other envs
            _BROKEN_PLUGINS[plugin.name] = f"{where}: {type(error).__name__}: {error}"


def _register_builtins() -> None:
    """Register the envs that ship with vla-rl (lazily: importing them is cheap, building is not)."""
    global _BUILTINS_REGISTERED
    if _BUILTINS_REGISTERED:
        return
    _BUILTINS_REGISTERED = True
    from envs.builtin.tasks import TASKS

    register(
        "tabletop",
        "envs.builtin.tabletop:make_tabletop_env",
        tasks=tuple(TASKS),
        default_task="reach",
        source="vla-rl",
        description="built-in MuJoCo tabletop suite: primitive-geometry arm, blocks, bowl, drawer",
        overwrite=True,
        benchmark="envs.builtin.benchmark:measure_env_speed",
    )
    from envs.metaworld.tasks import METAWORLD_TASKS

    register(
        "metaworld",
        "envs.metaworld.env:make_metaworld_env",
        tasks=METAWORLD_TASKS,
        default_task="reach-v3",
        source="vla-rl",
        description="MetaWorld v3: 50 Sawyer tasks (MT10, MT50); needs `pip install --no-deps metaworld==3.1.1`",
        overwrite=True,
        benchmark="envs.metaworld.benchmark:measure_env_speed",
    )
    try:
        from envs.libero import task_ids
    except ImportError:
        pass
    else:
        register(
            "libero",
            "envs.libero.env:make_libero_env",
            tasks=task_ids(),
            default_task="libero_spatial/0",
            description="LIBERO: libero_spatial, libero_object, libero_goal, libero_10, libero_90 "
            "(<suite>/<index or name>); needs `make libero`",
            overwrite=True,
            benchmark="envs.libero.benchmark:measure_env_speed",
        )
    try:
        from envs.robosuite import ROBOSUITE_TASKS
    except ImportError:
        return
    register(
        "robosuite",
        "envs.robosuite:make_robosuite_env",
        tasks=tuple(ROBOSUITE_TASKS),
        default_task=ROBOSUITE_TASKS[0],
        source="vla-rl",
        description="robosuite tasks through the vla-rl protocol",
        overwrite=True,
        benchmark="envs.robosuite.benchmark:measure_env_speed",
    )
