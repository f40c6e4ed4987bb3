"""Loading and validating the Hydra config of every vla-rl command.

The configs live in ``configs/`` at the repository root (groups ``env``, ``policy``,
``algo``, ``trainer``, ``experiment``); ``VLA_RL_CONFIGS`` points elsewhere. Commands
compose them with command-line overrides (``env.tasks=[lift] seed=3``) and get an
``omegaconf.DictConfig`` in struct mode. Every error a user can make (an unknown key,
a group option that does not exist, a bad value) becomes a :class:`ConfigError` that
names the key and lists the allowed keys or values.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

REPO_ROOT = Path(__file__).resolve().parents[1]


class ConfigError(ValueError):
    """A config key or value is wrong; the message names it and what is allowed."""


def config_dir() -> Path:
    path = Path(os.environ.get("VLA_RL_CONFIGS", REPO_ROOT / "configs")).resolve()
    if not (path / "config.yaml").is_file():
        raise ConfigError(
            f"config folder {path} has no config.yaml; set VLA_RL_CONFIGS to the folder holding the "
            "vla-rl configs, or run from a clone of the repository"
        )
    return path


def _group_options(group: str) -> list[str]:
    folder = config_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def _known_keys(cfg: DictConfig | None, dotted: str) -> list[str]:
    node: Any = cfg
    for part in [p for p in dotted.split(".") if p]:
        if not isinstance(node, DictConfig) or part not in node:
            return []
        node = node[part]
    return sorted(node.keys()) if isinstance(node, DictConfig) else []


def load_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose ``configs/<config_name>.yaml`` with Hydra ``overrides``; validate it.

    Raises:
        ConfigError: unknown key, unknown group option or bad value, with what is allowed.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            cfg = compose(config_name=config_name, overrides=list(overrides))
    except MissingConfigException as error:
        raise ConfigError(_explain_missing_group(str(error), overrides)) from None
    except (ConfigCompositionException, OverrideParseException) as error:
        raise ConfigError(_explain_composition(error, overrides)) from None
    finally:
        GlobalHydra.instance().clear()
    OmegaConf.set_struct(cfg, True)
    validate_config(cfg)
    return cfg


def _explain_missing_group(message: str, overrides: Sequence[str]) -> str:
    for override in overrides:
        group, _, choice = override.partition("=")
        group = group.lstrip("+~")
        if "." not in group and (config_dir() / group).is_dir():
            options = _group_options(group)
            if choice not in options:
                return f"config group '{group}' has no option {choice!r}; allowed: {', '.join(options)}"
    return message


def _explain_composition(error: Exception, overrides: Sequence[str]) -> str:
    message = str(error)
    cause = error.__cause__ or error
    cause_text = str(cause)
    for override in overrides:
        key = override.partition("=")[0].lstrip("+~")
        if f"'{key}'" in message or key in cause_text:
            parent, _, leaf = key.rpartition(".")
            try:
                base = compose_without(overrides, override)
            except Exception:  # noqa: BLE001 - only used to list known keys
                base = None
            known = _known_keys(base, parent)
            where = f"under '{parent}'" if parent else "at the top level"
            hint = f"; known keys {where}: {', '.join(known)}" if known else ""
            if "not in struct" in cause_text or "Could not override" in message or "Could not append" in message:
                return f"unknown config key '{key}'{hint}"
            return f"bad override {override!r}: {cause_text.splitlines()[0]}{hint}"
    return message


def compose_without(overrides: Sequence[str], dropped: str) -> DictConfig:
    """The config composed with every override but ``dropped`` (to list what a key could have been)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            return compose(config_name="config", overrides=[o for o in overrides if o != dropped])
    finally:
        GlobalHydra.instance().clear()


def validate_config(cfg: DictConfig) -> None:
    """Check the sections this layer owns: ``env`` and ``collect``."""
    for key in ("env", "seed", "run_dir", "collect"):
        if key not in cfg:
            raise ConfigError(f"config lacks the key '{key}'")
    if not isinstance(cfg.seed, int):
        raise ConfigError(f"'seed' must be an integer, got {cfg.seed!r}")
    validate_env_config(cfg.env)
    collect = cfg.collect
    if not isinstance(collect.episodes_per_task, int) or collect.episodes_per_task < 1:
        raise ConfigError(f"'collect.episodes_per_task' must be a positive integer, got {collect.episodes_per_task!r}")
    if not 0.0 <= float(collect.valid_fraction) < 1.0:
        raise ConfigError(f"'collect.valid_fraction' must lie in [0, 1), got {collect.valid_fraction!r}")
    if float(collect.noise_std) < 0:
        raise ConfigError(f"'collect.noise_std' must be >= 0, got {collect.noise_std!r}")
    if "sft" in cfg:
        validate_sft_config(cfg.sft)
    if "policy" in cfg:
        validate_policy_section(cfg.policy)
    if "eval" in cfg:
        validate_eval_section(cfg.eval)
    if "algo" in cfg and "trainer" in cfg:
        from vla_rl.trainer_config import validate_rl_sections

        validate_rl_sections(cfg)


def _count(cfg: DictConfig, key: str, minimum: int, where: str) -> None:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"'{where}.{key}'={value!r}: must be an integer >= {minimum}")


def validate_eval_section(eval_cfg: DictConfig) -> None:
    """The counts of ``eval`` and ``eval.video`` (the rest is checked where it is read, before any episode)."""
    _count(eval_cfg, "episodes_per_task", 1, "eval")
    _count(eval_cfg, "num_envs", 1, "eval")
    _count(eval_cfg, "num_workers", 0, "eval")
    _count(eval_cfg.video, "episodes_per_task", 0, "eval.video")
    _count(eval_cfg.video, "grid_envs", 0, "eval.video")
    if float(eval_cfg.expert_noise_std) < 0:
        raise ConfigError(f"'eval.expert_noise_std'={eval_cfg.expert_noise_std!r}: must be >= 0")


def validate_policy_section(policy_cfg: DictConfig) -> None:
    """``policy.factory`` imports; the factory's module checks the rest if it has ``validate_policy_config``
    (the default ``policies.vla`` does: keys, head name and head options)."""
    import importlib

    from envs.registry import import_object

    factory = str(policy_cfg.get("factory"))
    try:
        import_object(factory)
    except (ImportError, AttributeError, ValueError) as error:
        raise ConfigError(f"'policy.factory'={factory!r}: {error}; give a module:function import path") from None
    check = getattr(importlib.import_module(factory.partition(":")[0]), "validate_policy_config", None)
    if check is not None:
        config = OmegaConf.to_container(policy_cfg, resolve=True)
        config.pop("factory")
        try:
            check(config)
        except (TypeError, ValueError) as error:
            raise ConfigError(f"'policy': {error}") from None


def validate_sft_config(sft_cfg: DictConfig) -> None:
    """The ``sft`` section: ``dataset``, ``output`` and the fields of ``vla_rl.sft.SFTConfig``."""
    from vla_rl.sft import SECTION_PATH_KEYS, SFTConfig

    for key in SECTION_PATH_KEYS:
        if not sft_cfg.get(key):
            raise ConfigError(f"'sft.{key}' must name a folder, got {sft_cfg.get(key)!r}")
    try:
        SFTConfig.from_dict({key: sft_cfg[key] for key in sft_cfg if key not in SECTION_PATH_KEYS})
    except (TypeError, ValueError) as error:
        raise ConfigError(f"section 'sft': {error}") from None


def validate_env_config(env_cfg: DictConfig) -> None:
    """The env id and tasks exist; kwargs are parameters of the env's factory."""
    from envs.registry import UnknownEnvError, resolve

    try:
        entry, _ = resolve(str(env_cfg.id))
    except (UnknownEnvError, ImportError, ValueError) as error:
        raise ConfigError(f"'env.id': {error}") from None
    tasks = resolve_tasks(env_cfg, entry.tasks)
    for task in tasks:
        if task not in entry.tasks:
            raise ConfigError(f"'env.tasks': env {entry.name!r} has no task {task!r}; allowed: {', '.join(entry.tasks)}")
    factory = entry.load_factory()
    parameters = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    allowed = [name for name in parameters if name != "task"]
    for key in env_cfg.get("kwargs") or {}:
        if key not in parameters and not takes_any:
            raise ConfigError(f"unknown env option 'env.kwargs.{key}' for {entry.name!r}; allowed: {', '.join(allowed)}")


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
