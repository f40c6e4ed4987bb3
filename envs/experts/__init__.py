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


def _tabletop_experts() -> dict[str, Any]:
    from envs.experts.tabletop import TABLETOP_EXPERTS

    return TABLETOP_EXPERTS


def _robosuite_experts() -> dict[str, Any]:
    from envs.experts.robosuite_lift import ROBOSUITE_EXPERTS

    return ROBOSUITE_EXPERTS


#: env name -> loader of its mapping task name -> expert class (loaded lazily: imports mujoco)
EXPERT_LOADERS = {"tabletop": _tabletop_experts, "robosuite": _robosuite_experts}


def available_experts() -> dict[str, tuple[str, ...]]:
    """Every (env name -> tasks) pair with a scripted expert."""
    return {name: tuple(loader()) for name, loader in EXPERT_LOADERS.items()}


def _factory_expert(factory: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """The ``make_expert`` a factory carries in its ``expert`` attribute, or None."""
    expert = getattr(factory, "expert", None)
    if expert is None or callable(expert):
        return expert
    from envs.registry import import_object

    return import_object(expert)


def get_expert(
    env_name: str, task: str, env: Any, factory: Callable[..., Any] | None = None, **kwargs: Any
) -> Any:
    """The scripted expert of ``env_name``/``task`` driving ``env`` (kwargs: ``noise_std``, ``seed``).

    ``factory`` (the env's factory; imported from ``env_name`` when that is an import path) is
    consulted first: its ``expert`` attribute, when set, builds the expert with
    ``make_expert(env, task, **kwargs)``.

    Raises:
        KeyError: no expert for this env/task; the message lists the pairs that exist.
    """
    if factory is None and ":" in env_name:  # an env given by import path carries its own expert
        from envs.registry import import_object

        factory = import_object(env_name.partition("/")[0])
    make_expert = _factory_expert(factory)
    if make_expert is not None:
        return make_expert(env, task, **kwargs)
    if env_name not in EXPERT_LOADERS or task not in EXPERT_LOADERS[env_name]():
        pairs = ", ".join(f"{name}/{t}" for name, tasks in available_experts().items() for t in tasks)
        raise KeyError(
            f"no scripted expert for {env_name}/{task}; experts exist for: {pairs}. For your own env, "
            "set `factory.expert = 'pkg.module:make_expert'` (see docs/new_env_guide.md)"
        )
    return EXPERT_LOADERS[env_name]()[task](env, **kwargs)
