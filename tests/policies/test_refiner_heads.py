"""Refiners that train a small Gaussian on top of a frozen chain head (flow or diffusion): steered (DSRL) and
residual. What they sample (against the base's deterministic sampler written out independently), their
log-probs against torch.distributions, where RL and BC gradients go, and their errors."""

from __future__ import annotations

import pytest
import torch

from policies.heads import HEADS, build_head
from policies.heads.gaussian import GaussianHead
from policies.heads.residual import ResidualHead
from policies.heads.steered import SteeredHead

EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, STEPS = 8, 3, 2, 5
DENOISER = {"hidden_dim": 32, "num_blocks": 2, "time_embedding_dim": 16, "num_inference_steps": STEPS}
BASES = {"flow": {"name": "flow", "options": DENOISER},
         "diffusion": {"name": "diffusion", "options": {**DENOISER, "num_train_timesteps": 50}}}  # fmt: skip


def make_head(kind: str, base: str = "flow", rl_feature_dim: int = 0, **options):
    torch.manual_seed(0)
    head = build_head(kind, EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, rl_feature_dim, base=BASES[base], hidden_dim=16,
                      **options)  # fmt: skip
    assert isinstance(head, {"steered": SteeredHead, "residual": ResidualHead}[kind])
    return head


def deterministic_chain(base, embedding: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The base's deterministic sampler written out with its denoiser: Euler from t = 1 to 0 (flow) or DDIM
    with eta = 0 on the trailing grid, the clean chunk clipped and the predicted noise kept (diffusion);
    independent of the head's code."""
    state = noise
    if base.config_class.__name__.startswith("Flow"):
        dt = 1.0 / STEPS
        for k in range(STEPS):
            state = state - dt * base.denoiser(
                state, torch.full((1,), (1.0 - k * dt) * base.config.time_scale), embedding
            )
        return state
    total = base.config.num_train_timesteps
    grid = [total - 1 - k * total // STEPS for k in range(STEPS)]
    alphas = torch.cumprod(1.0 - base.train_scheduler.betas, 0)
    for k, t in enumerate(grid):
        eps = base.denoiser(state, torch.full((1,), float(t)), embedding)
        a_t, a_p = alphas[t], (alphas[grid[k + 1]] if k + 1 < STEPS else torch.tensor(1.0))
        clean = ((state - (1 - a_t).sqrt() * eps) / a_t.sqrt()).clamp(-1.0, 1.0)
        state = a_p.sqrt() * clean + (1 - a_p).sqrt() * eps
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
    return embedding, {
        name for name, p in head.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0
    }


@pytest.mark.parametrize("base", sorted(BASES))
def test_steered_head_starts_as_its_bases_noise_and_samples_its_deterministic_chain(base) -> None:
    head = make_head("steered", base, init_std=0.5)
    embedding = torch.randn(6, EMBEDDING_DIM)
    mean, std = head.latent_distribution(embedding)
    assert torch.equal(mean, torch.zeros(6, CHUNK_SIZE, ACTION_DIM))
    with torch.no_grad():
        actions, replay = head.sample(embedding, deterministic=True)
        assert torch.equal(replay["latent"], mean)
        assert torch.allclose(actions, deterministic_chain(head.base, embedding, mean), atol=1e-5)
        head.latent.mean_network[-1].bias.normal_()  # a mean away from zero
        actions, replay = head.sample(embedding, generator=torch.Generator().manual_seed(2))
        assert torch.allclose(actions, deterministic_chain(head.base, embedding, replay["latent"]), atol=1e-5)
    log_prob, entropy = head.log_prob(embedding, actions, replay)
    mean, std = head.latent_distribution(embedding)
    normal = torch.distributions.Normal(mean, std)
    assert torch.allclose(log_prob, normal.log_prob(replay["latent"]), atol=1e-5)
    assert torch.allclose(entropy, normal.entropy(), atol=1e-6)
    assert torch.allclose(std, torch.full_like(std, 0.5))


@pytest.mark.parametrize("base", sorted(BASES))
def test_residual_head_starts_as_its_bases_chain_from_zero_noise_and_adds_a_gaussian_correction(base) -> None:
    head = make_head("residual", base, init_std=0.2)
    embedding = torch.randn(6, EMBEDDING_DIM)
    with torch.no_grad():
        chunk = deterministic_chain(head.base, embedding, torch.zeros(6, CHUNK_SIZE, ACTION_DIM))
        deterministic, replay = head.sample(embedding, deterministic=True)
        assert torch.allclose(deterministic, chunk, atol=1e-5)  # zero mean before RL
        assert torch.equal(replay["residual"], torch.zeros_like(chunk))
        head.residual.mean_network[-1].bias.normal_()
        actions, replay = head.sample(embedding, generator=torch.Generator().manual_seed(5))
    assert torch.allclose(replay["base_action"], chunk, atol=1e-5)
    assert torch.allclose(actions, chunk + replay["residual"], atol=1e-5)
    log_prob, entropy = head.log_prob(embedding, actions, replay)
    mean, std = head.residual_distribution(embedding, replay["base_action"])
    normal = torch.distributions.Normal(mean, std)
    assert torch.allclose(log_prob, normal.log_prob(replay["residual"]), atol=1e-5)
    assert torch.allclose(entropy, normal.entropy(), atol=1e-6)
    assert torch.allclose(std, torch.full_like(std, 0.2))
    assert mean.abs().max() <= head.config.mean_bound


@pytest.mark.parametrize(("kind", "small"), [("steered", "latent"), ("residual", "residual")])
@pytest.mark.parametrize("base", sorted(BASES))
def test_rl_gradient_reaches_only_the_refiner_and_bc_gradient_only_the_base(kind, small, base) -> None:
    head = make_head(kind, base)
    embedding, with_grad = rl_gradient(head, getattr(head, small))
    assert with_grad == {name for name, _ in head.named_parameters() if name.startswith(small + ".")}
    assert embedding.grad is None  # detach_embedding: the encoders stay as SFT left them
    head.zero_grad(set_to_none=True)
    head.bc_loss(embedding.detach(), torch.randn(8, CHUNK_SIZE, ACTION_DIM)).backward()
    with_grad = {name for name, p in head.named_parameters() if p.grad is not None}
    assert with_grad and all(name.startswith("base.denoiser.") for name in with_grad)


def test_bad_options_and_replays_raise_naming_the_option() -> None:
    head = make_head("steered", mean_bound=1.5)
    with torch.no_grad():
        head.latent.mean_network[-1].bias.fill_(100.0)
    mean, _ = head.latent_distribution(torch.randn(4, EMBEDDING_DIM))
    assert mean.abs().max() <= 1.5 and mean.min() > 1.49
    with pytest.raises(KeyError, match="latent"):
        head.log_prob(torch.randn(4, EMBEDDING_DIM), torch.zeros(4, CHUNK_SIZE, ACTION_DIM), {})
    with pytest.raises(ValueError, match="init_std=10.0"):
        make_head("steered", init_std=10.0)
    with pytest.raises(ValueError, match="mean_bound=0.0"):
        make_head("steered", mean_bound=0.0)
    residual = make_head("residual")
    embedding = torch.randn(3, EMBEDDING_DIM)
    with torch.no_grad():
        actions, replay = residual.sample(embedding)
    with pytest.raises(ValueError, match="base_action \\+ residual"):
        residual.log_prob(embedding, actions + 0.1, replay)
    with pytest.raises(KeyError, match="residual"):
        residual.log_prob(embedding, actions, {"base_action": replay["base_action"]})
    with pytest.raises(ValueError, match="base_noise='gauss'"):
        make_head("residual", base_noise="gauss")
    with pytest.raises(
        ValueError, match=r"base.name='gaussian': a refiner wraps a head with a denoising chain"
    ):
        build_head("residual", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, base={"name": "gaussian"})
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['no_such'\] for action head 'flow'"):
        build_head(
            "steered", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, base={"name": "flow", "options": {"no_such": 1}}
        )
    with pytest.raises(ValueError, match="'flow_residual' was renamed.*name: residual"):
        build_head("flow_residual", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM)


@pytest.mark.parametrize(("kind", "small"), [("steered", "latent"), ("residual", "residual")])
def test_refiner_with_rl_features_keeps_its_base_and_moves_by_them(kind, small, monkeypatch) -> None:
    feature_dim = 4
    head = make_head(kind, "diffusion", rl_feature_dim=feature_dim)
    with torch.no_grad():
        getattr(head, small).mean_network[-1].weight.normal_()
    embedding = torch.randn(5, EMBEDDING_DIM)
    features = torch.randn(5, feature_dim, requires_grad=True)
    other = torch.randn(5, feature_dim)
    with torch.no_grad():
        first, replay = head.sample(embedding, deterministic=True, rl_features=features)
        second, other_replay = head.sample(embedding, deterministic=True, rl_features=other)
    assert (first - second).abs().max() > 1e-3  # the refiner reads the features
    if kind == "residual":  # the base never reads them
        assert torch.equal(replay["base_action"], other_replay["base_action"])
    with torch.no_grad():
        actions, replay = head.sample(
            embedding, rl_features=features, generator=torch.Generator().manual_seed(2)
        )
    log_prob, _ = head.log_prob(embedding, actions, replay, rl_features=features)
    log_prob.sum().backward()
    assert features.grad is not None and features.grad.abs().sum() > 0
    with pytest.raises(ValueError, match=rf"reads RL features of shape \(5, {feature_dim}\); got None"):
        head.sample(embedding)
    with pytest.raises(ValueError, match="rl_feature_dim=0"):
        make_head(kind).sample(embedding, rl_features=other)
    with monkeypatch.context() as patch:  # a plug-in head that reads none
        patch.setitem(HEADS, "no_features", type("NoFeatures", (GaussianHead,), {"reads_rl_features": False}))
        with pytest.raises(ValueError, match="'no_features' does not read RL-only features.*residual"):
            build_head("no_features", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, rl_feature_dim=feature_dim)
