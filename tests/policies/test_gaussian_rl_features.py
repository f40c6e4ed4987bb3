"""The Gaussian head on RL-only features (``policy.rl_vision``) and a detached embedding (``ppo_scratch``).

Built with features it starts as the head without them (the projection is zero and no random number is drawn for
it); its mean's first layer then reads ``W1 e + b1 + P f``; with ``detach_embedding`` the log-prob's gradient
reaches the head and ``P`` but not the embedding, and the VLA policy stores the embedding for the update."""

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
from policies.normalization import compute_stats
from policies.vla import EMBEDDING_KEY, VLAPolicy

EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, FEATURE_DIM = 8, 3, 2, 5


def heads(**options):
    """The head reading features and the plain head, each built from seed 0."""
    torch.manual_seed(0)
    with_features = build_head(
        "gaussian", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, FEATURE_DIM, hidden_dim=16, **options
    )
    torch.manual_seed(0)
    plain = build_head("gaussian", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, hidden_dim=16, **options)
    return with_features, plain


def test_at_initialisation_the_head_with_features_is_the_head_without():
    head, plain = heads()
    for name, tensor in plain.state_dict().items():
        assert torch.equal(head.state_dict()[name], tensor), name
    assert torch.count_nonzero(head.feature_projection.weight) == 0
    embedding, features = torch.randn(4, EMBEDDING_DIM), torch.randn(4, FEATURE_DIM)
    actions = torch.randn(4, CHUNK_SIZE, ACTION_DIM)
    log_prob, _ = head.log_prob(embedding, actions, {}, rl_features=features)
    assert torch.equal(log_prob, plain.log_prob(embedding, actions, {})[0])


def test_the_mean_reads_the_features_through_the_first_layer():
    head, _ = heads(num_layers=2)
    with torch.no_grad():
        head.feature_projection.weight.normal_()
    embedding, features = torch.randn(4, EMBEDDING_DIM), torch.randn(4, FEATURE_DIM)
    first, rest = head.network[0], head.network[1:]
    hidden = embedding @ first.weight.T + first.bias + features @ head.feature_projection.weight.T
    expected = rest(hidden).view(4, CHUNK_SIZE, ACTION_DIM)
    mean = head.deterministic_action(embedding, rl_features=features)
    assert torch.allclose(mean, expected, atol=1e-6)
    assert not torch.allclose(
        mean, head.deterministic_action(embedding, rl_features=torch.zeros_like(features))
    )


def test_detached_embedding_gets_no_gradient_and_the_projection_does():
    head, _ = heads(detach_embedding=True)
    assert not head.log_prob_reaches_embedding
    embedding = torch.randn(4, EMBEDDING_DIM, requires_grad=True)
    features = torch.randn(4, FEATURE_DIM)
    with torch.no_grad():
        actions, replay = head.sample(embedding, rl_features=features)
    log_prob, _ = head.log_prob(embedding, actions, replay, rl_features=features)
    log_prob.sum().backward()
    assert embedding.grad is None
    assert head.feature_projection.weight.grad is not None
    assert torch.count_nonzero(head.feature_projection.weight.grad) > 0
    attached, _ = heads()
    assert attached.log_prob_reaches_embedding


def test_features_of_the_wrong_width_or_missing_are_refused():
    head, plain = heads()
    embedding = torch.randn(2, EMBEDDING_DIM)
    with pytest.raises(ValueError, match="rl_features"):
        head.sample(embedding, rl_features=torch.randn(2, FEATURE_DIM + 1))
    with pytest.raises(ValueError, match="rl_feature_dim=0"):
        plain.sample(embedding, rl_features=torch.randn(2, FEATURE_DIM))
    with pytest.raises(ValueError, match="rl_feature_dim=-1"):
        build_head("gaussian", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, -1)


def tiny_policy() -> VLAPolicy:
    config = PolicyConfig(
        vision=VisionConfig(
            backbone_kwargs={"channels": [8, 8, 16, 16], "stem_width": 8, "norm_layer": "groupnorm1"}
        ),
        language=LanguageConfig(embedding_dim=16, num_buckets=256),
        state=StateConfig(hidden_dims=[16], output_dim=16),
        head=HeadConfig(name="gaussian", options={"hidden_dim": 16, "detach_embedding": True}),
        value=ValueConfig(hidden_dims=[8], detach_input=True),
        rl_vision=RLVisionConfig(enabled=True, kind="pixels", downsample=4, feature_dim=FEATURE_DIM),
        embedding_dim=16,
        chunk_size=CHUNK_SIZE,
    )
    spec = SimpleNamespace(camera_names=("front",), image_size=(16, 16), state_dim=3,
                           action_low=(-1.0, -1.0), action_high=(1.0, 1.0), action_dim=ACTION_DIM)  # fmt: skip
    rng = np.random.default_rng(0)
    stats = {
        "action": compute_stats(rng.uniform(-0.8, 0.8, (64, ACTION_DIM))),
        "state": compute_stats(rng.normal(size=(64, 3))),
    }
    torch.manual_seed(0)
    return VLAPolicy(config, spec, stats)


def test_the_policy_stores_the_embedding_and_its_update_needs_no_encoder():
    policy = tiny_policy()
    assert policy.head.rl_feature_dim == FEATURE_DIM and not policy.rl_moves_encoders
    rng = np.random.default_rng(1)
    obs = {"images": {"front": torch.as_tensor(rng.integers(0, 256, (4, 16, 16, 3), dtype=np.uint8))},
           "state": torch.randn(4, 3), "instruction": "reach the red block"}  # fmt: skip
    actions, extras = policy.act(obs)
    assert EMBEDDING_KEY in extras
    log_prob, _, _ = policy.evaluate(obs, extras)
    assert torch.allclose(log_prob, extras["log_prob"], atol=1e-6)
    log_prob.sum().backward()
    assert all(p.grad is None for p in policy.encoder.parameters())
    assert policy.rl_vision.projection.weight.grad is not None
