"""Scripted experts that make demonstrations: ``get_expert(env_name, task, env, **kwargs)``.

An expert has ``reset(seed=None)`` (call after each ``env.reset``; a seed makes the episode's
noise reproducible on its own) and ``act(obs) -> action``.
"""

from __future__ import annotations

from typing import Any


def _tabletop_experts() -> dict[str, Any]:
    from envs.experts.tabletop import TABLETOP_EXPERTS

    return TABLETOP_EXPERTS


#: env name -> loader of its mapping task name -> expert class (loaded lazily: imports mujoco)
EXPERT_LOADERS = {"tabletop": _tabletop_experts}


def available_experts() -> dict[str, tuple[str, ...]]:
    """Every (env name -> tasks) pair with a scripted expert."""
    return {name: tuple(loader()) for name, loader in EXPERT_LOADERS.items()}


def get_expert(env_name: str, task: str, env: Any, **kwargs: Any) -> Any:
    """The scripted expert of ``env_name``/``task`` driving ``env`` (kwargs: ``noise_std``, ``seed``).

    Raises:
        KeyError: no expert for this env/task; the message lists the pairs that exist.
    """
    if env_name not in EXPERT_LOADERS or task not in EXPERT_LOADERS[env_name]():
        pairs = ", ".join(f"{name}/{t}" for name, tasks in available_experts().items() for t in tasks)
        raise KeyError(f"no scripted expert for {env_name}/{task}; experts exist for: {pairs}")
    return EXPERT_LOADERS[env_name]()[task](env, **kwargs)
