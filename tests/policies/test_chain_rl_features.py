"""Chain heads (flow, diffusion) that RL fine-tunes on a fixed embedding plus RL-only features.

At initialisation each is exactly its SFT chain (the feature projection is zero); the RL gradient reaches the
denoiser (and Flow-Noise's noise network) and the projection but not the embedding; the policy stores the
embedding and the update recomputes the rollout's log-prob from the stored chain."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from policies.config import (
    HeadConfig,
    LanguageConfig,
    PolicyConfig,
    RLVisionConfig,
    StateConfig,
    ValueConfig,
    VisionConfig,
)
from policies.heads import build_head
from policies.heads.chain import DenoisingChainHead
from policies.normalization import compute_stats
from policies.vla import VLAPolicy

EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, FEATURE_DIM = 8, 3, 2, 4
OPTIONS = {"hidden_dim": 32, "num_blocks": 2, "time_embedding_dim": 16, "num_inference_steps": 5}
KINDS = {"flow": {"rl_method": "noise"}, "diffusion": {"num_train_timesteps": 50}}


def make_heads(kind: str = "flow", **options) -> tuple[DenoisingChainHead, DenoisingChainHead]:
    """The head reading RL features on a detached embedding and the same head without them, each from seed 0."""
    options = {**OPTIONS, **KINDS[kind], **options}
    torch.manual_seed(0)
    head = build_head(kind, EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, FEATURE_DIM, detach_embedding=True, **options)
    torch.manual_seed(0)
    plain = build_head(kind, EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, **options)
    assert isinstance(head, DenoisingChainHead)
    return head, plain


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_at_initialisation_it_samples_and_scores_as_the_head_without_features(kind) -> None:
    head, plain = make_heads(kind)
    shared = {name: p for name, p in head.state_dict().items() if not name.startswith("feature_projection.")}
    assert all(
        torch.equal(p, plain.state_dict()[name]) for name, p in shared.items()
    )  # no random draws for it
    assert set(plain.state_dict()) == set(shared)
    embedding, features = torch.randn(6, EMBEDDING_DIM), torch.randn(6, FEATURE_DIM)
    with torch.no_grad():
        for deterministic in (False, True):
            actions, replay = head.sample(
                embedding, deterministic, torch.Generator().manual_seed(3), rl_features=features
            )
            expected, expected_replay = plain.sample(
                embedding, deterministic, torch.Generator().manual_seed(3)
            )
            torch.testing.assert_close(actions, expected, rtol=0, atol=0)
            torch.testing.assert_close(replay["chain"], expected_replay["chain"], rtol=0, atol=0)
            log_prob, entropy = head.log_prob(embedding, actions, replay, rl_features=2 * features)
            expected_log_prob, expected_entropy = plain.log_prob(embedding, expected, expected_replay)
            torch.testing.assert_close(log_prob, expected_log_prob, rtol=0, atol=0)
            if kind == "flow":  # Flow-Noise learns its std: the kernels' entropies
                torch.testing.assert_close(entropy, expected_entropy, rtol=0, atol=0)
            torch.testing.assert_close(log_prob, replay["log_prob"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_rl_gradient_reaches_the_denoiser_and_projection_but_not_the_embedding(kind) -> None:
    head, _ = make_heads(kind, rl_feature_scale=3.0)
    embedding = torch.randn(8, EMBEDDING_DIM, requires_grad=True)
    features = torch.randn(8, FEATURE_DIM, requires_grad=True)
    with torch.no_grad():
        actions, replay = head.sample(embedding, rl_features=features)
    log_prob, entropy = head.log_prob(embedding, actions, replay, rl_features=features)
    (log_prob.sum() + (0 if entropy is None else entropy.sum())).backward()
    for name, parameter in head.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, f"{name} got no gradient"
    assert embedding.grad is None  # detach_embedding: the encoders stay as SFT left them
    assert not head.log_prob_reaches_embedding
    # Once the projection has moved, the features change the chunk (and get a gradient themselves).
    with torch.no_grad():
        head.feature_projection.weight.normal_()
        moved, _ = head.sample(embedding, True, torch.Generator().manual_seed(3), rl_features=features)
        other, _ = head.sample(embedding, True, torch.Generator().manual_seed(3), rl_features=-features)
    assert (moved - other).abs().max() > 1e-3
    features.grad = None
    head.log_prob(embedding, actions, replay, rl_features=features)[0].sum().backward()
    assert features.grad.abs().sum() > 0
    # bc_loss is the head's own: no features, the projection gets no gradient, the embedding does.
    head.zero_grad(set_to_none=True)
    head.bc_loss(embedding, torch.randn(8, CHUNK_SIZE, ACTION_DIM)).backward()
    assert head.feature_projection.weight.grad is None and embedding.grad.abs().sum() > 0


def test_entropy_is_the_sum_of_the_noise_kernels_entropies_and_the_projection_is_scaled() -> None:
    head, _ = make_heads(rl_feature_scale=4.0)
    with torch.no_grad():
        head.feature_projection.weight.normal_()
    embedding, features = torch.randn(5, EMBEDDING_DIM), torch.randn(5, FEATURE_DIM)
    with torch.no_grad():
        actions, replay = head.sample(embedding, rl_features=features)
        log_prob, entropy = head.log_prob(embedding, actions, replay, rl_features=features)
        chain = replay["chain"]
        expected_log_prob = torch.distributions.Normal(0.0, 1.0).log_prob(chain[:, 0])
        expected_entropy = torch.zeros_like(entropy)
        for step in range(5):
            time = 1.0 - 0.2 * step
            network_time = torch.full((1,), time * head.config.time_scale)
            offset = 4.0 * features @ head.feature_projection.weight.T
            velocity = head.denoiser(chain[:, step], network_time, embedding, condition_offset=offset)
            std = head.noise_network(embedding, network_time, chain[:, step])
            normal = torch.distributions.Normal(chain[:, step] - 0.2 * velocity, std)
            expected_log_prob += normal.log_prob(chain[:, step + 1])
            expected_entropy += normal.entropy()
            torch.testing.assert_close(head.step_kernel(embedding, chain[:, step], step, {}, features).std, std)
    torch.testing.assert_close(log_prob, expected_log_prob, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy, expected_entropy, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_zero_initial_noise_starts_every_chain_at_zero_and_leaves_its_density_out(kind) -> None:
    head, plain = make_heads(kind, initial_noise="zero")
    embedding, features = torch.randn(6, EMBEDDING_DIM), torch.randn(6, FEATURE_DIM)
    with torch.no_grad():
        deterministic, _ = head.sample(embedding, True, rl_features=features)
        expected = plain.denoise(embedding, torch.zeros(6, CHUNK_SIZE, ACTION_DIM))  # P = 0: the SFT chain
        torch.testing.assert_close(deterministic, expected, rtol=0, atol=1e-6)
        actions, replay = head.sample(
            embedding, generator=torch.Generator().manual_seed(2), rl_features=features
        )
        assert torch.equal(replay["chain"][:, 0], torch.zeros(6, CHUNK_SIZE, ACTION_DIM))
        assert (actions - deterministic).abs().min() > 0  # the steps' noise still explores
        log_prob, _ = head.log_prob(embedding, actions, replay, rl_features=features)
        steps = head.step_log_probs(embedding, replay, features).sum(1)
    torch.testing.assert_close(log_prob, steps, rtol=0, atol=0)
    torch.testing.assert_close(log_prob, replay["log_prob"], rtol=1e-5, atol=1e-5)


def test_bad_features_and_options_raise_with_names() -> None:
    head, _ = make_heads()
    embedding = torch.randn(3, EMBEDDING_DIM)
    with pytest.raises(ValueError, match=r"reads RL features of shape \(3, 4\); got None"):
        head.sample(embedding)
    with pytest.raises(ValueError, match="rl_feature_dim=0; it takes no rl_features"):
        build_head("diffusion", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, **OPTIONS).sample(
            embedding, rl_features=torch.randn(3, FEATURE_DIM)
        )
    with pytest.raises(ValueError, match="rl_feature_scale=0.0 must be > 0"):
        make_heads(rl_feature_scale=0.0)
    with pytest.raises(ValueError, match="initial_noise='gauss'; use 'sample' or 'zero'"):
        make_heads(initial_noise="gauss")


def tiny_policy(kind: str) -> VLAPolicy:
    config = PolicyConfig(
        vision=VisionConfig(
            backbone_kwargs={"channels": [8, 8, 16, 16], "stem_width": 8, "norm_layer": "groupnorm1"}
        ),
        language=LanguageConfig(embedding_dim=16, num_buckets=256),
        state=StateConfig(hidden_dims=[16], output_dim=16),
        head=HeadConfig(name=kind, options={**OPTIONS, **KINDS[kind], "num_blocks": 1, "detach_embedding": True}),
        value=ValueConfig(hidden_dims=[32], detach_input=True),
        rl_vision=RLVisionConfig(enabled=True, kind="pixels", downsample=4, feature_dim=6),
        embedding_dim=32,
        chunk_size=3,
    )
    spec = SimpleNamespace(camera_names=("front", "wrist"), image_size=(16, 16), state_dim=3,
                           action_low=(-1.0, -1.0), action_high=(1.0, 1.0), action_dim=2)  # fmt: skip
    rng = np.random.default_rng(0)
    stats = {
        "action": compute_stats(rng.uniform(-0.8, 0.8, (64, 2))),
        "state": compute_stats(rng.normal(size=(64, 3))),
    }
    torch.manual_seed(0)
    return VLAPolicy(config, spec, stats)


def tiny_obs(batch: int = 4) -> dict:
    rng = np.random.default_rng(1)
    images = {camera: torch.from_numpy(rng.integers(0, 256, (batch, 16, 16, 3), dtype=np.uint8))
              for camera in ("front", "wrist")}  # fmt: skip
    return {"images": images, "state": torch.randn(batch, 3), "instruction": ["lift the red block"] * batch}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_policy_reuses_the_embedding_and_rl_trains_the_head_and_pixels_not_the_encoders(kind) -> None:
    policy = tiny_policy(kind)
    with torch.no_grad():
        policy.head.feature_projection.weight.normal_()  # as after some RL: the pixels reach the flow
    obs = tiny_obs()
    _, extras = policy.act(obs, generator=torch.Generator().manual_seed(1))
    assert not policy.rl_moves_encoders and "embedding" in extras
    calls = []
    policy.encoder.register_forward_hook(lambda *_: calls.append(1))
    log_prob, entropy, value = policy.evaluate(obs, extras)
    assert calls == []  # the update reuses the stored embedding
    torch.testing.assert_close(log_prob, extras["log_prob"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(value, extras["value"], rtol=1e-5, atol=1e-5)
    (log_prob.sum() + (0 if entropy is None else entropy.sum()) + value.sum()).backward()
    moved = {
        name.split(".")[0]
        for name, p in policy.named_parameters()
        if p.grad is not None and p.grad.abs().sum() > 0
    }
    assert moved == {"head", "value_head", "rl_vision"}
    assert policy.head.denoiser.condition[0].weight.grad.abs().sum() > 0  # the head itself is fine-tuned
    policy.zero_grad(set_to_none=True)
    batch = {**tiny_obs(), "action": torch.zeros(4, 3, 2)}
    policy.bc_loss(batch).backward()  # SFT trains the head and encoders, never the RL-only parts
    assert all(p.grad is None for p in policy.rl_vision.parameters())
    assert policy.head.feature_projection.weight.grad is None
    assert policy.encoder.vision.backbone.model.conv1[0].weight.grad.abs().sum() > 0
