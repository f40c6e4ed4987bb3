"""The defaults of every config section that a dataclass describes, as the first layer of the composed config.

Each knob's default is defined once, in its dataclass (``algo``: :class:`~vla_rl.stages.rl.config.AlgoConfig`
with ``update`` and ``optim``; ``trainer``: :class:`~vla_rl.stages.rl.config.TrainerConfig` with ``sharding``;
``sft``: :class:`~vla_rl.stages.sft.config.SFTConfig`; ``collect``: :class:`~vla_rl.stages.collect.CollectConfig`;
``eval``: :class:`~vla_rl.stages.evaluation.config.EvalConfig`). :func:`register_defaults` stores those defaults as the
Hydra config ``vla_rl_defaults``, which ``configs/config.yaml`` lists first: the yaml files of the groups
and the experiments then only override, and every key exists for a command-line override.
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: The config node ``configs/config.yaml`` lists first in its defaults.
DEFAULTS_NODE = "vla_rl_defaults"


def plain(instance: Any) -> Any:
    """A dataclass instance as yaml-ready data: nested dataclasses as dicts, tuples as lists."""
    if dataclasses.is_dataclass(instance):
        return {f.name: plain(getattr(instance, f.name)) for f in dataclasses.fields(instance) if f.init}
    if isinstance(instance, list | tuple):
        return [plain(item) for item in instance]
    if isinstance(instance, dict):
        return {key: plain(value) for key, value in instance.items()}
    return instance


def section_defaults() -> dict[str, Any]:
    """``{"algo": ..., "trainer": ..., "sft": ..., "collect": ..., "eval": ...}``: each section's dataclass defaults."""
    from vla_rl.stages.collect import CollectConfig
    from vla_rl.stages.evaluation.config import EvalConfig
    from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig
    from vla_rl.stages.sft.config import SFTConfig

    return {"algo": plain(AlgoConfig()), "trainer": plain(TrainerConfig()), "sft": plain(SFTConfig()),
            "collect": plain(CollectConfig()), "eval": plain(EvalConfig())}  # fmt: skip


def register_defaults() -> None:
    """Store :func:`section_defaults` in Hydra's config store as :data:`DEFAULTS_NODE` (before composing)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=DEFAULTS_NODE, node=section_defaults())
