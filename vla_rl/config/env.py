"""The ``env`` config section, read and checked once into an :class:`EnvConfig` (:func:`read_env_section`).

Its keys: ``id`` (a registry name, ``NAME/TASK`` or ``package.module:function``), ``tasks`` (names or ``all``),
``kwargs`` (the env factory's keyword arguments, checked against its parameters) and, for envs served by a
``vla-rl env-server``, ``remote=HOST:PORT`` with its ``remote_*`` keys (:data:`REMOTE_ENV_KEYS`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from vla_rl.config.errors import ConfigError

if TYPE_CHECKING:
    from envs.remote.client import RemoteEnvConfig

#: ``env.<key>`` -> field of :class:`envs.remote.client.RemoteEnvConfig` (``env.remote`` is the address).
REMOTE_ENV_KEYS = {"remote": "address", "remote_rate": "rate", "remote_burst": "burst", "remote_timeout_s": "timeout_s",
                   "remote_retries": "retries", "remote_connect_timeout_s": "connect_timeout_s"}  # fmt: skip


@dataclass(frozen=True)
class EnvConfig:
    """The ``env`` section, checked against the env's registry entry and factory.

    - ``id``: as given (``tabletop``, ``tabletop/reach`` or ``package.module:function``).
    - ``name``: the registry's name of the env, what ``make(f"{name}/{task}")`` builds.
    - ``tasks``: the tasks the run uses, ``all`` resolved to the env's tasks (empty for an env without tasks).
    - ``kwargs``: the factory's keyword arguments as plain values, lists as tuples.
    - ``remote``: the env server to step the envs on, or None (the envs run in the env workers).
    """

    id: str
    name: str
    tasks: tuple[str, ...]
    kwargs: dict[str, Any]
    remote: RemoteEnvConfig | None = None

    @property
    def factory_id(self) -> str:
        """``id`` without a ``/TASK``: a registry name or ``package.module:function``."""
        return self.id.partition("/")[0]

    def kwargs_record(self) -> dict[str, Any]:
        """``kwargs`` as a record writes them (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.kwargs.items()}


def read_env_section(cfg: DictConfig) -> EnvConfig:
    """The ``env`` section of the composed config ``cfg`` as an :class:`EnvConfig`.

    Raises:
        ConfigError: ``env.id`` unset or unknown, a task the env lacks, an option its factory does not take, or a
            bad ``env.remote*`` key, each named.
    """
    from envs.registry import UnknownEnvError, resolve

    if "env" not in cfg:
        raise ConfigError("config lacks the section 'env'")
    section = cfg.env
    if OmegaConf.is_missing(section, "id"):
        raise ConfigError("'env.id' is not set: give env.id=NAME (`vla-rl envs list`) or env.id=pkg.module:function")
    try:
        entry, _ = resolve(str(section.id))
    except (UnknownEnvError, ImportError, ValueError) as error:
        raise ConfigError(f"'env.id': {error}") from None
    tasks = resolve_tasks(section, entry.tasks)
    for task in tasks:
        if task not in entry.tasks:
            raise ConfigError(f"'env.tasks': env {entry.name!r} has no task {task!r}; allowed: {', '.join(entry.tasks)}")
    remote = remote_env_config(section)
    parameters = inspect.signature(entry.load_factory()).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    allowed = [name for name in parameters if name != "task"]
    for key in section.get("kwargs") or {}:
        if key not in parameters and not takes_any:
            raise ConfigError(f"unknown env option 'env.kwargs.{key}' for {entry.name!r}; allowed: {', '.join(allowed)}")
    return EnvConfig(str(section.id), entry.name, tuple(tasks), env_kwargs(section), remote)


def resolve_tasks(env_cfg: DictConfig, available: Sequence[str]) -> list[str]:
    """``env.tasks`` as a list of task names (``all`` means every task of the env)."""
    tasks = env_cfg.get("tasks")
    if tasks is None or tasks == "all":
        return list(available)
    if isinstance(tasks, str):
        return [tasks]
    if isinstance(tasks, ListConfig | list | tuple):
        return [str(t) for t in tasks]
    raise ConfigError(f"'env.tasks' must be a task name, a list of task names or 'all', got {tasks!r}")


def env_kwargs(env_cfg: DictConfig) -> dict[str, Any]:
    """The factory keyword arguments of ``env.kwargs`` as plain Python values."""
    kwargs = OmegaConf.to_container(env_cfg.get("kwargs") or OmegaConf.create({}), resolve=True)
    return {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}


def remote_env_config(env_cfg: DictConfig) -> RemoteEnvConfig | None:
    """The :class:`envs.remote.client.RemoteEnvConfig` of ``env.remote=HOST:PORT`` and its ``env.remote_*`` keys,
    or None when the envs run in the env workers themselves (no ``env.remote``).

    Raises:
        ConfigError: an unknown ``env.remote_*`` key, a ``remote_*`` key without ``env.remote``, or a bad value.
    """
    from envs.remote.client import RemoteEnvConfig

    given = {key: env_cfg[key] for key in env_cfg if str(key).startswith("remote") and env_cfg[key] is not None}
    for key in given:
        if key not in REMOTE_ENV_KEYS:
            raise ConfigError(f"unknown config key 'env.{key}'; remote env keys: {', '.join('env.' + k for k in REMOTE_ENV_KEYS)}")
    if not given:
        return None
    if "remote" not in given:
        raise ConfigError(f"{', '.join('env.' + k for k in given)} set without 'env.remote=HOST:PORT' (the env server)")
    try:
        return RemoteEnvConfig(**{REMOTE_ENV_KEYS[key]: value for key, value in given.items()})
    except (TypeError, ValueError) as error:
        raise ConfigError(f"'env.remote': {error}") from None
