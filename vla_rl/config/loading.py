"""Loading and validating the Hydra config of every vla-rl command.

The configs live in ``configs/`` at the repository root (groups ``env``, ``policy``,
``algo``, ``trainer``, ``experiment``); ``VLA_RL_CONFIGS`` points elsewhere. The sections that a dataclass
describes (``algo``, ``trainer``, ``sft``) take their defaults from it (:mod:`vla_rl.config.defaults`),
and the yaml files only override them. Folders of your
own (``--config-dir DIR`` on the command line, ``VLA_RL_CONFIG_PATH=DIR1:DIR2``), then the folders
that installed plug-ins ship (entry points ``vla_rl.configs``, :mod:`contract.plugins`) are searched
after it, so that ``DIR/env/my_env.yaml`` is ``env=my_env`` and ``DIR/experiment/x.yaml`` is
``experiment=x``. Commands compose them with command-line overrides (``env.tasks=[lift] seed=3``)
and get an ``omegaconf.DictConfig`` in struct mode. Every error a user can make (an unknown key,
a group option that does not exist, a bad value) becomes a :class:`ConfigError` that names the
key and lists the allowed keys or values.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from vla_rl.config import REPO_ROOT, read_section
from vla_rl.config.env import read_env_section
from vla_rl.config.errors import ConfigError

#: Extra config folders (os.pathsep-separated), searched after the vla-rl configs.
CONFIG_PATH_VARIABLE = "VLA_RL_CONFIG_PATH"
#: The env option that ``env.id=...`` without ``env=...`` selects: no tasks or factory options of another env.
ENV_BY_ID = "id_only"
#: Sections whose every field the composed config holds (their dataclass defaults come first).
DATACLASS_SECTIONS = ("algo.", "trainer.", "sft.")
_command_line_dirs: list[Path] = []


def config_dir() -> Path:
    path = Path(os.environ.get("VLA_RL_CONFIGS", REPO_ROOT / "configs")).resolve()
    if not (path / "config.yaml").is_file():
        raise ConfigError(
            f"config folder {path} has no config.yaml; set VLA_RL_CONFIGS to the folder holding the "
            "vla-rl configs, or run from a clone of the repository"
        )
    return path


def extra_config_dirs() -> list[Path]:
    """Your config folders, searched after :func:`config_dir`: ``--config-dir`` ones, then ``VLA_RL_CONFIG_PATH``,
    then those of installed plug-ins (entry points ``vla_rl.configs``).

    Raises:
        ConfigError: a folder does not exist, or a plug-in's config entry point is broken.
    """
    from contract.plugins import PluginError, plugin_config_dirs

    variable = [Path(p).expanduser().resolve() for p in os.environ.get(CONFIG_PATH_VARIABLE, "").split(os.pathsep) if p]
    sources = [(f, "--config-dir") for f in _command_line_dirs] + [(f, CONFIG_PATH_VARIABLE) for f in variable]
    folders = []
    for folder, source in sources:
        if not folder.is_dir():
            raise ConfigError(f"config folder {folder} (from {source}) does not exist; give a folder holding config "
                              "groups, e.g. DIR/env/my_env.yaml for env=my_env")  # fmt: skip
        if folder not in folders:
            folders.append(folder)
    try:
        plugged = plugin_config_dirs()
    except PluginError as error:
        raise ConfigError(str(error)) from None
    folders.extend(folder for folder, _ in plugged if folder not in folders)
    return folders


@contextlib.contextmanager
def searching_config_dirs(folders: Sequence[str | Path]) -> Iterator[None]:
    """Search ``folders`` too (after the vla-rl configs) while composing configs inside the block (``--config-dir``)."""
    added = [Path(f).expanduser().resolve() for f in folders]
    _command_line_dirs.extend(added)
    try:
        yield
    finally:
        del _command_line_dirs[len(_command_line_dirs) - len(added) :]


def _search_dirs() -> list[Path]:
    return [config_dir(), *extra_config_dirs()]


def group_options(group: str) -> list[str]:
    folders = [folder / group for folder in _search_dirs() if (folder / group).is_dir()]
    return sorted({path.stem for folder in folders for path in folder.glob("*.yaml")})


def _known_keys(cfg: DictConfig | None, dotted: str) -> list[str]:
    node: Any = cfg
    for part in [p for p in dotted.split(".") if p]:
        if not isinstance(node, DictConfig) or part not in node:
            return []
        node = node[part]
    return sorted(node.keys()) if isinstance(node, DictConfig) else []


def _override_key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def prepare_overrides(overrides: Sequence[str]) -> list[str]:
    """The command-line overrides as Hydra composes them.

    - ``env.id=X`` without an ``env=`` choice selects ``env=id_only`` too: the env starts from clean settings
      (every task of X, the factory's own defaults), not from the tasks and kwargs of the default env.
    - ``env.kwargs.K=V`` becomes ``++env.kwargs.K=V`` (set or add): env options are checked against the
      parameters of the env's factory (:func:`read_env_section`), not against the keys of an env file.
      ``env.remote*=V`` too: the remote env keys (:func:`remote_env_config`) are in no env file.
    - ``+algo.K=V`` (and ``+trainer.``, ``+sft.``) becomes ``++algo.K=V``: every field of those sections is in
      the composed config (:mod:`vla_rl.config.defaults`), and an older command that added one keeps working.
    """
    prepared = []
    for override in overrides:
        if not override.startswith(("+", "~")) and _override_key(override).startswith(("env.kwargs.", "env.remote")):
            override = "++" + override
        elif override.startswith("+") and not override.startswith("++") and override[1:].startswith(DATACLASS_SECTIONS):
            override = "+" + override
        prepared.append(override)
    keys = [_override_key(o) for o in overrides if not o.startswith("~")]
    if "env.id" in keys and "env" not in keys:
        prepared.insert(0, f"env={ENV_BY_ID}")
    return prepared


def _compose(config_name: str, overrides: Sequence[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from vla_rl.config.defaults import register_defaults

    register_defaults()
    extra = extra_config_dirs()
    search = [f"hydra.searchpath=[{','.join(folder.as_uri() for folder in extra)}]"] if extra else []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            return compose(config_name=config_name, overrides=[*search, *overrides])
    finally:
        GlobalHydra.instance().clear()


def load_config(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose ``configs/<config_name>.yaml`` (and your config folders) with Hydra ``overrides``; validate it.

    Raises:
        ConfigError: unknown key, unknown group option or bad value, with what is allowed.
    """
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    overrides = prepare_overrides(overrides)
    try:
        cfg = _compose(config_name, overrides)
    except MissingConfigException as error:
        raise ConfigError(_explain_missing_group(str(error), overrides)) from None
    except (ConfigCompositionException, OverrideParseException) as error:
        raise ConfigError(_explain_composition(error, overrides)) from None
    OmegaConf.set_struct(cfg, True)
    check_experiment_head(cfg, overrides)
    validate_config(cfg)
    return cfg


def _choices(overrides: Sequence[str]) -> dict[str, Any]:
    """The group options Hydra chose for ``overrides`` (``{"policy": "gaussian", ...}``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    extra = extra_config_dirs()
    search = [f"hydra.searchpath=[{','.join(folder.as_uri() for folder in extra)}]"] if extra else []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            cfg = compose(config_name="config", overrides=[*search, *overrides], return_hydra_config=True)
            return dict(cfg.hydra.runtime.choices)
    finally:
        GlobalHydra.instance().clear()


def check_experiment_head(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """An experiment that chooses a policy chooses its head; ``policy=P`` on the command line must keep that head or
    name the one it wants.

    ``experiment=gaussian_ppo policy=vlm`` composes the VLM policy file, whose head (flow) replaces the experiment's
    (gaussian): the run would train another head than the experiment's name says. Refused unless
    ``policy.head.name=...`` says which head to train. Policies without a ``head`` section (a factory of one's own)
    and experiments that choose no policy (``rl_only``) are not concerned.

    Raises:
        ConfigError: the heads differ and no ``policy.head.name`` override says which one.
    """
    keys = {_override_key(o): o for o in overrides if not o.startswith("~")}
    if "policy" not in keys or "experiment" not in keys or "policy.head.name" in keys or "policy.head" in keys:
        return
    head = OmegaConf.select(cfg, "policy.head.name", default=None)
    if head is None:
        return
    # the policy choice and its keys dropped (`policy.backbone.source` exists only in the chosen policy's file)
    without_policy = [o for o in overrides if not _override_key(o).startswith(("policy.", "policy="))
                      and _override_key(o) != "policy"]  # fmt: skip
    experiment_policy = _choices(without_policy).get("policy")
    root_policy = _choices([o for o in without_policy if o != keys["experiment"]]).get("policy")
    if experiment_policy == root_policy:  # the experiment chooses no policy of its own
        return
    experiment_head = OmegaConf.select(_compose("config", without_policy), "policy.head.name", default=None)
    if experiment_head is None or experiment_head == head:
        return
    experiment, policy = cfg.experiment.name, keys["policy"].partition("=")[2]
    raise ConfigError(
        f"experiment={experiment} trains the head {experiment_head!r} (its policy={experiment_policy}), but policy={policy} "
        f"brings the head {head!r}: the run would train {head!r} under {experiment}'s name and settings. Say which "
        f"head to train: policy.head.name={experiment_head} (the experiment's), or policy.head.name={head}"
    )


def _explain_missing_group(message: str, overrides: Sequence[str]) -> str:
    for override in overrides:
        group, _, choice = override.partition("=")
        group = group.lstrip("+~")
        if "." not in group and any((folder / group).is_dir() for folder in _search_dirs()):
            options = group_options(group)
            if choice not in options:
                searched = ", ".join(str(folder / group) for folder in _search_dirs())
                return (f"config group '{group}' has no option {choice!r}; allowed: {', '.join(options)} (searched "
                        f"{searched}; add your own folder with --config-dir DIR or {CONFIG_PATH_VARIABLE})")  # fmt: skip
    return message


def _explain_composition(error: Exception, overrides: Sequence[str]) -> str:
    message = str(error)
    cause = error.__cause__ or error
    cause_text = str(cause)
    # The most specific key first: `policy.pool_sise=3` is the culprit, not the `policy=...` choice before it.
    for override in sorted(overrides, key=lambda o: -len(_override_key(o))):
        key = _override_key(override)
        if f"'{key}'" in message or f"full_key: {key}\n" in f"{cause_text}\n":
            parent, _, leaf = key.rpartition(".")
            try:
                base = compose_without(overrides, override)
            except Exception:  # noqa: BLE001 - only used to list known keys
                base = None
            known = _known_keys(base, parent)
            where = f"under '{parent}'" if parent else "at the top level"
            hint = f"; known keys {where}: {', '.join(known)}" if known else ""
            if "not in struct" in cause_text or "Could not override" in message or "Could not append" in message:
                return f"unknown config key '{key}'{_suggestion(override, parent, leaf, known)}{hint}"
            return f"bad override {override!r}: {cause_text.splitlines()[0]}{hint}"
    return message


def _suggestion(override: str, parent: str, leaf: str, known: Sequence[str]) -> str:
    """``; did you mean 'policy.pool_size'?`` for a typo, or how to add a key that no file declares."""
    import difflib

    close = difflib.get_close_matches(leaf, list(known), n=1, cutoff=0.75)
    if close:
        return f"; did you mean '{parent + '.' if parent else ''}{close[0]}'?"
    if override.startswith("+"):
        return ""
    return f"; to add a key the config files do not declare, write +{override}"


def compose_without(overrides: Sequence[str], dropped: str) -> DictConfig:
    """The config composed with every override but ``dropped`` (to list what a key could have been)."""
    return _compose("config", [o for o in overrides if o != dropped])


def validate_config(cfg: DictConfig) -> None:
    """Check every section before any work: ``env`` against its factory, ``policy`` through its factory's module,
    the others by reading them into their dataclasses (collect, eval, sft, algo, trainer)."""
    from vla_rl.stages.collect import CollectConfig
    from vla_rl.stages.evaluation.config import EvalConfig

    for key in ("env", "seed", "run_dir", "collect"):
        if key not in cfg:
            raise ConfigError(f"config lacks the key '{key}'")
    if not isinstance(cfg.seed, int):
        raise ConfigError(f"'seed' must be an integer, got {cfg.seed!r}")
    env = read_env_section(cfg)
    read_section(cfg, "collect", CollectConfig)
    if "sft" in cfg:
        validate_sft_config(cfg.sft)
    if "policy" in cfg:
        validate_policy_section(cfg.policy)
    if "eval" in cfg:
        read_section(cfg, "eval", EvalConfig)
    if "record" in cfg:
        from vla_rl.runtime.run_record import RecordConfig

        read_section(cfg, "record", RecordConfig)
    if "algo" in cfg and "trainer" in cfg:
        from vla_rl.stages.rl.config import validate_rl_sections

        validate_rl_sections(cfg, len(env.tasks))


def validate_policy_section(policy_cfg: DictConfig) -> None:
    """``policy.factory`` imports; the factory's module checks the rest if it has ``validate_policy_config``
    (the default ``policies.vla`` does: keys, head name and head options). A plug-in's name in
    ``policy.factory`` is replaced by the import path it declares, so that every later stage imports that."""
    import importlib

    from contract.import_path import import_object
    from policies.factory import resolve_factory_path
    from vla_rl.workers.policy_factory import check_chunk_size

    factory = str(policy_cfg.get("factory"))
    try:
        factory = resolve_factory_path(factory)
        if factory != policy_cfg.get("factory"):
            policy_cfg.factory = factory
        import_object(factory, "policy factory")
    except (ImportError, AttributeError, ValueError) as error:
        raise ConfigError(f"'policy.factory'={factory!r}: {error}; give a module:function import path") from None
    check = getattr(importlib.import_module(factory.partition(":")[0]), "validate_policy_config", None)
    config = OmegaConf.to_container(policy_cfg, resolve=True)
    config.pop("factory")
    try:
        if check is not None:
            check(config)
        check_chunk_size(config, factory)
    except (TypeError, ValueError) as error:
        message = str(error)
        raise ConfigError(message if message.startswith("'policy.") else f"'policy': {message}") from None


def validate_sft_config(sft_cfg: DictConfig) -> None:
    """The ``sft`` section: ``dataset``, ``output`` and the fields of ``vla_rl.stages.sft.config.SFTConfig``."""
    from contract.config_reader import FieldError
    from vla_rl.stages.sft.config import SECTION_PATH_KEYS, read_sft_section

    for key in SECTION_PATH_KEYS:
        if not sft_cfg.get(key):
            raise ConfigError(f"'sft.{key}' must name a folder, got {sft_cfg.get(key)!r}")
    try:
        read_sft_section(OmegaConf.to_container(sft_cfg, resolve=True))
    except FieldError as error:
        raise ConfigError(error.message()) from None
