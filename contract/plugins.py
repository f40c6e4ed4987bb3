"""Plug-ins found by installing them: Python entry points of three groups.

A package plugs into vla-rl by declaring entry points in its ``pyproject.toml``; ``pip install`` is then
enough, no ``PYTHONPATH`` and no ``--config-dir``::

    [project.entry-points."vla_rl.envs"]
    my_env = "my_pkg.env:make"            # env=NAME / env.id=my_env: the factory, with make.tasks

    [project.entry-points."vla_rl.policies"]
    my_policy = "my_pkg.policy:make"      # policy.factory=my_policy: a policy factory

    [project.entry-points."vla_rl.configs"]
    my_pkg = "my_pkg.configs"             # a config folder inside the package: configs/env/my_env.yaml

The value of a ``vla_rl.configs`` entry point is a dotted path whose first part is an importable package
and whose other parts are folders under it; the folder holds config groups in the layout of vla-rl's
``configs/`` and is searched after it (and after ``--config-dir`` and ``VLA_RL_CONFIG_PATH``). Finding
the folder imports nothing.

This module imports nothing of vla-rl: the env registry and the policy factory use it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ENV_GROUP = "vla_rl.envs"
POLICY_GROUP = "vla_rl.policies"
CONFIG_GROUP = "vla_rl.configs"


class PluginError(ValueError):
    """An installed plug-in's entry point is broken; the message names the package and the entry point."""


@dataclass(frozen=True)
class Plugin:
    """One entry point: ``name = value`` declared by the distribution ``package`` at ``version``."""

    group: str
    name: str
    value: str
    package: str
    version: str
    summary: str = ""

    @property
    def source(self) -> str:
        """``package version``: where the plug-in comes from (what ``envs list`` prints)."""
        return f"{self.package} {self.version}"


def installed_plugins(group: str) -> list[Plugin]:
    """The entry points of ``group`` of every installed distribution, sorted by name (first one wins a name)."""
    found: dict[str, Plugin] = {}
    for point in metadata.entry_points(group=group):
        dist = getattr(point, "dist", None)
        package = dist.metadata["Name"] if dist is not None else "?"
        version = dist.version if dist is not None else "?"
        summary = (dist.metadata["Summary"] or "") if dist is not None else ""
        found.setdefault(point.name, Plugin(group, point.name, point.value, package, version, summary))
    return [found[name] for name in sorted(found)]


def config_folder(plugin: Plugin) -> Path:
    """The folder named by a ``vla_rl.configs`` entry point (``pkg.sub.folder``), found without importing.

    Raises:
        PluginError: the package is not importable, or the folder does not exist.
    """
    head, *rest = plugin.value.strip().split(".")
    spec = importlib.util.find_spec(head) if head else None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise PluginError(f"config entry point {plugin.name} = {plugin.value!r} of package {plugin.source}: "
                          f"{head!r} is not an importable package; reinstall the package")  # fmt: skip
    for location in locations:
        folder = Path(location).joinpath(*rest)
        if folder.is_dir():
            return folder.resolve()
    raise PluginError(f"config entry point {plugin.name} = {plugin.value!r} of package {plugin.source}: no folder "
                      f"{'/'.join(rest)} under {locations[0]}; ship it as package data")  # fmt: skip


def plugin_config_dirs() -> list[tuple[Path, Plugin]]:
    """Every installed plug-in's config folder with the plug-in that ships it."""
    return [(config_folder(plugin), plugin) for plugin in installed_plugins(CONFIG_GROUP)]
