from __future__ import annotations

import pytest

from contract.import_path import import_object
from envs import registry
from envs.registry import UnknownEnvError, make, register, resolve


def test_factory_by_import_path_builds_the_users_env():
    env = make("point_env:make/reach_blue", image_size=16)
    observation, info = env.reset(seed=0)
    assert observation["instruction"] == "move to the blue square"
    assert observation["images"]["top"].shape == (16, 16, 3)
    assert info["task"] == "reach_blue"
    entry, task = resolve("point_env:make")
    assert entry.tasks == ("reach_red", "reach_blue") and task == "reach_red"


def test_registered_name_resolves_task_and_rejects_unknown_ones():
    register("point_test", "point_env:make", tasks=("reach_red", "reach_blue"), overwrite=True)
    try:
        assert make("point_test/reach_blue").task == "reach_blue"
        with pytest.raises(UnknownEnvError, match="available tasks: reach_red, reach_blue"):
            make("point_test/fly")
    finally:
        registry._REGISTRY.pop("point_test")


def test_unknown_env_lists_available_envs():
    with pytest.raises(UnknownEnvError) as error:
        resolve("no_such_env/lift")
    message = str(error.value)
    assert "no_such_env" in message and "tabletop" in message


def test_bad_import_paths_say_what_is_wrong():
    with pytest.raises(ImportError, match="cannot import module 'not_a_module_xyz'"):
        import_object("not_a_module_xyz:make")
    with pytest.raises(ImportError, match="has no attribute 'nope'"):
        import_object("point_env:nope")
    with pytest.raises(ValueError, match="package.module:function"):
        import_object("point_env")


def test_register_refuses_silent_overwrite_and_bad_names():
    register("point_once", "point_env:make", tasks=("reach_red",), overwrite=True)
    try:
        with pytest.raises(ValueError, match="already registered"):
            register("point_once", "point_env:make", tasks=("reach_red",))
    finally:
        registry._REGISTRY.pop("point_once")
    with pytest.raises(ValueError, match="may not contain"):
        register("a/b", "point_env:make", tasks=("x",))
