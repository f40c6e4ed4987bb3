"""Save and load a VLA policy as one folder: ``model.safetensors``, ``config.json``, ``stats.json``.

``config.json`` holds ``{"format_version", "factory", "policy": <config>, "io_spec": <PolicyIOSpec>}``.
Any policy saves this way (see :mod:`policies.factory`): ``factory`` is the import path of the function that
built it, and loading rebuilds the policy through that factory (folders without it were written by the
default :class:`VLAPolicy`). The folder is written under a temporary name next to the target and renamed
into place, so a crash never leaves a half-written policy behind. Loading loads the weights strictly: any
missing, unexpected or mis-shaped key is an error that lists them.

A frozen pretrained language encoder is *referenced* by its ``language.source`` (a local
folder or an installed package), not saved: its weights are not part of ``state_dict()``
(see ``policies.encoders.pretrained_language``). Loading reads it from that source, offline;
a machine that loads the policy needs the same source. A trainable one is saved like any
other module.

A folder whose head has since been renamed (``policies.heads.legacy``) loads as today's head: its head
section and weight names are upgraded on the way in, with the same behaviour.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from policies.config import PolicyConfig, PolicyIOSpec
from policies.factory import DEFAULT_POLICY_FACTORY, build_from_factory, factory_of, plain_dict
from policies.heads.legacy import upgrade_head, upgrade_weights
from policies.normalization import load_stats, save_stats

if TYPE_CHECKING:
    from torch import nn

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
STATS_FILE = "stats.json"
FORMAT_VERSION = 1


class StateDictMismatchError(RuntimeError):
    """The saved weights do not match the policy rebuilt from the saved config."""


def save_pretrained(policy: nn.Module, directory: str | Path) -> Path:
    """Write ``policy`` into ``directory`` (replaced atomically if it exists); returns the path."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = directory.parent / f".{directory.name}.tmp-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        # safetensors refuses shared storage and non-contiguous views: save independent copies.
        weights = {key: value.detach().cpu().contiguous().clone() for key, value in policy.state_dict().items()}
        save_file(weights, str(staging / WEIGHTS_FILE), metadata={"format": "pt"})
        config = {
            "format_version": FORMAT_VERSION,
            "factory": factory_of(policy),
            "policy": plain_dict(policy.config, "config"),
            "io_spec": plain_dict(policy.io_spec, "io_spec"),
        }
        (staging / CONFIG_FILE).write_text(json.dumps(config, indent=2))
        save_stats(policy.stats, staging / STATS_FILE)
        if directory.exists():
            retired = directory.parent / f".{directory.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(directory, retired)
            os.rename(staging, directory)
            shutil.rmtree(retired)
        else:
            os.rename(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} does not exist; is this a folder written by save_pretrained?")
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read {str(path)!r}: {error}") from error


def load_saved_config(directory: str | Path) -> tuple[str, dict, dict]:
    """``(factory, policy config dict, io spec dict)`` saved in ``directory`` (any policy)."""
    path = Path(directory) / CONFIG_FILE
    data = _read_json(path)
    for key in ("policy", "io_spec"):
        if key not in data:
            raise ValueError(f"{str(path)!r} lacks {key!r}; it has {sorted(data)}")
    policy = dict(data["policy"])
    if isinstance(policy.get("head"), dict):
        policy["head"] = upgrade_head(policy["head"])
    return str(data.get("factory", DEFAULT_POLICY_FACTORY)), policy, data["io_spec"]


def load_config(directory: str | Path) -> tuple[PolicyConfig, PolicyIOSpec]:
    """The :class:`PolicyConfig` and io spec of a :class:`VLAPolicy` saved in ``directory``."""
    _, config, io_spec = load_saved_config(directory)
    try:
        return PolicyConfig.from_dict(config), PolicyIOSpec.from_spec(io_spec)
    except ValueError as error:
        raise ValueError(f"invalid policy config in {str(Path(directory) / CONFIG_FILE)!r}: {error}") from error


def load_state_dict_strict(module: torch.nn.Module, weights: dict[str, torch.Tensor], source: str) -> None:
    """``module.load_state_dict(weights)`` that lists every missing, unexpected and mis-shaped key."""
    expected = module.state_dict()
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    mismatched = sorted(
        f"{key}: saved {tuple(weights[key].shape)} vs model {tuple(expected[key].shape)}"
        for key in set(expected) & set(weights)
        if weights[key].shape != expected[key].shape
    )
    if missing or unexpected or mismatched:
        raise StateDictMismatchError(
            f"weights in {source!r} do not match the policy built from its config: missing keys {missing}, "
            f"unexpected keys {unexpected}, shape mismatches {mismatched}. The folder was written by a "
            f"different version or its config.json was edited."
        )
    module.load_state_dict(weights, strict=True)


def load_pretrained(directory: str | Path, device: str | torch.device | None = None) -> nn.Module:
    """Rebuild a policy saved by :func:`save_pretrained` through its factory and load its weights strictly."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"policy folder {str(directory)!r} does not exist; pass a folder written by "
                                f"save_pretrained")
    factory, config, io_spec = load_saved_config(directory)
    stats = load_stats(directory / STATS_FILE)
    try:
        policy = build_from_factory(factory, config, io_spec, stats or None)
    except (TypeError, ValueError) as error:
        raise ValueError(f"invalid policy config in {str(directory / CONFIG_FILE)!r}: {error}") from error
    weights_path = directory / WEIGHTS_FILE
    if not weights_path.is_file():
        raise FileNotFoundError(f"{str(weights_path)!r} does not exist; the policy folder is incomplete")
    try:
        weights = load_file(str(weights_path))
    except (SafetensorError, OSError) as error:
        raise ValueError(f"cannot read weights file {str(weights_path)!r}: {error}") from error
    saved_head = _read_json(directory / CONFIG_FILE)["policy"].get("head", {})
    weights = upgrade_weights(saved_head.get("name", ""), weights)
    load_state_dict_strict(policy, weights, str(weights_path))
    if device is not None:
        policy.to(device)
    return policy
