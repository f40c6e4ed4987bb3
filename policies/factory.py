"""Policies by import path: the factory a policy is built with, and what it must provide.

A policy factory is any function ``make(config: dict, io_spec: dict, stats: dict | None) -> nn.Module``,
named by ``"package.module:function"`` in ``policy.factory``, or by the name of an installed plug-in that
declares it as an entry point of the group ``vla_rl.policies`` (``policy.factory=my_policy``; see
:mod:`contract.plugins` and ``vla-rl policies list``). The built-in policies go through the same
path (``policies.vla:build_policy``, ``policies.backbones.vlm_policy:build_policy``). The module may define
``validate_policy_config(config: dict)`` that raises ``ValueError`` naming a bad key; the driver calls it
before any work.

What the returned module must provide (the policy protocol, :class:`contract.policy.Policy`, checked by
``vla-rl policies check``, :mod:`policies.checks`; docs/new_policy_guide.md):

- ``act(obs, deterministic=False, generator=None) -> (actions (B, H, A) in env units, extras)``, where
  ``extras`` holds at least ``"log_prob"`` ``(B, H, A)`` and ``"value"`` ``(B,)`` (tensors with leading
  dim B; everything ``evaluate`` needs later);
- ``evaluate(obs, extras) -> (log_prob (B, H, A), entropy (B, H, A) or None, value (B,))`` with gradients,
  equal to ``act``'s ``log_prob`` for the same weights;
- ``value(obs) -> (B,)``; ``bc_loss(batch) -> scalar`` with ``batch["action"]`` ``(B, H, A)`` in env units;
- ``config`` (a dataclass with ``to_dict()``, or a plain dict) with ``chunk_size``, read through
  :func:`chunk_size_of`; ``io_spec`` (``to_dict()`` or a dict); ``stats`` (the statistics it was built with);
  ``device``;
- ``save_pretrained(folder) -> Path``: writes the policy and **returns the folder** (SFT and RL use the return
  value); usually ``return policies.hub.save_pretrained(self, folder)``, which writes the weights, config, io
  spec, statistics and this factory's path, so that :func:`policies.hub.load_pretrained` can rebuild any
  policy through its own factory.

``bc_loss`` gets SFT's batches: torch CPU tensors (``images`` uint8 ``(B, H, W, 3)`` per camera, ``state``
float32 ``(B, S)``, ``action`` float32 ``(B, H, A)``, ``action_mask`` bool ``(B, H)``) and a list of B
instructions; ``act`` and ``evaluate`` get the rollouts' numpy observations.

The critic's parameters live under ``value_head.`` (the optimizer gives them ``optim.critic_lr``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from torch import nn

from contract.import_path import import_object
from contract.plugins import POLICY_GROUP, installed_plugins

DEFAULT_POLICY_FACTORY = "policies.vla:build_policy"
#: The attribute that records on a built policy the import path of the factory that built it.
FACTORY_ATTRIBUTE = "factory_path"


def resolve_factory_path(path: str) -> str:
    """``path`` itself, or the import path that an installed policy plug-in of that name declares.

    Raises:
        ValueError: ``path`` is neither ``"package.module:function"`` nor the name of an installed plug-in.
    """
    path = str(path)
    if ":" in path:
        return path
    plugins = {plugin.name: plugin for plugin in installed_plugins(POLICY_GROUP)}
    if path in plugins:
        return plugins[path].value
    installed = ", ".join(f"{name} ({plugin.source})" for name, plugin in plugins.items()) or "none"
    raise ValueError(f"policy factory {path!r} must look like 'package.module:function' or name an installed policy "
                     f"plug-in (entry point group 'vla_rl.policies'; installed: {installed})")  # fmt: skip


def import_factory(path: str) -> Callable[..., nn.Module]:
    """The function named by ``"package.module:function"`` or by an installed plug-in's name.

    Raises:
        ValueError: ``path`` is not of that form and names no plug-in.
        ImportError: the module or the function does not exist (the message says which).
    """
    path = resolve_factory_path(path)
    factory = import_object(path, "policy factory")
    if not callable(factory):
        raise ImportError(f"policy factory {path!r} is a {type(factory).__name__}, not a function")
    return factory


def build_from_factory(
    path: str, config: Mapping[str, Any], io_spec: Mapping[str, Any], stats: Mapping[str, Any] | None
) -> nn.Module:
    """Call the factory at ``path`` and record ``path`` on the policy (``save_pretrained`` writes it)."""
    path = resolve_factory_path(path)
    policy = import_factory(path)(dict(config), dict(io_spec), stats)
    if not isinstance(policy, nn.Module):
        raise TypeError(f"policy factory {path!r} returned {type(policy).__name__}; it must return a torch nn.Module")
    setattr(policy, FACTORY_ATTRIBUTE, path)
    return policy


def factory_of(policy: nn.Module) -> str:
    """The import path of the factory that built ``policy`` (the default one for a policy built directly)."""
    return str(getattr(policy, FACTORY_ATTRIBUTE, DEFAULT_POLICY_FACTORY))


class PolicyProtocolError(TypeError):
    """A policy breaks the protocol above in a way the framework meets at run time; the message names the member."""


def save_policy(policy: nn.Module, folder: str | Path) -> Path:
    """``policy.save_pretrained(folder)``, checked: the folder it returns, which holds ``config.json``.

    Raises:
        PolicyProtocolError: it returned something else (``None``: the ``return`` is missing).
    """
    returned = policy.save_pretrained(folder)
    name = f"{type(policy).__module__}.{type(policy).__qualname__}.save_pretrained"
    if returned is None:
        raise PolicyProtocolError(
            f"{name}({str(folder)!r}) returned None; it must return the folder it wrote "
            "(`return policies.hub.save_pretrained(self, folder)`; docs/new_policy_guide.md)"
        )
    if not (Path(returned) / "config.json").is_file():
        raise PolicyProtocolError(f"{name}({str(folder)!r}) returned {returned!r}, which holds no config.json; it must "
                                  "return the folder it wrote")  # fmt: skip
    return Path(returned)


def chunk_size_of(policy: nn.Module) -> int:
    """``chunk_size`` of the policy's config, whether a dataclass or a plain dict (the actions ``H`` per chunk).

    Raises:
        PolicyProtocolError: the config has no positive integer ``chunk_size``.
    """
    config = plain_dict(policy.config, "config")
    value = config.get("chunk_size")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyProtocolError(f"the config of {type(policy).__name__} must hold chunk_size, a positive integer "
                                  f"(actions per chunk); got {value!r} among keys {sorted(config)}")  # fmt: skip
    return value


def plain_dict(value: Any, what: str) -> dict[str, Any]:
    """``value.to_dict()`` or ``dict(value)``: a policy's config or io spec as JSON-able data."""
    if hasattr(value, "to_dict"):
        return dict(value.to_dict())
    if isinstance(value, Mapping):
        return dict(value)
    raise PolicyProtocolError(f"the policy's {what} is a {type(value).__name__}; give it to_dict() or make it a dict")
