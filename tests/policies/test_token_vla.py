"""The action-token VLA on tiny random VLMs (real Hugging Face folders loaded through from_pretrained): the policy
kit, rollout and update log-probs bit for bit in both decodings, tempered sampling, greedy evaluation, SFT labels on
the action slots only, and the action rows taken from the checkpoint."""

from __future__ import annotations

import pytest
import torch

from policies.backbones.tiny import write_tiny_vlm
from policies.checks import run_checks, synthetic_io_spec, synthetic_observation, synthetic_stats
from policies.factory import build_from_factory

FACTORY = "policies.backbones.token_vla:build_policy"


@pytest.fixture(scope="module")
def tiny_vlms(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlms")
    return {arch: write_tiny_vlm(root / arch, arch) for arch in ("idefics3", "smolvlm", "paligemma")}


def config(source, decoding="parallel", train="lora", chunk_size=4, **tokens):
    return {"backbone": {"source": str(source), "train": train, "max_length": 8, "lora_rank": 4},
            "tokens": {"num_bins": 32, "decoding": decoding, **tokens}, "value": {"hidden_dims": [16]},
            "chunk_size": chunk_size}  # fmt: skip


def build(source, **kwargs):
    io_spec = synthetic_io_spec()
    torch.manual_seed(0)
    return build_from_factory(FACTORY, config(source, **kwargs), io_spec, synthetic_stats(io_spec)).eval()


@pytest.mark.parametrize(("arch", "decoding", "chunk_size"), [("idefics3", "parallel", 4), ("smolvlm", "parallel", 4),
                                                              ("paligemma", "autoregressive", 2)])  # fmt: skip
def test_each_architecture_passes_the_kit(tiny_vlms, arch, decoding, chunk_size):
    policy = run_checks(FACTORY, config(tiny_vlms[arch], decoding, chunk_size=chunk_size, temperature=1.5))
    trainable = {name for name, p in policy.named_parameters() if p.requires_grad}
    assert {n for n in trainable if ".backbone." in n} and all("lora_" in n for n in trainable if ".backbone." in n)
    assert {"action_embeddings.weight", "readout.weight", "slots", "query"} <= trainable


@pytest.mark.parametrize(("arch", "decoding"), [("idefics3", "parallel"), ("idefics3", "autoregressive"),
                                                ("paligemma", "autoregressive")])  # fmt: skip
def test_rollout_and_update_log_probs_agree_bit_for_bit(tiny_vlms, arch, decoding):
    policy = build(tiny_vlms[arch], decoding=decoding, chunk_size=2, temperature=1.3)
    obs = synthetic_observation(synthetic_io_spec(), 3, seed=2)
    _, extras = policy.act(obs, generator=torch.Generator().manual_seed(3))
    log_prob, entropy, value = policy.evaluate(obs, extras)
    assert torch.equal(log_prob, extras["log_prob"]) and torch.equal(value, extras["value"])
    assert log_prob.shape == entropy.shape == (3, 2, 3) and log_prob.requires_grad


def test_log_probs_are_the_tempered_softmax_and_greedy_evaluation_takes_the_argmax(tiny_vlms):
    policy = build(tiny_vlms["idefics3"], temperature=2.0)
    obs = synthetic_observation(synthetic_io_spec(), 3, seed=1)
    _, extras = policy.act(obs, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, _ = policy.teacher_forced(obs, None)
    bins = extras["action_bins"].reshape(3, -1)
    expected = torch.log_softmax(logits / 2.0, -1).gather(-1, bins[..., None])[..., 0]
    assert torch.allclose(extras["log_prob"].reshape(3, -1), expected, atol=1e-6)
    first, greedy = (policy.act(obs, deterministic=True, generator=torch.Generator().manual_seed(s)) for s in (0, 9))
    assert torch.equal(first[1]["action_bins"].reshape(3, -1), logits.argmax(-1))
    assert torch.equal(first[0], greedy[0])
    centres = -1 + (logits.argmax(-1).float() + 0.5) * (2 / 32)
    assert torch.allclose(first[1]["action_normalized"].reshape(3, -1), centres)


def test_the_mean_deterministic_action_is_the_expected_bin_centre_of_the_untempered_softmax(tiny_vlms):
    policy = build(tiny_vlms["idefics3"], temperature=2.0, deterministic_action="mean")
    obs = synthetic_observation(synthetic_io_spec(), 3, seed=1)
    with torch.no_grad():
        logits, _ = policy.teacher_forced(obs, None)  # (B, N, 32), temperature 1
    centres = -1 + (torch.arange(32).float() + 0.5) * (2 / 32)
    expected = (torch.softmax(logits, -1) * centres).sum(-1).reshape(3, 4, 3)
    actions, extras = policy.act(obs, deterministic=True)
    assert torch.allclose(extras["action_normalized"], expected, atol=1e-5)
    assert torch.allclose(actions, policy.to_env_units(expected), atol=1e-5)
    assert torch.equal(extras["action_bins"].reshape(3, -1), logits.argmax(-1))  # the tokens stay the argmax
    sampled = policy.act(obs, generator=torch.Generator().manual_seed(0))[1]  # rollouts still sample tokens
    assert torch.allclose(sampled["action_normalized"], -1 + (sampled["action_bins"].float() + 0.5) * (2 / 32))


def test_temperature_spreads_the_samples(tiny_vlms):
    obs = synthetic_observation(synthetic_io_spec(), 3, seed=1)
    spread = {}
    for temperature in (0.05, 5.0):
        policy = build(tiny_vlms["idefics3"], temperature=temperature)
        bins = torch.stack([policy.act(obs, generator=torch.Generator().manual_seed(s))[1]["action_bins"]
                            for s in range(6)])  # fmt: skip
        spread[temperature] = (bins != bins[0]).float().mean().item()
    assert spread[0.05] < spread[5.0]


def test_sft_is_cross_entropy_on_the_action_slots_only(tiny_vlms):
    policy = build(tiny_vlms["idefics3"], decoding="autoregressive", chunk_size=2)
    io_spec = synthetic_io_spec()
    obs = synthetic_observation(io_spec, 2, seed=4)
    actions, _ = policy.act(obs, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[True, False], [True, True]])
    batch = {**obs, "action": actions.numpy(), "action_mask": mask.numpy()}
    normalized = policy.normalizer.normalize("action", actions)
    labels = policy.labels(normalized, mask)
    assert (labels[0, 3:] == -100).all() and (labels[0, :3] >= 0).all() and (labels[1] >= 0).all()
    logits, _ = policy.teacher_forced(obs, labels.clamp(min=0))
    valid = labels >= 0
    manual = -torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0][valid].mean()
    assert torch.allclose(policy.bc_loss(batch), manual, atol=1e-6)


def test_sft_learns_the_tokens_and_lora_moves_only_adapters(tiny_vlms):
    policy = build(tiny_vlms["paligemma"]).train()
    obs = synthetic_observation(synthetic_io_spec(), 4, seed=5)
    actions, _ = policy.act(obs, generator=torch.Generator().manual_seed(1))
    batch = {**obs, "action": actions.numpy()}
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(8):
        loss = policy.bc_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.75 * losses[0]
    changed = {name for name, p in policy.named_parameters() if not torch.equal(p, before[name])}
    backbone = {name for name in changed if ".backbone." in name}
    assert backbone and all("lora_" in name for name in backbone)


def test_last_placement_starts_from_the_checkpoints_rows_of_the_last_ids(tiny_vlms):
    from transformers import AutoModelForImageTextToText

    policy = build(tiny_vlms["idefics3"], id_placement="last", num_bins=16)
    full = AutoModelForImageTextToText.from_pretrained(tiny_vlms["idefics3"])
    vocab = full.config.text_config.vocab_size
    assert torch.equal(policy.action_embeddings.weight, full.get_input_embeddings().weight[vocab - 16:])
    assert torch.equal(policy.readout.weight, full.get_output_embeddings().weight[vocab - 16:])
    assert int(policy.tokenizer.token_ids(torch.tensor(15))) == vocab - 1


def test_a_state_free_token_policy_ignores_the_state(tiny_vlms):
    io_spec = synthetic_io_spec()
    torch.manual_seed(0)
    policy = build_from_factory(FACTORY, {**config(tiny_vlms["idefics3"]), "use_state": False}, io_spec,
                                synthetic_stats(io_spec)).eval()  # fmt: skip
    obs = synthetic_observation(io_spec, 2)
    other = {**obs, "state": obs["state"] + 3}
    other_images = {**obs, "images": synthetic_observation(io_spec, 2, seed=7)["images"]}
    with torch.no_grad():
        logits = policy.teacher_forced(obs, None)[0]
        assert torch.equal(logits, policy.teacher_forced(other, None)[0])
        assert not torch.allclose(logits, policy.teacher_forced(other_images, None)[0])  # the images are merged in


def test_bad_family_configs_are_named_before_any_model_is_loaded():
    from policies.backbones.expert_vla import validate_policy_config as validate_expert
    from policies.backbones.token_vla import validate_policy_config as validate_token

    with pytest.raises(ValueError, match="normalization.action='mean_std'"):
        validate_token({"backbone": {"source": "x"}, "normalization": {"action": "mean_std"}})
    with pytest.raises(ValueError, match="tokens.decoding"):
        validate_token({"backbone": {"source": "x"}, "tokens": {"decoding": "beam"}})
    with pytest.raises(ValueError, match="tokens.deterministic_action"):
        validate_token({"backbone": {"source": "x"}, "tokens": {"deterministic_action": "median"}})
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['hidden_dim'\] in policy.flow"):
        validate_expert({"backbone": {"source": "x"}, "flow": {"hidden_dim": 8}})
    with pytest.raises(ValueError, match="width_fraction"):
        validate_expert({"backbone": {"source": "x"}, "expert": {"width_fraction": 1.5}})
