"""The action-expert VLA on tiny random VLMs (real Hugging Face folders): the policy kit with Flow-SDE and
Flow-Noise, rollout and update log-probs bit for bit, the prefix computed once giving what recomputing it at every
denoising step gives, pi0's block mask, the expert's own narrower weights, and flow-matching SFT under LoRA."""

from __future__ import annotations

import pytest
import torch

from policies.backbones.action_expert import ActionExpert, ExpertConfig, PrefixContext
from policies.backbones.tiny import tiny_config, write_tiny_vlm
from policies.checks import run_checks, synthetic_io_spec, synthetic_observation, synthetic_stats
from policies.factory import build_from_factory

FACTORY = "policies.backbones.expert_vla:build_policy"


@pytest.fixture(scope="module")
def tiny_vlms(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlms")
    return {arch: write_tiny_vlm(root / arch, arch) for arch in ("idefics3", "paligemma")}


def config(source, rl_method="sde", train="lora", **flow):
    return {"backbone": {"source": str(source), "train": train, "max_length": 8, "lora_rank": 4},
            "flow": {"num_inference_steps": 3, "rl_method": rl_method, **flow}, "value": {"hidden_dims": [16]}}  # fmt: skip


def build(source, **kwargs):
    io_spec = synthetic_io_spec()
    torch.manual_seed(0)
    return build_from_factory(FACTORY, config(source, **kwargs), io_spec, synthetic_stats(io_spec)).eval()


@pytest.mark.parametrize(("arch", "rl_method"), [("idefics3", "sde"), ("paligemma", "noise")])
def test_each_architecture_passes_the_kit(tiny_vlms, arch, rl_method):
    run_checks(FACTORY, config(tiny_vlms[arch], rl_method))


@pytest.mark.parametrize(("rl_method", "options"), [("sde", {}), ("sde", {"hybrid": True}), ("noise", {})])
def test_rollout_and_update_log_probs_agree_bit_for_bit(tiny_vlms, rl_method, options):
    policy = build(tiny_vlms["idefics3"], rl_method=rl_method, **options)
    obs = synthetic_observation(synthetic_io_spec(), 3, seed=2)
    _, extras = policy.act(obs, generator=torch.Generator().manual_seed(3))
    log_prob, _, value = policy.evaluate(obs, extras)
    assert torch.equal(log_prob, extras["log_prob"]) and torch.equal(value, extras["value"])
    assert log_prob.requires_grad and log_prob.shape == (3, 4, 3)


@pytest.mark.parametrize("deterministic", [True, False])
def test_the_cached_prefix_gives_what_recomputing_it_every_step_gives(tiny_vlms, deterministic):
    policy = build(tiny_vlms["paligemma"])
    obs = synthetic_observation(synthetic_io_spec(), 2, seed=5)
    cached, cached_extras = policy.act(obs, deterministic, generator=torch.Generator().manual_seed(1))
    velocity = policy.head.denoiser
    calls = []

    def recompute_prefix(module, args):
        calls.append(1)
        module.context = policy.prefix_context(obs)[0]  # a fresh VLM pass over the prefix for this step

    handle = velocity.register_forward_pre_hook(recompute_prefix)
    try:
        recomputed, extras = policy.act(obs, deterministic, generator=torch.Generator().manual_seed(1))
    finally:
        handle.remove()
    assert len(calls) == 3  # one per denoising step
    assert torch.equal(cached, recomputed) and torch.equal(cached_extras["log_prob"], extras["log_prob"])


def test_the_block_mask_is_pi0s():
    expert = ActionExpert(tiny_config("idefics3", 32, 32, 2).text_config, 3, 2, 5, ExpertConfig())
    prefix_mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    mask = expert.block_mask(prefix_mask, has_state=True)[:, 0]  # (B, 1 + 3, 3 + 1 + 3)
    assert mask.shape == (2, 4, 7)
    assert mask[0, :, :3].tolist() == [[True, True, False]] * 4  # every suffix token sees the valid prefix
    assert mask[0, 0, 3:].tolist() == [True, False, False, False]  # the state sees itself only
    assert mask[0, 1:, 3:].all()  # the actions see the state and each other


def test_the_expert_ignores_padded_prefix_keys_and_the_state_token_ignores_the_actions():
    text = tiny_config("idefics3", 32, 32, 2).text_config
    torch.manual_seed(0)
    expert = ActionExpert(text, 3, 2, 5, ExpertConfig())
    keys = [torch.randn(2, 1, 4, 16) for _ in range(2)]
    values = [torch.randn(2, 1, 4, 16) for _ in range(2)]
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    context = PrefixContext(keys, values, mask, torch.randn(2, 5))
    noisy, time = torch.randn(2, 3, 2), torch.tensor([500.0])
    velocity = expert(noisy, time, context)
    padded_changed = PrefixContext([k.clone() for k in keys], [v.clone() for v in values], mask, context.state)
    for tensor in (*padded_changed.keys, *padded_changed.values):
        tensor[:, :, 3] += 7.0  # position 3: padding in sample 0, a valid token in sample 1
    changed = expert(noisy, time, padded_changed)
    assert torch.allclose(changed[0], velocity[0], atol=1e-6) and not torch.allclose(changed[1], velocity[1])
    state_token = []
    handle = expert.layers[-1].register_forward_hook(lambda m, a, out: state_token.append(out[:, 0]))
    expert(noisy, time, context)
    expert(noisy + 1.0, time, context)
    handle.remove()
    assert torch.allclose(state_token[0], state_token[1], atol=1e-6)


def test_the_expert_has_its_own_narrower_weights_one_layer_per_vlm_layer(tiny_vlms):
    policy = build(tiny_vlms["idefics3"])
    vlm_ids = {id(p) for p in policy.prefix.parameters()}
    assert not vlm_ids & {id(p) for p in policy.expert.parameters()}
    assert policy.expert.width == policy.prefix.hidden_size // 2
    assert len(policy.expert.layers) == policy.prefix.text_config.num_hidden_layers
    assert all(p.requires_grad for p in policy.expert.parameters())


def test_flow_matching_sft_trains_the_expert_and_only_the_adapters_of_the_vlm(tiny_vlms):
    policy = build(tiny_vlms["idefics3"]).train()
    obs = synthetic_observation(synthetic_io_spec(), 4, seed=5)
    actions, _ = policy.act(obs, generator=torch.Generator().manual_seed(1))
    batch = {**obs, "action": actions.numpy()}
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for _ in range(12):
        torch.manual_seed(123)  # the same flow times and noise at every step: a regression the expert must fit
        loss = policy.bc_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]
    changed = {name for name, p in policy.named_parameters() if not torch.equal(p, before[name])}
    backbone = {name for name in changed if ".backbone." in name}
    assert backbone and all("lora_" in name for name in backbone)
    assert {name for name in changed if ".expert.layers." in name}
