from __future__ import annotations

import pytest

from vla_rl.config import ConfigError, env_kwargs, resolve_tasks
from vla_rl.config.loading import load_config


def test_default_config_composes_every_group():
    cfg = load_config()
    for group in ("env", "policy", "algo", "trainer", "collect"):
        assert group in cfg
    assert cfg.env.id == "tabletop"
    assert env_kwargs(cfg.env)["cameras"] == ("front", "wrist")


def test_overrides_apply_and_all_expands_to_every_task():
    cfg = load_config(["env.tasks=all", "seed=7", "collect.episodes_per_task=3"])
    assert cfg.seed == 7 and cfg.collect.episodes_per_task == 3
    from envs.registry import resolve

    entry, _ = resolve("tabletop")
    assert resolve_tasks(cfg.env, entry.tasks) == list(entry.tasks)


def test_unknown_key_names_the_key_and_the_known_ones():
    with pytest.raises(ConfigError) as error:
        load_config(["collect.episodes_per_taks=3"])
    message = str(error.value)
    assert "collect.episodes_per_taks" in message
    assert "episodes_per_task" in message and "noise_std" in message


def test_unknown_group_option_lists_the_options():
    with pytest.raises(ConfigError, match=r"config group 'env' has no option 'tabletopp'; allowed: .*tabletop"):
        load_config(["env=tabletopp"])


def test_unknown_task_lists_the_tasks():
    with pytest.raises(ConfigError, match=r"'env.tasks'.*no task 'juggle'; allowed: .*reach"):
        load_config(["env.tasks=[reach,juggle]"])


def test_unknown_env_option_lists_the_factory_parameters():
    with pytest.raises(ConfigError, match=r"'env.kwargs.colour'.*allowed: .*image_size"):
        load_config(["+env.kwargs.colour=red"])


def test_bad_values_are_rejected_with_the_key():
    with pytest.raises(ConfigError, match="collect.episodes_per_task"):
        load_config(["collect.episodes_per_task=0"])
    with pytest.raises(ConfigError, match="collect.valid_fraction"):
        load_config(["collect.valid_fraction=1.5"])
    with pytest.raises(ConfigError, match="'env.id'.*available envs"):
        load_config(["env.id=nowhere"])
