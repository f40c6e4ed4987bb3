"""Scripted experts that make demonstrations: ``get_expert(env_name, task, env, **kwargs)``.

An expert has ``reset(seed=None)`` (call after each ``env.reset``; a seed makes the episode's
noise reproducible on its own) and ``act(obs) -> action``.

Experts of envs outside this repository are found through their factory, without editing this
file: give the factory an ``expert`` attribute, the import path (or callable) of
``make_expert(env, task, **kwargs) -> expert``::

    make.expert = "my_pkg.my_expert:make_expert"

and pass the factory: ``get_expert(env_name, task, env, factory=make, noise_std=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contract.import_path import import_object


def _tabletop_experts() -> dict[str, Any]:
    from envs.experts.tabletop import TABLETOP_EXPERTS

    return TABLETOP_EXPERTS


def _robosuite_experts() -> dict[str, Any]:
    from envs.experts.robosuite_lift import ROBOSUITE_EXPERTS

    return ROBOSUITE_EXPERTS


def _libero_experts() -> dict[str, Any]:
    try:
        import envs.libero  # noqa: F401
    except ImportError:  # LIBERO not installed: no experts to offer
        return {}
    from envs.experts.libero import libero_experts

    return libero_experts()


#: env name -> loader of its mapping task name -> expert class (loaded lazily: imports mujoco)
EXPERT_LOADERS = {"tabletop": _tabletop_experts, "robosuite": _robosuite_experts, "libero": _libero_experts}


def available_experts() -> dict[str, tuple[str, ...]]:
    """Every (env name -> tasks) pair with a scripted expert."""
    return {name: tuple(loader()) for name, loader in EXPERT_LOADERS.items()}


def _factory_expert(factory: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """The ``make_expert`` a factory carries in its ``expert`` attribute, or None."""
    expert = getattr(factory, "expert", None)
    if expert is None or callable(expert):
        return expert
    return import_object(expert, "expert")


def _factory_of(env_id: str) -> Callable[..., Any] | None:
    """The factory of a registered env name or a factory import path (``NAME[/TASK]``), or None if unknown."""
    from envs.registry import UnknownEnvError, resolve

    try:
        entry, _ = resolve(env_id)
    except UnknownEnvError:
        return None
    return entry.load_factory()


def has_expert(env_name: str, task: str) -> bool:
    """Whether :func:`get_expert` finds a scripted expert for ``env_name``/``task`` (its factory's ``expert``
    attribute, or a built-in expert)."""
    if _factory_expert(_factory_of(env_name)) is not None:
        return True
    name = env_name.partition("/")[0]
    return name in EXPERT_LOADERS and task in EXPERT_LOADERS[name]()


def get_expert(
    env_name: str, task: str, env: Any, factory: Callable[..., Any] | None = None, **kwargs: Any
) -> Any:
    """The scripted expert of ``env_name``/``task`` driving ``env`` (kwargs: ``noise_std``, ``seed``).

    ``env_name`` is the env's id: a registered name or a factory import path (``pkg.module:make``).
    ``factory`` (the env's factory; found from ``env_name`` when not given) is consulted first: its
    ``expert`` attribute, when set, builds the expert with ``make_expert(env, task, **kwargs)``.

    Raises:
        KeyError: no expert for this env/task; the message lists the pairs that exist and what to do.
    """
    if factory is None:
        factory = _factory_of(env_name)
    make_expert = _factory_expert(factory)
    if make_expert is not None:
        return make_expert(env, task, **kwargs)
    name = env_name.partition("/")[0]
    if name not in EXPERT_LOADERS or task not in EXPERT_LOADERS[name]():
        pairs = ", ".join(f"{n}/{t}" for n, tasks in available_experts().items() for t in tasks)
        where = f"its factory {getattr(factory, '__qualname__', factory)!r} has no `expert` attribute" if factory \
            else "it is neither a registered env nor a factory import path"  # fmt: skip
        raise KeyError(
            f"no scripted expert for env {name!r}, task {task!r}: {where}. Experts exist for: {pairs}. For your own "
            "env, set `make.expert = 'pkg.module:make_expert'` on its factory (see docs/new_env_guide.md)"
        )
    return EXPERT_LOADERS[name]()[task](env, **kwargs)
