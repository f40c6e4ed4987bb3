"""The defaults of every config section that a dataclass describes, as the first layer of the composed config.

Each knob's default is defined once, in its dataclass (``algo``: :class:`~vla_rl.stages.rl.config.AlgoConfig`
with ``update`` and ``optim``; ``trainer``: :class:`~vla_rl.stages.rl.config.TrainerConfig` with ``sharding``;
``sft``: :class:`~vla_rl.stages.sft.config.SFTConfig`; ``collect``: :class:`~vla_rl.stages.collect.CollectConfig`;
``eval``: :class:`~vla_rl.stages.evaluation.config.EvalConfig`; ``record``:
:class:`~vla_rl.runtime.run_record.RecordConfig`). :func:`register_defaults` stores those defaults as the
Hydra config ``vla_rl_defaults``, which ``configs/config.yaml`` lists first: the yaml files of the groups
and the experiments then only override, and every key exists for a command-line override.
"""

from __future__ import annotations

import dataclasses
import math
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
    """``{"algo": ..., "trainer": ..., "sft": ..., "collect": ..., "eval": ..., "record": ...}``: each section's dataclass defaults."""
    from vla_rl.runtime.run_record import RecordConfig
    from vla_rl.stages.collect import CollectConfig
    from vla_rl.stages.evaluation.config import EvalConfig
    from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig
    from vla_rl.stages.sft.config import SFTConfig

    return {"algo": plain(AlgoConfig()), "trainer": plain(TrainerConfig()), "sft": plain(SFTConfig()),
            "collect": plain(CollectConfig()), "eval": plain(EvalConfig()), "record": plain(RecordConfig())}  # fmt: skip


def dataclass_defaults(cls: type) -> dict[str, Any]:
    """The defaults of ``cls``'s fields as yaml-ready data, nested dataclasses as dicts, without building
    ``cls`` (whose checks may refuse its defaults: e.g. a required model folder); fields without a default are
    left out."""
    import typing

    hints = typing.get_type_hints(cls)
    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            defaults[f.name] = dataclass_defaults(hints[f.name])
        elif f.default is not dataclasses.MISSING:
            defaults[f.name] = plain(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            defaults[f.name] = plain(f.default_factory())
    return defaults


def policy_defaults() -> dict[str, dict[str, Any]]:
    """Hydra nodes of the ``policy`` group, one per built-in policy: its factory and its config dataclass's
    defaults (``policy/vla_defaults``: :class:`policies.config.PolicyConfig`; ``policy/vlm_defaults``:
    :class:`policies.backbones.config.VLMPolicyConfig`; ``policy/token_vla_defaults`` and
    ``policy/expert_vla_defaults``: the two VLA families of :mod:`policies.backbones`). The policy yaml files list one first and override it.
    A policy of your own (``policy.factory=...``) brings its own yaml with every key it reads."""
    from policies.backbones.config import VLMPolicyConfig
    from policies.backbones.expert_vla import ExpertVLAConfig
    from policies.backbones.token_vla import TokenVLAConfig
    from policies.config import PolicyConfig

    return {
        "vla_defaults": {"factory": "policies.vla:build_policy", **dataclass_defaults(PolicyConfig)},
        "vlm_defaults": {"factory": "policies.backbones.vlm_policy:build_policy", **dataclass_defaults(VLMPolicyConfig)},
        "token_vla_defaults": {"factory": "policies.backbones.token_vla:build_policy",
                               **dataclass_defaults(TokenVLAConfig)},
        "expert_vla_defaults": {"factory": "policies.backbones.expert_vla:build_policy",
                                **dataclass_defaults(ExpertVLAConfig)},
    }


def path_name(env_id: str) -> str:
    """An env id as one path-safe folder name: ``my_pkg.env:make`` -> ``my_pkg.env.make``; a registered name
    (``tabletop``, ``metaworld``) is its own folder name, unchanged."""
    return str(env_id).replace(":", ".")


def product(*factors: int) -> int:
    """The product of integer config values: ``${product:${trainer.iterations},${algo.update.epochs},...}`` (the
    optimiser steps of a run, for a schedule's length that follows an overridden iteration count)."""
    return math.prod(int(factor) for factor in factors)


def register_defaults() -> None:
    """Store :func:`section_defaults` in Hydra's config store as :data:`DEFAULTS_NODE`, and the policy group's
    :func:`policy_defaults` (before composing); register the ``${path_name:...}`` and ``${product:...}``
    resolvers (:func:`path_name`, :func:`product`)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("path_name", path_name, replace=True)
    OmegaConf.register_new_resolver("product", product, replace=True)

    store = ConfigStore.instance()
    store.store(name=DEFAULTS_NODE, node=section_defaults())
    for name, node in policy_defaults().items():
        store.store(group="policy", name=name, node=node)
