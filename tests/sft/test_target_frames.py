"""Target frames (seeded resets with the task target's position) and SFT's target loss on them."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch
from conftest import ENV_KWARGS, TASKS
from test_sft_training import SEED, policy_config

from envs.registry import make
from vla_rl.stages.collect import episode_seed
from vla_rl.stages.evaluation.metrics import evaluation_seed
from vla_rl.stages.sft.target_frames import (
    TARGET_FRAMES_FILE,
    TargetRegression,
    collect_target_frames,
    load_target_frames,
    target_reader,
)
from vla_rl.stages.sft.training import SFTConfig, run_sft

needs_metaworld = pytest.mark.skipif(importlib.util.find_spec("metaworld") is None, reason="metaworld is not installed")


def block_position(env, reset_info: dict) -> np.ndarray:
    """The tabletop task's target block, x-y (m)."""
    return env.unwrapped.scene.block_position(reset_info["init_state"]["target"]["block"])[:2]


@needs_metaworld
def test_frames_hold_each_seeded_reset_and_metaworlds_goal_there(tmp_path):
    kwargs = {"image_size": 16, "cameras": ("corner",)}
    path = collect_target_frames("metaworld", ["reach-v3", "push-v3"], kwargs, tmp_path, 3, seed=0, show_progress=False)
    frames = load_target_frames(path)
    assert frames["images"]["corner"].shape == (6, 16, 16, 3) and frames["images"]["corner"].dtype == np.uint8
    assert frames["state"].shape == (6, 4) and frames["target"].shape == (6, 3)
    assert frames["task"] == ["reach-v3"] * 3 + ["push-v3"] * 3
    for index in (0, 4):  # each frame is the reset of its seed, with MetaWorld's goal of that reset
        env = make(f"metaworld/{frames['task'][index]}", **kwargs)
        try:
            observation, _ = env.reset(seed=int(frames["seed"][index]))
            np.testing.assert_array_equal(frames["images"]["corner"][index], observation["images"]["corner"])
            np.testing.assert_allclose(frames["target"][index], env.unwrapped.metaworld_env._target_pos, atol=1e-6)
            assert frames["instruction"][index] == observation["instruction"]
        finally:
            env.close()
    assert len({tuple(target) for target in frames["target"]}) == 6  # the goals move from reset to reset
    # Kept when asked again with the same settings; recorded anew with others.
    modified = path.stat().st_mtime_ns
    assert collect_target_frames("metaworld", ["reach-v3", "push-v3"], kwargs, tmp_path, 3, seed=0, show_progress=False) == path
    assert path.stat().st_mtime_ns == modified
    collect_target_frames("metaworld", ["reach-v3"], kwargs, tmp_path, 2, seed=0, show_progress=False)
    assert len(load_target_frames(path)["target"]) == 2
    assert not path.with_name(path.name + ".tmp").exists()


def test_frame_seeds_are_apart_from_demonstration_and_evaluation_seeds(tmp_path):
    from vla_rl.stages.sft.target_frames import frame_seed

    for task in ("reach", "lift"):
        frames = {frame_seed(0, task, i) for i in range(2000)}
        assert len(frames) == 2000
        assert not frames & {evaluation_seed(0, task, k) for k in range(2000)}
        assert not frames & {episode_seed(0, task, a) for a in range(2000)}


def test_an_env_without_a_target_reader_is_refused_with_what_to_add():
    with pytest.raises(ValueError, match="'tabletop' has no target reader.*`target` attribute"):
        target_reader("tabletop")


def test_target_regression_is_a_standardised_mse_and_predicts_in_target_units():
    mean, std = np.array([0.1, -0.2, 0.3]), np.array([0.05, 0.02, 0.1])
    head = TargetRegression(4, mean, std, hidden_dim=8)
    embedding = torch.randn(5, 4)
    target = torch.randn(5, 3, dtype=torch.float64).float() * 0.1
    raw = head.net(embedding)
    expected = float(((raw.detach() - (target - head.mean) / head.std) ** 2).mean())
    assert head.loss(embedding, target).item() == pytest.approx(expected, rel=1e-6)
    for layer in head.net:  # a zero network predicts the mean: its distance is the target's from the mean
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.zeros_(layer.weight)
            torch.nn.init.zeros_(layer.bias)
    np.testing.assert_allclose(head(embedding).detach().numpy(), np.tile(mean, (5, 1)), atol=1e-7)
    np.testing.assert_allclose(
        head.distance(embedding, target).detach().numpy(),
        np.linalg.norm(target.numpy() - mean, axis=1),
        rtol=1e-5,
    )


def test_sft_with_the_target_loss_fits_the_targets_and_trains_the_encoder(tiny_dataset, tmp_path):
    collect_target_frames("tabletop", TASKS, ENV_KWARGS, tiny_dataset, 24, seed=0, show_progress=False,
                          reader=block_position)  # fmt: skip
    common = dict(max_steps=150, batch_size=16, learning_rate=1e-3, warmup_steps=0, valid_every=50, log_every=10,
                  show_progress=False, num_threads=1)  # fmt: skip
    with_targets = run_sft(policy_config("flow"), "tabletop", ENV_KWARGS, tiny_dataset, tmp_path / "with",
                           SFTConfig(**common, target_loss_weight=1.0), seed=SEED)  # fmt: skip
    rows = [json.loads(line) for line in with_targets.metrics_path.read_text().splitlines()]
    train = [row for row in rows if row["split"] == "train"]
    assert train[-1]["target_loss"] < 0.5 * train[0]["target_loss"]  # standardised: about 1 at the start
    valid = [row for row in rows if row["split"] == "valid"]
    assert all(row["target_distance"] > 0 for row in valid)
    assert rows[-1]["split"] == "summary" and rows[-1]["target_distance"] > 0
    frames = load_target_frames(tiny_dataset / TARGET_FRAMES_FILE)  # the held-out tenth, drawn as SFT draws it
    order = torch.randperm(len(frames["target"]), generator=torch.Generator().manual_seed(SEED)).tolist()
    held_out, fitted = frames["target"][order[: len(order) // 10]], frames["target"][order[len(order) // 10 :]]
    expected = np.linalg.norm(held_out - fitted.mean(0), axis=1).mean()
    assert rows[-1]["target_distance_of_mean"] == pytest.approx(expected, rel=1e-6)

    without = run_sft(policy_config("flow"), "tabletop", ENV_KWARGS, tiny_dataset, tmp_path / "without",
                      SFTConfig(**common), seed=SEED)  # fmt: skip
    assert "target_loss" not in json.loads(without.metrics_path.read_text().splitlines()[0])
    trained, plain = _weights(with_targets.last_dir), _weights(without.last_dir)
    assert set(trained) == set(plain)  # the target head trains beside the policy and is not saved with it
    encoder = [name for name in trained if name.startswith("encoder.")]
    assert encoder and any(not torch.equal(trained[name], plain[name]) for name in encoder)


def test_sft_names_the_missing_target_frames(tiny_dataset, tmp_path):
    (tiny_dataset / TARGET_FRAMES_FILE).unlink(missing_ok=True)
    with pytest.raises(FileNotFoundError, match="collect.target_frames_per_task"):
        run_sft(policy_config("flow"), "tabletop", ENV_KWARGS, tiny_dataset, tmp_path,
                SFTConfig(max_steps=2, show_progress=False, target_loss_weight=1.0), seed=SEED)  # fmt: skip


def _weights(folder) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    assert files, f"no weights in {folder}"
    return {name: tensor for file in files for name, tensor in load_file(file).items()}
