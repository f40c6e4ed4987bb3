"""Heads that train a small Gaussian on top of a frozen flow: noise-steered (DSRL) and residual.

What they sample, their log-probs against torch.distributions, and where RL and BC gradients go."""

from __future__ import annotations

import pytest
import torch

from policies.heads import build_head
from policies.heads.residual_flow import ResidualFlowHead
from policies.heads.steered_flow import SteeredFlowHead

EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM = 8, 3, 2
OPTIONS = {"hidden_dim": 32, "num_blocks": 2, "time_embedding_dim": 16, "num_inference_steps": 5,
           "latent_hidden_dim": 16}  # fmt: skip


def make_head(**options) -> SteeredFlowHead:
    torch.manual_seed(0)
    head = build_head("flow_steered", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, **{**OPTIONS, **options})
    assert isinstance(head, SteeredFlowHead)
    return head


def euler_ode(head: SteeredFlowHead, embedding: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Euler from t = 1 to t = 0 written out with the denoiser (independent of the head's sampler)."""
    state, dt = noise, 1.0 / 5
    for k in range(5):
        time = torch.full((1,), (1.0 - k * dt) * head.config.time_scale)
        state = state - dt * head.denoiser(state, time, embedding)
    return state


def rl_gradient(head, small_policy) -> tuple[torch.Tensor, set[str]]:
    """Backpropagate the RL log-prob of a sample; returns the embedding and the parameters with a gradient."""
    with torch.no_grad():  # the zero-initialised last layer would hide the gradient of the layers below
        small_policy.mean_network[-1].weight.normal_()
    embedding = torch.randn(8, EMBEDDING_DIM, requires_grad=True)
    with torch.no_grad():
        actions, replay = head.sample(embedding)
    log_prob, _ = head.log_prob(embedding, actions, replay)
    log_prob.sum().backward()
    return embedding, {name for name, p in head.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}


def test_latent_policy_starts_as_the_flows_own_noise_and_deterministic_is_the_ode_from_its_mean() -> None:
    head = make_head()
    embedding = torch.randn(6, EMBEDDING_DIM)
    mean, std = head.latent_distribution(embedding)
    assert torch.equal(mean, torch.zeros(6, CHUNK_SIZE, ACTION_DIM))
    assert torch.allclose(std, torch.ones_like(std))
    with torch.no_grad():
        actions, replay = head.sample(embedding, deterministic=True)
        expected = euler_ode(head, embedding, torch.zeros(6, CHUNK_SIZE, ACTION_DIM))
    assert torch.equal(replay["latent"], mean)
    assert torch.allclose(actions, expected, atol=1e-6)


def test_stochastic_sample_is_the_ode_of_the_stored_noise_and_log_prob_is_its_gaussian_density() -> None:
    head = make_head(latent_init_std=0.5)
    with torch.no_grad():
        head.latent.mean_network[-1].bias.normal_()  # a mean away from zero
    embedding = torch.randn(6, EMBEDDING_DIM)
    with torch.no_grad():
        actions, replay = head.sample(embedding, generator=torch.Generator().manual_seed(2))
        assert torch.allclose(actions, euler_ode(head, embedding, replay["latent"]), atol=1e-6)
    log_prob, entropy = head.log_prob(embedding, actions, replay)
    mean, std = head.latent_distribution(embedding)
    normal = torch.distributions.Normal(mean, std)
    assert torch.allclose(log_prob, normal.log_prob(replay["latent"]), atol=1e-5)
    assert torch.allclose(entropy, normal.entropy(), atol=1e-6)
    assert torch.allclose(std, torch.full_like(std, 0.5))


def test_rl_gradient_reaches_only_the_latent_policy_and_bc_gradient_only_the_flow() -> None:
    head = make_head()
    embedding, with_grad = rl_gradient(head, head.latent)
    assert with_grad == {name for name, _ in head.named_parameters() if name.startswith("latent.")}
    assert embedding.grad is None  # detach_embedding: the encoders stay as SFT left them

    head.zero_grad(set_to_none=True)
    head.bc_loss(embedding.detach(), torch.randn(8, CHUNK_SIZE, ACTION_DIM)).backward()
    with_grad = {name for name, p in head.named_parameters() if p.grad is not None}
    assert with_grad and all(name.startswith("denoiser.") for name in with_grad)


def test_latent_mean_stays_inside_its_bound_and_bad_options_and_replays_raise() -> None:
    head = make_head(latent_mean_bound=1.5)
    with torch.no_grad():
        head.latent.mean_network[-1].bias.fill_(100.0)
    mean, _ = head.latent_distribution(torch.randn(4, EMBEDDING_DIM))
    assert mean.abs().max() <= 1.5 and mean.min() > 1.49
    with pytest.raises(KeyError, match="latent"):
        head.log_prob(torch.randn(4, EMBEDDING_DIM), torch.zeros(4, CHUNK_SIZE, ACTION_DIM), {})
    with pytest.raises(ValueError, match="latent_init_std"):
        make_head(latent_init_std=10.0)
    with pytest.raises(ValueError, match="latent_mean_bound"):
        make_head(latent_mean_bound=0.0)


def make_residual_head(**options) -> ResidualFlowHead:
    torch.manual_seed(0)
    options = {**OPTIONS, "residual_hidden_dim": 16, **options}
    options.pop("latent_hidden_dim")
    head = build_head("flow_residual", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, **options)
    assert isinstance(head, ResidualFlowHead)
    return head


def test_residual_head_starts_as_its_flow_from_zero_noise_and_adds_a_gaussian_correction() -> None:
    head = make_residual_head(residual_init_std=0.2)
    embedding = torch.randn(6, EMBEDDING_DIM)
    with torch.no_grad():
        base = euler_ode(head, embedding, torch.zeros(6, CHUNK_SIZE, ACTION_DIM))
        deterministic, replay = head.sample(embedding, deterministic=True)
        assert torch.allclose(deterministic, base, atol=1e-6)  # zero mean before RL
        assert torch.equal(replay["residual"], torch.zeros_like(base))
        head.residual.mean_network[-1].bias.normal_()
        actions, replay = head.sample(embedding, generator=torch.Generator().manual_seed(5))
    assert torch.allclose(replay["base_action"], base, atol=1e-6)
    assert torch.allclose(actions, base + replay["residual"], atol=1e-6)
    log_prob, entropy = head.log_prob(embedding, actions, replay)
    mean, std = head.residual_distribution(embedding, base)
    normal = torch.distributions.Normal(mean, std)
    assert torch.allclose(log_prob, normal.log_prob(replay["residual"]), atol=1e-5)
    assert torch.allclose(entropy, normal.entropy(), atol=1e-6)
    assert torch.allclose(std, torch.full_like(std, 0.2))
    assert mean.abs().max() <= head.config.residual_mean_bound


def test_residual_head_rl_gradient_reaches_only_the_residual_policy_and_bad_inputs_raise() -> None:
    head = make_residual_head()
    embedding, with_grad = rl_gradient(head, head.residual)
    assert with_grad == {name for name, _ in head.named_parameters() if name.startswith("residual.")}
    assert embedding.grad is None
    with torch.no_grad():
        actions, replay = head.sample(embedding)
    with pytest.raises(ValueError, match="base_action \\+ residual"):
        head.log_prob(embedding, actions + 0.1, replay)
    with pytest.raises(KeyError, match="residual"):
        head.log_prob(embedding, actions, {"base_action": replay["base_action"]})
    with pytest.raises(ValueError, match="base_noise='gauss'"):
        make_residual_head(base_noise="gauss")
    with pytest.raises(ValueError, match="residual_init_std"):
        make_residual_head(residual_init_std=5.0)


def test_residual_head_with_rl_features_keeps_its_flow_and_corrects_by_them() -> None:
    feature_dim = 4
    torch.manual_seed(0)
    options = {**OPTIONS, "residual_hidden_dim": 16}
    options.pop("latent_hidden_dim")
    head = build_head("flow_residual", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, rl_feature_dim=feature_dim, **options)
    with torch.no_grad():
        head.residual.mean_network[-1].weight.normal_()
    embedding = torch.randn(5, EMBEDDING_DIM)
    features = torch.randn(5, feature_dim, requires_grad=True)
    other = torch.randn(5, feature_dim)
    with torch.no_grad():
        base = euler_ode(head, embedding, torch.zeros(5, CHUNK_SIZE, ACTION_DIM))
        first, replay = head.sample(embedding, deterministic=True, rl_features=features)
        second, other_replay = head.sample(embedding, deterministic=True, rl_features=other)
    # the flow never reads the features; the correction does
    assert torch.allclose(replay["base_action"], base, atol=1e-6)
    assert torch.allclose(other_replay["base_action"], base, atol=1e-6)
    assert (first - second).abs().max() > 1e-3
    with torch.no_grad():
        actions, replay = head.sample(embedding, rl_features=features, generator=torch.Generator().manual_seed(2))
    log_prob, _ = head.log_prob(embedding, actions, replay, rl_features=features)
    mean, std = head.residual_distribution(embedding, base, features)
    assert torch.allclose(log_prob, torch.distributions.Normal(mean, std).log_prob(replay["residual"]), atol=1e-5)
    log_prob.sum().backward()
    assert features.grad is not None and features.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="rl_features"):
        head.sample(embedding)
    with pytest.raises(ValueError, match="rl_feature_dim=0"):
        make_residual_head().sample(embedding, rl_features=other)
    with pytest.raises(ValueError, match="'flow' does not read RL-only features.*flow_residual"):
        build_head("flow", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, rl_feature_dim=feature_dim)
