"""research/probe_embedding.py: the ridge probe finds a linear code and reports no better than the mean without one;
its env options and target readers."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from envs.registry import make


def test_probe_recovers_a_linear_code_and_matches_the_mean_on_unrelated_features(load_script) -> None:
    module = load_script("probe_embedding")

    def probe(features, targets):  # mean held-out distance, cm
        return module.error_cm(module.held_out_errors(features, targets))[0]

    rng = np.random.default_rng(0)
    targets = rng.uniform(-0.03, 0.03, size=(400, 2))  # metres, as the block's jitter
    mixing = rng.normal(size=(2, 16))
    coded = targets @ mixing + 1e-5 * rng.normal(size=(400, 16))
    assert probe(coded, targets) < 0.01  # cm
    unrelated = rng.normal(size=(400, 16))
    split = 300
    mean_error = np.linalg.norm(targets[split:] - targets[:split].mean(0), axis=1).mean() * 100
    assert abs(probe(unrelated, targets) - mean_error) < 0.1 * mean_error


def test_env_options_read_values_as_yaml_and_name_a_malformed_pair(load_script) -> None:
    env_options = load_script("probe_embedding").env_options
    assert env_options(["scene_jitter=0.05", "fixed_scenes=false", "cameras=[corner, gripperPOV]"]) == {
        "scene_jitter": 0.05,
        "fixed_scenes": False,
        "cameras": ["corner", "gripperPOV"],
    }
    with pytest.raises(SystemExit, match="'scene_jitter'.*KEY=VALUE"):
        env_options(["scene_jitter"])


def test_an_env_without_a_built_in_target_asks_for_one(load_script) -> None:
    target_and_env = load_script("probe_embedding").target_and_env
    with pytest.raises(SystemExit, match="'robosuite'.*--target package.module:function"):
        target_and_env("robosuite", None)
    reader, options = target_and_env("robosuite", "numpy:zeros")
    assert reader is np.zeros and options == {}


@pytest.mark.skipif(importlib.util.find_spec("metaworld") is None, reason="metaworld is not installed")
def test_metaworld_goal_is_where_the_rendered_goal_site_is(load_script) -> None:
    module = load_script("probe_embedding")
    reader, options = module.target_and_env("metaworld", None)
    env = make("metaworld/reach-v3", **options)
    try:
        for seed in (0, 1):
            _, info = env.reset(seed=seed)
            site = env.unwrapped.model.site("goal").id
            np.testing.assert_allclose(reader(env, info), env.unwrapped.data.site_xpos[site], atol=1e-9)
        assert not np.allclose(reader(env, env.reset(seed=0)[1]), reader(env, env.reset(seed=1)[1]))
    finally:
        env.close()


def test_per_axis_errors_tell_a_readable_axis_from_an_unreadable_one(load_script) -> None:
    module = load_script("probe_embedding")
    rng = np.random.default_rng(1)
    targets = rng.uniform(-0.05, 0.05, size=(400, 2))
    features = np.concatenate([targets[:, :1] * 10, rng.normal(size=(400, 8))], axis=1)  # only x is coded
    x_error, y_error = module.error_cm(module.held_out_errors(features, targets))[1]
    assert x_error < 0.05  # cm, against 2.5 for an axis the features do not carry
    uniform_mean_abs_error = 0.05 / 2 * 100  # |U(-a, a)| averages a / 2
    assert abs(y_error - uniform_mean_abs_error) < 0.15 * uniform_mean_abs_error


def test_the_cnn_probe_reads_where_a_dot_is_drawn(load_script) -> None:
    cnn_held_out_errors = load_script("probe_embedding").cnn_held_out_errors
    rng = np.random.default_rng(2)
    targets = rng.uniform(0.0, 0.1, size=(200, 2))  # metres; drawn at 1.5 px per cm on a 24 px image
    images = np.zeros((200, 24, 24, 3), dtype=np.uint8)
    for image, (x, y) in zip(images, (targets * 150 + 4).astype(int), strict=True):
        image[y : y + 3, x : x + 3] = 255
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script runs it: a small CNN is fastest on one thread
    try:
        errors = cnn_held_out_errors(images, targets, epochs=20)
    finally:
        torch.set_num_threads(threads)
    mean_error = np.linalg.norm(targets[150:] - targets[:150].mean(0), axis=1).mean()
    assert errors.shape == (50, 2)
    assert np.linalg.norm(errors, axis=1).mean() < 0.25 * mean_error
