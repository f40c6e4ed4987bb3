"""Saved policies whose heads were renamed on 2026-12-04 load as today's heads and act bit for bit as saved.

The folders are written as the old code wrote them: the old head section in config.json (``flow_residual`` and
``flow_steered`` with the flow's options flat beside their prefixed own, ``flow_rl_features``) and the old
weight names (the flow's keys directly under ``head.``). They are made from a policy of today's head by
rewriting both; the same check against folders that the old code itself saved was run once by hand
(docs/architecture.md, Decisions)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from test_vla import tiny_config, tiny_obs, tiny_spec, tiny_stats

from policies.config import HeadConfig, RLVisionConfig
from policies.heads.legacy import upgrade_head
from policies.hub import StateDictMismatchError
from policies.vla import VLAPolicy

FLOW = {"hidden_dim": 32, "num_blocks": 1, "time_embedding_dim": 16, "num_inference_steps": 3}
CASES = {
    "flow_residual": (
        {**FLOW, "residual_hidden_dim": 16, "residual_init_std": 0.2, "base_noise": "sample"},
        {"name": "residual", "options": {"base": {"name": "flow", "options": FLOW}, "hidden_dim": 16,
                                         "init_std": 0.2, "base_noise": "sample"}},
    ),
    "flow_steered": (
        {**FLOW, "latent_hidden_dim": 16, "latent_mean_bound": 2.0, "detach_embedding": False},
        {"name": "steered", "options": {"base": {"name": "flow", "options": FLOW}, "hidden_dim": 16,
                                        "mean_bound": 2.0, "detach_embedding": False}},
    ),
    "flow_rl_features": (
        {**FLOW, "initial_noise": "zero", "rl_feature_scale": 30.0},
        {"name": "flow", "options": {"rl_method": "noise", "detach_embedding": True, **FLOW, "initial_noise": "zero",
                                     "rl_feature_scale": 30.0}},
    ),
}  # fmt: skip


def old_folder(tmp_path, old_name: str):
    """A folder as the old code saved it, and today's policy it was made from."""
    old_options, new_head = CASES[old_name]
    assert upgrade_head({"name": old_name, "options": old_options}) == new_head
    config = tiny_config("flow")
    config.head = HeadConfig(**new_head)
    config.rl_vision = RLVisionConfig(
        enabled=old_name != "flow_steered", kind="pixels", downsample=4, feature_dim=6
    )
    torch.manual_seed(0)
    policy = VLAPolicy(config, tiny_spec(), tiny_stats())
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    folder = policy.save_pretrained(tmp_path / old_name)
    saved = json.loads((folder / "config.json").read_text())
    saved["policy"]["head"] = {"name": old_name, "options": old_options}
    (folder / "config.json").write_text(json.dumps(saved))
    weights = load_file(str(folder / "model.safetensors"))
    save_file({key.replace("head.base.", "head."): value for key, value in weights.items()},
              str(folder / "model.safetensors"))  # fmt: skip
    return folder, policy


@pytest.mark.parametrize("old_name", sorted(CASES))
def test_a_folder_with_an_old_head_loads_as_todays_head_and_acts_as_saved(tmp_path, old_name) -> None:
    folder, policy = old_folder(tmp_path, old_name)
    if old_name != "flow_rl_features":  # the refiners' flow moved under base.
        assert any(key.startswith("head.denoiser.") for key in load_file(str(folder / "model.safetensors")))
    loaded = VLAPolicy.from_pretrained(folder)
    assert loaded.config.head == policy.config.head
    obs = tiny_obs()
    expected, expected_extras = policy.act(obs, generator=torch.Generator().manual_seed(7))
    actual, actual_extras = loaded.act(obs, generator=torch.Generator().manual_seed(7))
    assert torch.equal(actual, expected)
    assert torch.equal(actual_extras["log_prob"], expected_extras["log_prob"])


def test_an_old_folder_with_other_weights_is_refused_naming_the_keys(tmp_path) -> None:
    folder, _ = old_folder(tmp_path, "flow_residual")
    weights = load_file(str(folder / "model.safetensors"))
    del weights["head.residual.log_std"]
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(StateDictMismatchError, match=r"missing keys \['head.residual.log_std'\]"):
        VLAPolicy.from_pretrained(folder)
