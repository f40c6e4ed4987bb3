"""A user's env plugs in with config files of its own: `--config-dir` / VLA_RL_CONFIG_PATH, `env.id=` from
clean env settings, `vla-rl config` to see what composes, and `trainer.init_policy` checked against the config."""

from __future__ import annotations

import logging

import pytest
import yaml

from vla_rl.cli import main
from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config
from vla_rl.stages.rl.experiment import check_loaded_policy


@pytest.fixture
def user_configs(tmp_path):
    """A user's config folder outside the repository: an env and an experiment of their own."""
    folder = tmp_path / "my_configs"
    (folder / "env").mkdir(parents=True)
    (folder / "experiment").mkdir()
    (folder / "env" / "my_point.yaml").write_text("id: point_env:make\ntasks: [reach_blue]\nkwargs: {image_size: 24}\n")
    (folder / "experiment" / "my_quick.yaml").write_text(
        "# @package _global_\ndefaults:\n  - flow_residual_ppo\n  - override /env: my_point\n  - _self_\n"
        "experiment: {name: my_quick}\ntrainer: {iterations: 3}\n"
    )
    return folder


def test_config_dir_adds_the_users_groups_and_config_prints_them(user_configs, capsys):
    assert main(["config", "--config-dir", str(user_configs), "env=my_point", "--section", "env"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == {"id": "point_env:make", "tasks": ["reach_blue"],
                                                       "kwargs": {"image_size": 24}}  # fmt: skip
    # an experiment of the user's, on top of a named one; options may follow the overrides
    assert main(["config", "--train", "experiment=my_quick", "--config-dir", str(user_configs)]) == 0
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["experiment"]["name"] == "my_quick" and cfg["trainer"]["iterations"] == 3
    assert cfg["env"]["id"] == "point_env:make" and cfg["policy"]["head"]["name"] == "residual"


def test_the_config_path_variable_does_the_same_and_errors_name_the_folders(user_configs, tmp_path, monkeypatch):
    monkeypatch.setenv("VLA_RL_CONFIG_PATH", str(user_configs))
    assert load_config(["env=my_point"]).env.kwargs.image_size == 24
    with pytest.raises(ConfigError, match=rf"no option 'my_pointt'; allowed: .*my_point.*searched .*{user_configs}/env"):
        load_config(["env=my_pointt"])
    monkeypatch.setenv("VLA_RL_CONFIG_PATH", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"config folder .*nowhere \(from VLA_RL_CONFIG_PATH\) does not exist"):
        load_config([])


def test_env_id_starts_from_clean_env_settings(capsys):
    """Without `env=`, `env.id=` drops the default env's tasks and kwargs (tabletop's control_yaw...)."""
    cfg = load_config(["env.id=point_env:make"])
    assert dict(cfg.env) == {"id": "point_env:make", "tasks": "all", "kwargs": {}}
    cfg = load_config(["env.id=point_env:make", "env.tasks=[reach_red]", "env.kwargs.image_size=16"])
    assert cfg.env.tasks == ["reach_red"] and dict(cfg.env.kwargs) == {"image_size": 16}
    with pytest.raises(ConfigError, match=r"unknown env option 'env.kwargs.colour' for 'tabletop'; allowed: .*image_size"):
        load_config(["env.id=tabletop", "env.kwargs.colour=red"])
    assert main(["config", "env=id_only"]) == 2
    assert "'env.id' is not set" in capsys.readouterr().err


def test_train_refuses_init_policy_with_an_sft_stage(tmp_path, capsys):
    policy = tmp_path / "sft_policy"
    policy.mkdir()
    (policy / "config.json").write_text("{}")
    run_dir = tmp_path / "run"
    code = main(["train", "experiment=flow_residual_ppo", f"trainer.init_policy={policy}", f"run_dir={run_dir}"])
    assert code == 2 and not run_dir.exists()
    error = capsys.readouterr().err
    assert "both say where RL starts" in error and "experiment.stages=[rl,eval]" in error


def test_init_policy_with_another_head_is_refused_and_other_differences_warned(tmp_path, caplog):
    loaded = {"head": {"name": "flow", "options": {"stochastic_steps": 1}}, "value": {"detach_input": False},
              "chunk_size": 4}  # fmt: skip
    asked = {"head": {"name": "residual", "options": {}}, "value": {"detach_input": True}, "chunk_size": 4}
    with pytest.raises(ConfigError, match=r"holds a policy with head 'flow', but the config asks for "
                                          r"policy.head.name='residual'"):  # fmt: skip
        check_loaded_policy(tmp_path, loaded, asked)
    asked["head"] = {"name": "flow", "options": {"init_std": 0.1}}
    with caplog.at_level(logging.WARNING):
        check_loaded_policy(tmp_path, loaded, asked)
    assert "policy.head.options.init_std: loaded '<unset>', asked 0.1" in caplog.text
    assert "policy.value.detach_input: loaded False, asked True" in caplog.text
    caplog.clear()
    check_loaded_policy(tmp_path, loaded, {"head": {"name": "flow", "options": {}}, "chunk_size": 4})
    assert caplog.text == ""


def test_envs_check_takes_an_env_configs_name_and_config_dir_before_or_after_the_command(user_configs, capsys):
    """`envs check my_point` checks the config's env with its tasks and kwargs (here: one task, 24-pixel images)."""
    assert main(["envs", "check", "--config-dir", str(user_configs), "my_point"]) == 0
    out = capsys.readouterr().out
    assert "point_env:make/reach_blue {'image_size': 24}" in out and "point_env:make/reach_red" not in out
    assert "all checks passed" in out
    assert main(["--config-dir", str(user_configs), "envs", "check", "my_point", "env.kwargs.image_size=16"]) == 0
    assert "point_env:make/reach_blue {'image_size': 16}" in capsys.readouterr().out
    assert main(["envs", "check", "my_point"]) == 2  # not on the search path: the error lists the env configs
    error = capsys.readouterr().err
    assert "no env config; env configs: " in error and "id_only, " in error and "metaworld, " in error


def test_every_command_takes_config_dir():
    """The README says `--config-dir DIR` works on any command: every leaf command's parser has it."""
    import argparse

    from vla_rl.cli import build_parser

    def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...]):
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers:
            yield path, parser
        for action in subparsers:
            for name, child in action.choices.items():
                yield from leaves(child, (*path, name))

    found = dict(leaves(build_parser(), ()))
    assert ("envs", "check") in found and ("plot",) in found and ("envs", "list") in found
    for path, parser in found.items():
        assert "--config-dir" in parser._option_string_actions, path


def test_a_policy_key_typo_names_the_full_key_and_the_close_match(tmp_path):
    policies = tmp_path / "configs" / "policy"
    policies.mkdir(parents=True)
    (policies / "mine.yaml").write_text("factory: my_pkg.policy:make\npool_size: 8\nchunk_size: 4\n")
    from vla_rl.config.loading import searching_config_dirs

    with searching_config_dirs([tmp_path / "configs"]):
        with pytest.raises(ConfigError) as error:
            load_config(["policy=mine", "policy.pool_sise=3"])
        assert str(error.value).startswith("unknown config key 'policy.pool_sise'; did you mean 'policy.pool_size'?")
        with pytest.raises(ConfigError) as error:
            load_config(["policy=mine", "policy.dropout=0.1"])
        assert str(error.value).startswith("unknown config key 'policy.dropout'; to add a key the config files do not "
                                           "declare, write +policy.dropout=0.1")  # fmt: skip
    with pytest.raises(ConfigError, match=r"^unknown config key 'policy.chunk_sise'; did you mean 'policy.chunk_size'"):
        load_config(["policy.chunk_sise=3"])


def test_demonstrations_of_an_env_given_by_import_path_go_to_a_folder_without_a_colon():
    """Built-in names keep their folders (published experiments find their data); an import path is made path-safe."""
    assert load_config(["experiment=flow_sde_ppo"]).collect.output == "data/tabletop/flow_sde_ppo"
    assert load_config(["experiment=metaworld_mt10_30min"]).collect.output == "data/metaworld/metaworld_mt10"
    cfg = load_config(["experiment=flow_sde_ppo", "env.id=point_env:make"])
    assert cfg.collect.output == "data/point_env.make/flow_sde_ppo"
    assert load_config(["env.id=point_env:make"]).collect.output == "data/point_env.make"
