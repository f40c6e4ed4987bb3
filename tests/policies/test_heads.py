"""Contract tests that every action head (and every RL variant) must pass."""

from __future__ import annotations

import math

import pytest
import torch

from policies.heads import HEADS, build_head, reduce_log_prob

EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM = 8, 3, 2
TINY_DENOISER = {"hidden_dim": 32, "num_blocks": 2, "time_embedding_dim": 16, "num_inference_steps": 5}
VARIANTS = {
    "gaussian": ("gaussian", {"hidden_dim": 32}),
    "gaussian-state-std": ("gaussian", {"hidden_dim": 32, "std_mode": "state"}),
    "gaussian-tanh": ("gaussian", {"hidden_dim": 32, "squash": True}),
    "diffusion-ddpm": ("diffusion", {**TINY_DENOISER, "num_train_timesteps": 50}),
    "diffusion-ddim": (
        "diffusion",
        {**TINY_DENOISER, "num_train_timesteps": 50, "sampler": "ddim", "ddim_eta": 0.5},
    ),
    "diffusion-last-2": ("diffusion", {**TINY_DENOISER, "num_train_timesteps": 50, "finetune_last_steps": 2}),
    "flow-sde": ("flow", TINY_DENOISER),
    "flow-hybrid": ("flow", {**TINY_DENOISER, "hybrid": True}),
    "flow-noise": ("flow", {**TINY_DENOISER, "rl_method": "noise"}),
    "flow-steered": ("steered", {"base": {"name": "flow", "options": TINY_DENOISER}, "hidden_dim": 16}),
    "flow-residual": ("residual", {"base": {"name": "flow", "options": TINY_DENOISER}, "hidden_dim": 16,
                                   "base_noise": "sample"}),
    "diffusion-steered": ("steered", {"base": {"name": "diffusion", "options": {**TINY_DENOISER,
                                      "num_train_timesteps": 50}}, "hidden_dim": 16}),
    "flow-detached": ("flow", {**TINY_DENOISER, "rl_method": "noise", "detach_embedding": True}),
    "flow-zero-start": ("flow", {**TINY_DENOISER, "rl_method": "noise", "detach_embedding": True,
                                 "initial_noise": "zero"}),
    "diffusion-detached-zero-start": ("diffusion", {**TINY_DENOISER, "num_train_timesteps": 50,
                                                    "detach_embedding": True, "initial_noise": "zero"}),
}  # fmt: skip
# Heads whose RL log-prob deliberately leaves parameters or the embedding out (tests/policies/
# test_refiner_heads.py, test_chain_rl_features.py).
PARTIAL_GRADIENT_VARIANTS = {"flow-steered", "flow-residual", "diffusion-steered", "flow-detached", "flow-zero-start",
                             "diffusion-detached-zero-start"}  # fmt: skip


def make_head(variant: str, seed: int = 0):
    torch.manual_seed(seed)
    name, options = VARIANTS[variant]
    return build_head(name, EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, **options)


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_log_prob_recomputed_from_replay_equals_log_prob_of_sample(variant: str, deterministic: bool) -> None:
    head = make_head(variant)
    embedding = torch.randn(16, EMBEDDING_DIM)
    with torch.no_grad():
        actions, replay = head.sample(
            embedding, deterministic=deterministic, generator=torch.Generator().manual_seed(1)
        )
    assert actions.shape == (16, CHUNK_SIZE, ACTION_DIM)
    assert all(value.shape[0] == 16 for value in replay.values())
    log_prob, _ = head.log_prob(embedding, actions, replay)
    assert log_prob.shape == (16, CHUNK_SIZE, ACTION_DIM)
    assert torch.isfinite(log_prob).all()
    # exactly: the policy's act() hands replay["log_prob"] to PPO as the old log-prob of the update's ratio
    assert torch.equal(log_prob, replay["log_prob"]), (log_prob - replay["log_prob"]).abs().max().item()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_sampling_is_reproducible_with_a_generator_and_random_without(variant: str) -> None:
    head = make_head(variant)
    embedding = torch.randn(4, EMBEDDING_DIM)
    with torch.no_grad():
        first, _ = head.sample(embedding, generator=torch.Generator().manual_seed(3))
        second, _ = head.sample(embedding, generator=torch.Generator().manual_seed(3))
        other, _ = head.sample(embedding, generator=torch.Generator().manual_seed(4))
    assert torch.equal(first, second)
    assert not torch.allclose(first, other)


@pytest.mark.parametrize("variant", sorted(set(VARIANTS) - PARTIAL_GRADIENT_VARIANTS))
def test_log_prob_gives_a_gradient_to_every_parameter_and_the_embedding(variant: str) -> None:
    head = make_head(variant)
    embedding = torch.randn(8, EMBEDDING_DIM)
    with torch.no_grad():
        actions, replay = head.sample(embedding)
    embedding.requires_grad_(True)
    log_prob, _ = head.log_prob(embedding, actions, replay)
    log_prob.sum().backward()
    for name, parameter in head.named_parameters():
        assert parameter.grad is not None, f"{name} got no gradient"
        assert parameter.grad.abs().sum() > 0, f"{name} got a zero gradient"
    assert embedding.grad is not None and embedding.grad.abs().sum() > 0


def test_last_k_finetuning_leaves_early_steps_out_of_log_prob_and_gradient() -> None:
    head = make_head("diffusion-last-2")
    embedding = torch.randn(6, EMBEDDING_DIM)
    with torch.no_grad():
        actions, replay = head.sample(embedding)
    calls = []
    handle = head.denoiser.register_forward_hook(lambda module, inputs, output: calls.append(inputs[1]))
    chain = replay["chain"].clone().requires_grad_(True)
    per_step = head.step_log_probs(embedding, {"chain": chain})
    handle.remove()
    assert per_step.shape == (6, 2, CHUNK_SIZE, ACTION_DIM)
    # Only the last two grid timesteps are evaluated.
    assert [float(time.item()) for time in calls] == [float(t) for t in head.timesteps[-2:]]
    per_step.sum().backward()
    num_steps = head.num_steps
    assert chain.grad[:, : num_steps - 2].abs().max() == 0
    assert chain.grad[:, num_steps - 2 :].abs().sum() > 0
    # Sampling runs the frozen early steps without gradients, even with grad mode on.
    grad_modes = []
    handle = head.denoiser.register_forward_hook(lambda *_: grad_modes.append(torch.is_grad_enabled()))
    head.sample(embedding)
    handle.remove()
    assert grad_modes == [False] * (num_steps - 2) + [True, True]
    total, _ = head.log_prob(embedding, actions, replay)
    assert (total - per_step.detach().sum(1)).abs().max() < 1e-6


@pytest.mark.parametrize("std_mode", ["parameter", "state"])
def test_gaussian_entropy_matches_closed_form(std_mode: str) -> None:
    head = build_head(
        "gaussian", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, hidden_dim=16, std_mode=std_mode, init_std=0.3
    )
    embedding = torch.randn(5, EMBEDDING_DIM)
    actions, replay = head.sample(embedding)
    _, entropy = head.log_prob(embedding, actions, replay)
    mean, std = head.distribution_parameters(embedding)
    expected = 0.5 * torch.log(2 * math.pi * math.e * std.square())
    assert torch.allclose(entropy, expected, atol=1e-6)
    assert torch.allclose(entropy, torch.distributions.Normal(mean, std).entropy(), atol=1e-6)
    # The initial std is the configured one (both std modes start there).
    assert torch.allclose(std, torch.full_like(std, 0.3), rtol=0.05)


def test_gaussian_log_prob_matches_torch_normal() -> None:
    head = make_head("gaussian")
    embedding = torch.randn(5, EMBEDDING_DIM)
    actions = torch.randn(5, CHUNK_SIZE, ACTION_DIM)
    log_prob, _ = head.log_prob(embedding, actions, {})
    mean, std = head.distribution_parameters(embedding)
    assert torch.allclose(log_prob, torch.distributions.Normal(mean, std).log_prob(actions), atol=1e-5)


def make_bc_dataset(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(64, EMBEDDING_DIM, generator=generator)
    weights = torch.randn(EMBEDDING_DIM, CHUNK_SIZE * ACTION_DIM, generator=generator) / math.sqrt(
        EMBEDDING_DIM
    )
    actions = torch.tanh(embeddings @ weights).view(64, CHUNK_SIZE, ACTION_DIM) * 0.9
    return embeddings, actions


@pytest.fixture
def one_thread():
    """Tiny networks run faster on one thread, and the machine is shared."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# flow-noise and flow-hybrid share flow-sde's bc_loss (they differ only in RL sampling).
@pytest.mark.parametrize("variant", ["gaussian", "gaussian-tanh", "diffusion-ddpm", "flow-sde"])
def test_behaviour_cloning_lowers_the_loss_and_the_action_error(variant: str, one_thread: None) -> None:
    head = make_head(variant)
    embeddings, actions = make_bc_dataset()
    mask = torch.ones(64, CHUNK_SIZE, dtype=torch.bool)
    mask[:8, -1] = False

    def evaluate() -> tuple[float, float]:
        torch.manual_seed(123)
        with torch.no_grad():
            loss = sum(head.bc_loss(embeddings, actions, mask).item() for _ in range(8)) / 8
            predicted, _ = head.sample(
                embeddings, deterministic=True, generator=torch.Generator().manual_seed(0)
            )
        return loss, (predicted - actions).square().mean().item()

    loss_before, error_before = evaluate()
    optimizer = torch.optim.Adam(head.parameters(), lr=3e-3)
    for _ in range(200):
        optimizer.zero_grad()
        head.bc_loss(embeddings, actions, mask).backward()
        optimizer.step()
    loss_after, error_after = evaluate()
    assert loss_after < loss_before - 0.1 * abs(loss_before)
    assert error_after < 0.5 * error_before
    assert error_after < 0.1  # the targets have mean square about 0.3


def test_bc_loss_ignores_masked_steps() -> None:
    for variant in ["gaussian", "diffusion-ddpm", "flow-sde"]:
        head = make_head(variant)
        embeddings, actions = make_bc_dataset()
        mask = torch.ones(64, CHUNK_SIZE, dtype=torch.bool)
        mask[:, -1] = False
        corrupted = actions.clone()
        corrupted[:, -1] = 100.0
        torch.manual_seed(5)
        clean_loss = head.bc_loss(embeddings, actions, mask)
        torch.manual_seed(5)
        corrupted_loss = head.bc_loss(embeddings, corrupted, mask)
        # Chunks are denoised jointly, so only the per-element loss terms of masked steps are dropped:
        # for the gaussian head the loss is identical; for denoising heads the inputs differ.
        if variant == "gaussian":
            assert torch.allclose(clean_loss, corrupted_loss)
        assert torch.isfinite(corrupted_loss)
    with pytest.raises(ValueError, match="mask has shape"):
        head.bc_loss(embeddings, actions, torch.ones(64, CHUNK_SIZE + 1, dtype=torch.bool))


def test_reduce_log_prob_granularities_on_head_output() -> None:
    head = make_head("flow-sde")
    embedding = torch.randn(4, EMBEDDING_DIM)
    with torch.no_grad():
        actions, replay = head.sample(embedding)
        log_prob, _ = head.log_prob(embedding, actions, replay)
    assert torch.equal(reduce_log_prob(log_prob, "dimension"), log_prob)
    assert torch.allclose(reduce_log_prob(log_prob, "action"), log_prob.sum(-1))
    assert torch.allclose(reduce_log_prob(log_prob, "chunk"), log_prob.flatten(1).sum(-1))
    with pytest.raises(ValueError, match="unknown log-prob granularity 'step'"):
        reduce_log_prob(log_prob, "step")  # type: ignore[arg-type]


def test_build_head_rejects_unknown_names_options_and_bad_values() -> None:
    assert set(HEADS) == {"gaussian", "diffusion", "flow", "steered", "residual"}
    with pytest.raises(
        ValueError,
        match=r"unknown action head 'mlp'; valid heads: \['diffusion', 'flow', 'gaussian', 'residual', 'steered'\]",
    ):
        build_head("mlp", 8, 2, 2)
    with pytest.raises(
        ValueError,
        match=r"unknown option\(s\) \['num_steps'\] for action head 'flow'; valid options: .*num_inference_steps",
    ):
        build_head("flow", 8, 2, 2, num_steps=4)
    with pytest.raises(ValueError, match="sampler='ddpn'; use 'ddpm' or 'ddim'"):
        build_head("diffusion", 8, 2, 2, sampler="ddpn")
    with pytest.raises(
        ValueError, match="num_train_timesteps=100 must be a multiple of num_inference_steps=7"
    ):
        build_head("diffusion", 8, 2, 2, num_inference_steps=7)
    with pytest.raises(ValueError, match="hybrid=True needs rl_method='sde'"):
        build_head("flow", 8, 2, 2, rl_method="noise", hybrid=True)
    with pytest.raises(ValueError, match="chunk_size=0 must be a positive integer"):
        build_head("gaussian", 8, 0, 2)


def test_wrong_inputs_raise_errors_that_name_the_problem() -> None:
    head = make_head("flow-hybrid")
    embedding = torch.randn(3, EMBEDDING_DIM)
    with torch.no_grad():
        actions, replay = head.sample(embedding)
    with pytest.raises(ValueError, match=r"embedding of shape \(batch, 8\), got \(3, 5\)"):
        head.sample(torch.randn(3, 5))
    with pytest.raises(KeyError, match=r"replay lacks \['sde_step'\]"):
        head.log_prob(embedding, actions, {key: value for key, value in replay.items() if key != "sde_step"})
    with pytest.raises(ValueError, match="actions differ from the last state of replay"):
        head.log_prob(embedding, actions + 1.0, replay)
    with pytest.raises(ValueError, match=r"action chunks of shape \(3, 3, 2\)"):
        head.log_prob(embedding, actions[:, :2], replay)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_deterministic_action_is_the_deterministic_sample_with_gradients(variant: str) -> None:
    head = make_head(variant)
    embedding = torch.randn(4, EMBEDDING_DIM)
    with torch.no_grad():
        expected, _ = head.sample(embedding, deterministic=True, generator=torch.Generator().manual_seed(3))
    actual = head.deterministic_action(embedding, torch.Generator().manual_seed(3))
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    actual.square().sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())
