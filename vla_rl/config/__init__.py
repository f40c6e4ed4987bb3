"""What every reader of the config shares: :data:`REPO_ROOT`, :class:`ConfigError`, the ``env`` section
(:mod:`vla_rl.config.env`) and :func:`read_section`, which reads a section into its dataclass.

Composing and validating a command's config is :mod:`vla_rl.config.loading` (``load_config``); it imports the
stages' config dataclasses, which import this package, so this package imports none of the stages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from contract.config_reader import FieldError, read_dataclass
from vla_rl.config.env import EnvConfig, env_kwargs, read_env_section, remote_env_config, resolve_tasks
from vla_rl.config.errors import ConfigError

__all__ = ["REPO_ROOT", "ConfigError", "EnvConfig", "dotted_leaves", "env_kwargs", "read_env_section", "read_section",
           "remote_env_config", "resolve_tasks"]  # fmt: skip

REPO_ROOT = Path(__file__).resolve().parents[2]


def read_section(cfg: DictConfig, key: str, cls: type) -> Any:
    """The config section ``key`` as a ``cls`` dataclass (:func:`contract.config_reader.read_dataclass`).

    Raises:
        ConfigError: the section is missing, or the first unknown key or wrong value, named in full.
    """
    if key not in cfg:
        raise ConfigError(f"config lacks the section '{key}'")
    try:
        return read_dataclass(cls, OmegaConf.to_container(cfg[key], resolve=True), key)
    except FieldError as error:
        raise ConfigError(error.message()) from None
    except (TypeError, ValueError) as error:
        raise ConfigError(f"'{key}': {error}") from None


def dotted_leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    """The leaves of nested dicts under dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; an empty dict has none)."""
    if not isinstance(tree, dict):
        return {prefix.rstrip("."): tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        flat.update(dotted_leaves(value, f"{prefix}{key}."))
    return flat
