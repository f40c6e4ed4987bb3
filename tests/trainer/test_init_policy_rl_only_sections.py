"""``trainer.init_policy`` with another ``policy.rl_vision`` or ``policy.value`` than the saved policy: the sections
SFT never trains follow the run's config, everything SFT trained is loaded unchanged, and the parts the new
sections build differently start from the run's seeded initialisation."""

from __future__ import annotations

import torch
from tiny_training import TINY_TRAINING as TINY

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import resolve
from vla_rl.config import env_kwargs, resolve_tasks
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.experiment import policy_spec_from_config, with_requested_rl_only_sections

SAVED = [*TINY, "policy=flow_noise_pixels", "policy.rl_vision.feature_dim=8"]
KEYPOINTS = ["policy.rl_vision.kind=keypoints", "policy.rl_vision.downsample=1", "policy.rl_vision.num_keypoints=3",
             "policy.rl_vision.channels=[4,8]"]  # fmt: skip
RL_ONLY_PREFIXES = ("rl_vision.", "value_head.", "head.feature_projection.")


def build_spec(tmp_path, overrides, init_policy=None):
    cfg = load_config([*overrides, f"run_dir={tmp_path}"])
    entry, _ = resolve(str(cfg.env.id))
    io_spec = env_io_spec(entry.name, resolve_tasks(cfg.env, entry.tasks)[0], env_kwargs(cfg.env))
    return policy_spec_from_config(cfg, io_spec, init_policy)


def saved_policy(tmp_path):
    saved = build_spec(tmp_path, SAVED).build("cpu")
    with torch.no_grad():  # weights that no initialisation draws: "loaded" cannot pass by chance
        for parameter in saved.parameters():
            parameter.add_(0.5)
    return saved, saved.save_pretrained(tmp_path / "sft")


def test_another_rl_vision_keeps_every_sft_weight_and_builds_the_requested_branch(tmp_path):
    saved, folder = saved_policy(tmp_path)
    spec = build_spec(tmp_path, [*SAVED, *KEYPOINTS], str(folder))
    policy = spec.build("cpu")

    assert policy.config.rl_vision.kind == "keypoints" and policy.config.rl_vision.downsample == 1
    cameras = len(policy.io_spec.camera_names)
    assert policy.head.rl_feature_dim == 2 * 3 * cameras  # (x, y) of 3 keypoints per camera
    loaded, built = saved.state_dict(), policy.state_dict()
    sft_trained = [name for name in loaded if not name.startswith(RL_ONLY_PREFIXES)]
    assert sft_trained and all(torch.equal(built[name], loaded[name]) for name in sft_trained)
    assert any(name.startswith("rl_vision.cameras.") for name in built)  # the keypoint CNNs, one per camera
    assert not any(name.startswith("rl_vision.") and name in loaded for name in built)
    assert built["head.feature_projection.weight"].shape == (64, 2 * 3 * cameras)
    # the critic's first layer reads the new features; its other layers keep the saved weights (same shapes)
    first, last = "value_head.mlp.0.weight", "value_head.mlp.2.weight"
    assert built[first].shape[1] != loaded[first].shape[1] and torch.equal(built[last], loaded[last])


def test_the_same_rl_sections_load_the_saved_policy_as_it_is(tmp_path):
    saved, folder = saved_policy(tmp_path)
    spec = build_spec(tmp_path, SAVED, str(folder))
    loaded, built = saved.state_dict(), spec.build("cpu").state_dict()
    assert built.keys() == loaded.keys() and all(torch.equal(built[k], loaded[k]) for k in loaded)


def test_other_sections_keep_the_saved_values():
    loaded = {"embedding_dim": 64, "rl_vision": {"kind": "pixels", "downsample": 4}, "value": {"hidden_dims": [32]}}
    asked = {"embedding_dim": 128, "rl_vision": {"kind": "keypoints"}, "value": {"hidden_dims": [32]}}
    config, retuned = with_requested_rl_only_sections(loaded, asked, ("rl_vision", "value"))
    assert retuned == ["rl_vision"]
    assert config == {"embedding_dim": 64, "rl_vision": {"kind": "keypoints", "downsample": 4},
                      "value": {"hidden_dims": [32]}}  # fmt: skip
    assert with_requested_rl_only_sections(loaded, asked, ()) == (loaded, [])
    assert with_requested_rl_only_sections(loaded, {"rl_vision": None}, ("rl_vision",)) == (loaded, [])
