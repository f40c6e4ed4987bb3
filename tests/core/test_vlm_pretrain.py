"""Pretraining the tiny VLM on the tabletop suite's frames (vla_rl/stages/vlm_pretrain.py): the loss falls, it is
seeded, the readout trains exactly the policy's pooled feature, the folder loads through the policy's real path,
and the shipped asset (assets/tabletop_vlm) is a pretrained model that acts through `policy=vlm`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from envs.builtin.captions import captioned_frames, vocabulary_words
from envs.builtin.tabletop import TabletopEnv
from policies.backbones.config import VLMBackboneConfig
from policies.backbones.hf_vlm import HFVLMEncoder
from policies.checks import synthetic_io_spec, synthetic_observation, synthetic_stats
from policies.config import StateConfig
from policies.factory import build_from_factory
from vla_rl.config import REPO_ROOT
from vla_rl.stages.vlm_pretrain import (
    CaptionBatches,
    PretrainConfig,
    build_captioner,
    caption_accuracy,
    last_hidden_states,
    pooled_policy_input,
    pretrain_captioner,
    save_captioner,
)

FACTORY = "policies.backbones.vlm_policy:build_policy"
ASSET = REPO_ROOT / "assets" / "tabletop_vlm"
SMALL = {"image_size": 32, "patch_size": 8, "hidden_size": 32, "num_layers": 1, "batch_size": 8, "lr": 3e-3,
         "warmup_steps": 2}  # fmt: skip


def backbone_weights(policy) -> dict[str, torch.Tensor]:
    """The VLM policy's backbone weights by the base model's names (LoRA's wrapper prefix removed)."""
    return {key.removeprefix("base_model.model."): value for key, value in policy.encoder.backbone.state_dict().items()}


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: on 2 shared cores, two threads per process run the tiny model several times slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def frames():
    return captioned_frames(14, seed=3, image_size=32)  # every task twice


def test_pretraining_lowers_both_losses_is_seeded_and_loads_through_the_policy(frames, tmp_path):
    config = PretrainConfig(steps=20, **SMALL)
    model, tokenizer, history = pretrain_captioner(frames, config, vocabulary_words(), log_every=5, log=None)
    assert history[-1]["caption_loss"] < 0.75 * history[0]["caption_loss"]
    assert history[-1]["readout_loss"] < history[0]["readout_loss"]
    again, _, _ = pretrain_captioner(frames, PretrainConfig(steps=20, **SMALL), vocabulary_words(), log=None)
    for (name, weight), other in zip(model.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(weight, other), name
    initial, _ = build_captioner(config, vocabulary_words())
    scores = {name: caption_accuracy(m, tokenizer, frames, frames, config.cameras) for name, m in
              (("trained", model), ("initial", initial))}  # fmt: skip
    assert scores["trained"]["held_out_caption_loss"] < 0.75 * scores["initial"]["held_out_caption_loss"]
    slotted = sum(slot is not None for slots in frames.slots for slot in slots)
    assert scores["trained"]["all"]["n"] == slotted == 14 * 5 - 4  # 4 drawer frames (2 tasks, twice) have 4 slots
    folder = save_captioner(tmp_path / "vlm", model, tokenizer, {"config": {"steps": 20}})
    assert {"config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json",
            "pretraining.json"} <= {p.name for p in folder.iterdir()}  # fmt: skip
    io_spec = synthetic_io_spec()
    policy = build_from_factory(FACTORY, {"backbone": {"source": str(folder), "train": "lora"}, "embedding_dim": 16,
                                          "value": {"hidden_dims": [16]}, "head": {"name": "gaussian", "options": {}}},
                                io_spec, synthetic_stats(io_spec))  # fmt: skip
    key = "text_model.layers.0.mlp.down_proj.weight"  # no LoRA target: its name is the base model's
    torch.testing.assert_close(backbone_weights(policy)[key], model.model.state_dict()[key], rtol=0, atol=0)
    actions, _ = policy.act(synthetic_observation(io_spec, 3))
    assert actions.shape == (3, policy.config.chunk_size, 3)


def test_the_readout_trains_the_policys_own_pooled_feature(frames, tmp_path):
    """The mean over the image and instruction tokens of a caption sequence is what the policy encoder pools from
    the same observation, to float precision: the caption after them changes nothing (causal attention)."""
    config = PretrainConfig(**SMALL)
    model, tokenizer = build_captioner(config, vocabulary_words())
    data = CaptionBatches(frames, tokenizer, model, config.cameras)
    batch = data.batch([0, 5, 9])
    with torch.no_grad():
        pooled = pooled_policy_input(last_hidden_states(model, batch), batch)
    folder = save_captioner(tmp_path / "vlm", model, tokenizer)
    encoder = HFVLMEncoder(VLMBackboneConfig(source=str(folder), train="frozen"), list(config.cameras), 0,
                           StateConfig(enabled=False), embedding_dim=8)  # fmt: skip
    images = {camera: torch.from_numpy(frames.images[camera][[0, 5, 9]]) for camera in config.cameras}
    instructions = [frames.instructions[i] for i in (0, 5, 9)]
    with torch.no_grad():
        expected = encoder.hidden_states(images, instructions)
        ids, _ = encoder.tokens(instructions, torch.device("cpu"))
    torch.testing.assert_close(encoder.pixels(images), batch["pixel_values"], rtol=0, atol=0)
    torch.testing.assert_close(pooled, expected, rtol=1e-5, atol=1e-5)
    for row in range(3):  # the policy's tokens are the training sequence's prefix
        policy_ids = ids[row][ids[row] != 0]
        assert torch.equal(batch["input_ids"][row, : len(policy_ids)], policy_ids)
        assert int(batch["policy_mask"][row].sum()) == len(policy_ids)


def test_a_word_outside_the_vocabulary_is_named(frames):
    config = PretrainConfig(**SMALL)
    model, tokenizer = build_captioner(config, [])  # the base vocabulary lacks some colours and the position words
    with pytest.raises(ValueError, match=r"instruction '.*': word\(s\) \['purple', 'circle'\] are not in the voc"):
        CaptionBatches(frames, tokenizer, model, config.cameras)
    model, tokenizer = build_captioner(config, vocabulary_words()[:-2])  # all but low and high
    with pytest.raises(ValueError, match=r"caption '.* gripper .*': word\(s\) \['(low|high)'\] are not"):
        CaptionBatches(frames, tokenizer, model, config.cameras)


def test_the_shipped_asset_is_pretrained_and_acts_through_policy_vlm(monkeypatch):
    from vla_rl.config.loading import load_config
    from vla_rl.stages.env_io import env_io_spec
    from vla_rl.stages.rl.experiment import policy_spec_from_config

    record = json.loads((ASSET / "pretraining.json").read_text())
    accuracy = record["held_out"]["all"]
    assert accuracy["accuracy"] > accuracy["chance_majority"] + 0.2  # what the asset's README claims, roughly
    assert sum(p.stat().st_size for p in ASSET.iterdir()) < 5 * 2**20
    monkeypatch.chdir(REPO_ROOT)
    cfg = load_config(["policy=vlm", "policy.backbone.source=assets/tabletop_vlm", "policy.head.name=gaussian",
                       "env.tasks=[reach]"])  # fmt: skip
    io_spec = env_io_spec("tabletop", "reach", {"image_size": 64})
    policy = policy_spec_from_config(cfg, io_spec, None).build("cpu").eval()
    shipped = load_file(ASSET / "model.safetensors")
    key = "text_model.layers.1.mlp.down_proj.weight"
    torch.testing.assert_close(backbone_weights(policy)[key], shipped[f"model.{key}"], rtol=0, atol=0)
    env = TabletopEnv("reach")
    try:
        obs, _ = env.reset(seed=0)
    finally:
        env.close()
    batch = {"images": {c: np.stack([obs["images"][c]] * 2) for c in io_spec["camera_names"]},
             "state": np.stack([obs["state"]] * 2), "instruction": [obs["instruction"]] * 2}  # fmt: skip
    actions, _ = policy.act(batch, generator=torch.Generator().manual_seed(0))
    assert actions.shape == (2, policy.config.chunk_size, 4) and torch.isfinite(actions).all()
