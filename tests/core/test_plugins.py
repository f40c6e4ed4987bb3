"""Plug-ins found by installing them: entry points of ``vla_rl.envs``, ``vla_rl.policies`` and ``vla_rl.configs``,
declared here by a distribution's dist-info on a temporary sys.path entry (what pip writes), with no PYTHONPATH
to the package's source and no --config-dir."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import envs.registry as registry
from contract.plugins import CONFIG_GROUP, ENV_GROUP, POLICY_GROUP, installed_plugins
from vla_rl.cli import main
from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config

FACTORY = '''
from envs.builtin.tabletop import make_tabletop_env


def make(task="reach", image_size=16, cameras=("front",)):
    return make_tabletop_env(task=task, image_size=image_size, cameras=cameras)


make.tasks = ("reach", "lift")
'''


def install_distribution(site: Path, name: str, version: str, entry_points: dict[str, dict[str, str]]) -> None:
    """Write ``<name>-<version>.dist-info`` with METADATA and entry_points.txt into ``site`` (as pip does)."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: the {name} "
                                   "plug-in\n")  # fmt: skip
    sections = [f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) for group, points in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(sections))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site-packages folder holding the package ``fake_robot`` (env factory + config folder), its dist-info, and
    the dist-info of a broken package; the registry forgets the plug-ins it has seen before and after."""
    site = tmp_path / "site"
    package = site / "fake_robot"
    (package / "configs" / "env").mkdir(parents=True)
    (package / "configs" / "policy").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "env.py").write_text(textwrap.dedent(FACTORY))
    (package / "configs" / "env" / "fake_robot.yaml").write_text("id: fake_robot\ntasks: [lift]\nkwargs: {image_size: 8}\n")
    (package / "configs" / "policy" / "fake_policy.yaml").write_text("factory: fake_gaussian\nchunk_size: 2\n")
    install_distribution(site, "fake_robot", "1.2.3", {
        ENV_GROUP: {"fake_robot": "fake_robot.env:make"},
        POLICY_GROUP: {"fake_gaussian": "policies.vla:build_policy"},
        CONFIG_GROUP: {"fake_robot": "fake_robot.configs"},
    })  # fmt: skip
    install_distribution(site, "broken_robot", "0.0.1", {ENV_GROUP: {"broken_robot": "no_such_module.env:make"}})
    monkeypatch.syspath_prepend(str(site))
    registry._register_builtins()
    monkeypatch.setattr(registry, "_PLUGINS_REGISTERED", False)
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_BROKEN_PLUGINS", {})
    yield site


def test_an_installed_env_is_registered_with_its_package_and_tasks(site):
    entry = registry.registered()["fake_robot"]
    assert entry.source == "fake_robot 1.2.3" and entry.tasks == ("reach", "lift") and entry.default_task == "reach"
    assert entry.description == "the fake_robot plug-in"
    env = registry.make("fake_robot/lift", image_size=8)
    try:
        assert env.unwrapped.env_spec.task == "lift" and env.unwrapped.env_spec.image_size == (8, 8)
    finally:
        env.close()
    assert registry.registered()["tabletop"].source == "vla-rl"


def test_a_broken_plugin_is_reported_by_name_and_package(site, capsys):
    with pytest.raises(registry.UnknownEnvError, match=r"broken_robot.*broken_robot 0.0.1.*no_such_module"):
        registry.resolve("broken_robot")
    assert main(["envs", "list"]) == 0
    out = capsys.readouterr().out
    assert "fake_robot [fake_robot 1.2.3]: the fake_robot plug-in" in out and "  fake_robot/lift" in out
    assert "broken_robot [does not load]:" in out and "tabletop [vla-rl]" in out


def test_the_config_folder_a_plugin_ships_is_searched(site):
    cfg = load_config(["env=fake_robot"])
    assert cfg.env.id == "fake_robot" and list(cfg.env.tasks) == ["lift"] and cfg.env.kwargs.image_size == 8
    with pytest.raises(ConfigError, match=r"env\.kwargs\.size.*allowed: image_size, cameras"):
        load_config(["env=fake_robot", "env.kwargs.size=3"])


def test_a_policy_plugin_is_named_in_policy_factory_and_replaced_by_its_import_path(site, capsys):
    cfg = load_config(["policy=fake_policy"])
    assert cfg.policy.factory == "policies.vla:build_policy"
    from policies.factory import resolve_factory_path

    with pytest.raises(ValueError, match=r"'nope'.*installed: fake_gaussian \(fake_robot 1.2.3\)"):
        resolve_factory_path("nope")
    assert main(["policies", "list"]) == 0
    out = capsys.readouterr().out
    assert "  fake_policy [fake_robot 1.2.3]" in out and "  flow [vla-rl]" in out
    assert "  fake_gaussian = policies.vla:build_policy [fake_robot 1.2.3]" in out


def test_a_config_entry_point_without_its_folder_is_a_config_error(site):
    install_distribution(site, "no_folder", "2.0", {CONFIG_GROUP: {"no_folder": "fake_robot.missing"}})
    assert [p.package for p in installed_plugins(CONFIG_GROUP)] == ["fake_robot", "no_folder"]
    with pytest.raises(ConfigError, match=r"no_folder 2.0.*no folder missing under .*fake_robot"):
        load_config([])
