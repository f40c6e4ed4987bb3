"""The heads' step kernels and corrections against independent computations from the papers' formulas."""

from __future__ import annotations

import math

import pytest
import torch
from diffusers import DDIMScheduler, DDPMScheduler

from policies.heads import build_head
from policies.heads.gaussian import tanh_log_abs_det_jacobian
from policies.heads.noise_schedules import LinearSchedule

TINY = {"hidden_dim": 32, "num_blocks": 2, "time_embedding_dim": 16}


def flow_head(**options):
    torch.manual_seed(0)
    return build_head("flow", 6, 3, 2, **{**TINY, "num_inference_steps": 5, **options})


@pytest.mark.parametrize("step", [0, 1, 3, 4])
def test_flow_sde_step_mean_and_std_match_the_formulas(step: int) -> None:
    head = flow_head(noise_level=0.7)
    embedding, state = torch.randn(4, 6), torch.randn(4, 3, 2)
    noise_level = torch.tensor([0.7, 0.3, 0.5, 1.0])
    kernel = head.step_kernel(embedding, state, step, {"noise_level": noise_level})
    velocity = head.velocity(embedding, state, 1.0 - step / 5)
    # Independent computation: t = 1 - k/N, dt = 1/N, sigma_t with t clamped to the grid's second point.
    t, dt = 1.0 - step / 5, 1.0 / 5
    t_sigma = min(t, 1.0 - dt)
    a = noise_level.view(4, 1, 1)
    sigma = a * math.sqrt(t_sigma / (1.0 - t_sigma))
    expected_mean = state - dt * (velocity + sigma**2 / (2 * t) * (state + (1 - t) * velocity))
    expected_std = math.sqrt(dt) * sigma
    assert torch.allclose(kernel.mean, expected_mean, atol=1e-6)
    assert torch.allclose(kernel.std.expand(4, 3, 2), expected_std.expand(4, 3, 2), atol=1e-6)
    assert torch.allclose(kernel.deterministic_next, state - dt * velocity, atol=1e-6)


def test_flow_sde_sampler_draws_each_step_from_its_kernel() -> None:
    head = flow_head(noise_level=0.5)
    embedding = torch.randn(1, 6).expand(4000, 6)
    with torch.no_grad():
        _, replay = head.sample(embedding, generator=torch.Generator().manual_seed(0))
        chain = replay["chain"]
        for step in (0, 2, 4):
            kernel = head.step_kernel(embedding, chain[:, step], step, {"noise_level": replay["noise_level"]})
            standardised = (chain[:, step + 1] - kernel.mean) / kernel.std
            assert abs(standardised.mean().item()) < 0.03
            assert abs(standardised.std().item() - 1.0) < 0.03


def test_flow_deterministic_sampling_is_the_euler_ode() -> None:
    head = flow_head()
    embedding = torch.randn(3, 6)
    with torch.no_grad():
        actions, replay = head.sample(
            embedding, deterministic=True, generator=torch.Generator().manual_seed(2)
        )
        state = torch.randn(3, 3, 2, generator=torch.Generator().manual_seed(2))
        for step in range(5):
            state = state - 0.2 * head.velocity(embedding, state, 1.0 - 0.2 * step)
    assert torch.allclose(actions, state, atol=1e-6)
    assert torch.allclose(replay["chain"][:, -1], actions)


def test_flow_hybrid_has_one_stochastic_step_per_sample() -> None:
    head = flow_head(hybrid=True)
    embedding = torch.randn(64, 6)
    with torch.no_grad():
        _, replay = head.sample(embedding, generator=torch.Generator().manual_seed(1))
        per_step = head.step_log_probs(embedding, replay)
        chain, sde_step = replay["chain"], replay["sde_step"]
        assert sde_step.unique().numel() > 1  # drawn per sample
        for step in range(5):
            ode_next = chain[:, step] - 0.2 * head.velocity(embedding, chain[:, step], 1.0 - 0.2 * step)
            is_ode = sde_step != step
            assert torch.allclose(chain[is_ode, step + 1], ode_next[is_ode], atol=1e-6)
            assert (chain[~is_ode, step + 1] - ode_next[~is_ode]).abs().min() > 0
            assert (per_step[is_ode, step] == 0).all()
            assert (per_step[~is_ode, step] != 0).all()


def test_flow_noise_std_stays_inside_its_log_variance_range() -> None:
    head = flow_head(rl_method="noise", log_var_min=-5.0, log_var_max=-1.0)
    low, high = math.exp(-2.5), math.exp(-0.5)
    embedding, state = torch.randn(256, 6), 10 * torch.randn(256, 3, 2)
    initial = head.step_kernel(embedding, state, 1, {}).std
    assert torch.allclose(initial, torch.full_like(initial, math.exp(-1.5)), rtol=0.05)  # middle of the range
    with torch.no_grad():
        for parameter in head.noise_network.parameters():
            parameter.normal_(0.0, 3.0)
    stds = torch.cat([head.step_kernel(embedding, state, step, {}).std.flatten() for step in range(5)])
    assert stds.min() >= low * (1 - 1e-6) and stds.max() <= high * (1 + 1e-6)
    assert stds.min() < low * 1.05 and stds.max() > high * 0.95  # the bounds are reached, not just respected


def test_flow_noise_log_prob_includes_the_standard_normal_initial_noise() -> None:
    head = flow_head(rl_method="noise")
    embedding = torch.randn(5, 6)
    with torch.no_grad():
        actions, replay = head.sample(embedding)
        joint, _ = head.log_prob(embedding, actions, replay)
        steps = head.step_log_probs(embedding, replay).sum(1)
    initial = torch.distributions.Normal(0.0, 1.0).log_prob(replay["chain"][:, 0])
    assert torch.allclose(joint, steps + initial, atol=1e-6)


def test_noise_level_annealing_follows_the_schedule_and_keeps_stored_log_probs_exact() -> None:
    schedule = LinearSchedule(1.0, 0.2, 100)
    assert [schedule.value(step) for step in (-5, 0, 50, 100, 500)] == pytest.approx(
        [1.0, 1.0, 0.6, 0.2, 0.2]
    )
    head = flow_head(noise_level=1.0, noise_level_end=0.2, noise_anneal_steps=100)
    embedding = torch.randn(8, 6)
    with torch.no_grad():
        actions, replay = head.sample(embedding)
    assert torch.allclose(replay["noise_level"], torch.full((8,), 1.0))
    head.set_training_step(50)
    assert head.noise_level == pytest.approx(0.6)
    with torch.no_grad():
        log_prob, _ = head.log_prob(embedding, actions, replay)
        _, new_replay = head.sample(embedding)
        kernel = head.step_kernel(embedding, new_replay["chain"][:, 1], 1, new_replay)
    assert (log_prob - replay["log_prob"]).abs().max() < 1e-5
    assert torch.allclose(new_replay["noise_level"], torch.full((8,), 0.6))
    assert torch.allclose(
        kernel.std, torch.full_like(kernel.std, 0.6 * math.sqrt(0.2) * math.sqrt(0.8 / 0.2))
    )


def test_flow_bc_loss_uses_the_pi0_convention() -> None:
    """An oracle that knows the convention (x_t = t noise + (1 - t) a, target noise - a) has zero loss."""
    head = flow_head()
    actions = torch.full((16, 3, 2), 0.4)
    scale = head.config.time_scale

    def oracle(noisy: torch.Tensor, time: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        t = (time / scale).view(-1, 1, 1)
        noise = (noisy - (1 - t) * actions) / t
        return noise - actions

    head.denoiser.forward = oracle
    assert head.bc_loss(torch.randn(16, 6), actions).item() < 1e-8
    times = head.sample_bc_time(20000, torch.device("cpu"))
    assert times.min() >= 0.001 and times.max() <= 1.0
    assert times.mean().item() == pytest.approx(0.001 + 0.999 * 0.6, abs=0.01)  # mean of Beta(1.5, 1) is 0.6


def diffusion_head(**options):
    torch.manual_seed(0)
    return build_head(
        "diffusion", 6, 3, 2, **{**TINY, "num_inference_steps": 5, "num_train_timesteps": 50, **options}
    )


def test_diffusion_bc_loss_is_epsilon_prediction() -> None:
    head = diffusion_head()
    actions = torch.full((16, 3, 2), -0.3)
    alphas = DDPMScheduler(num_train_timesteps=50, beta_schedule="squaredcos_cap_v2").alphas_cumprod

    def oracle(noisy: torch.Tensor, time: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        alpha = alphas[time.long()].view(-1, 1, 1)
        return (noisy - alpha.sqrt() * actions) / (1 - alpha).sqrt()

    head.denoiser.forward = oracle
    assert head.bc_loss(torch.randn(16, 6), actions).item() < 1e-8


@pytest.mark.parametrize("clip", [None, 1.0])
def test_diffusion_ddpm_kernel_matches_diffusers_posterior_step(clip: float | None) -> None:
    head = diffusion_head(clip_sample=clip)
    reference = DDPMScheduler(
        num_train_timesteps=50,
        beta_schedule="squaredcos_cap_v2",
        clip_sample=clip is not None,
        timestep_spacing="trailing",
    )
    reference.set_timesteps(5)
    state, noise_prediction = 2 * torch.randn(4, 3, 2), torch.randn(4, 3, 2)
    for step, timestep in enumerate(reference.timesteps):
        mean, std = head.kernel_moments(state, noise_prediction, step)
        drawn = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(step))
        expected = reference.step(
            noise_prediction, timestep, state, generator=torch.Generator().manual_seed(step)
        ).prev_sample
        assert torch.allclose(mean + std * drawn, expected, atol=1e-5)
    assert std.item() == 0.0  # the last step's posterior variance; min_std floors it in the kernel
    kernel = head.step_kernel(torch.randn(4, 6), state, 4, {})
    assert torch.allclose(kernel.std, torch.tensor(head.config.min_std))


def test_diffusion_ddim_kernel_matches_diffusers_eta_step() -> None:
    head = diffusion_head(sampler="ddim", ddim_eta=0.6, min_std=1e-6, clip_sample=None)
    reference = DDIMScheduler(
        num_train_timesteps=50,
        beta_schedule="squaredcos_cap_v2",
        clip_sample=False,
        timestep_spacing="trailing",
    )
    reference.set_timesteps(5)
    state, noise_prediction = torch.randn(4, 3, 2), torch.randn(4, 3, 2)
    for step, timestep in enumerate(reference.timesteps):
        mean, std = head.kernel_moments(state, noise_prediction, step)
        drawn = torch.randn(4, 3, 2)
        expected = reference.step(
            noise_prediction, timestep, state, eta=0.6, variance_noise=drawn
        ).prev_sample
        assert torch.allclose(mean + std * drawn, expected, atol=1e-5)


def test_tanh_log_prob_matches_a_numerical_change_of_variables() -> None:
    torch.manual_seed(0)
    head = build_head("gaussian", 4, 2, 3, hidden_dim=16, squash=True).double()
    embedding = torch.randn(5, 4, dtype=torch.float64)
    actions = torch.rand(5, 2, 3, dtype=torch.float64) * 1.9 - 0.95
    log_prob, entropy = head.log_prob(embedding, actions, {})
    assert entropy is None
    mean, std = head.distribution_parameters(embedding)
    step = 1e-6
    # d atanh(a) / da by central differences: p_A(a) = p_U(atanh a) * |d atanh(a) / da|.
    derivative = (torch.atanh(actions + step) - torch.atanh(actions - step)) / (2 * step)
    expected = torch.distributions.Normal(mean, std).log_prob(torch.atanh(actions)) + derivative.log()
    assert torch.allclose(log_prob, expected, atol=1e-6)
    # The stable correction stays finite where the naive log(1 - tanh(u)^2) underflows to -inf.
    large = torch.tensor([20.0, -40.0, 0.3])
    assert torch.isinf(torch.log(1 - torch.tanh(large) ** 2)[:2]).all()
    assert torch.allclose(
        tanh_log_abs_det_jacobian(large), torch.log(4 / (large.exp() + (-large).exp()) ** 2)
    )


def test_tanh_head_samples_in_the_open_interval_and_replays_the_pre_tanh_value() -> None:
    torch.manual_seed(0)
    head = build_head("gaussian", 4, 2, 3, hidden_dim=16, squash=True, init_std=2.0)
    embedding = torch.randn(500, 4)
    with torch.no_grad():
        actions, replay = head.sample(embedding)
        log_prob, _ = head.log_prob(embedding, actions, replay)
    assert actions.abs().max() <= 1.0
    assert torch.allclose(torch.tanh(replay["pre_tanh_actions"]), actions)
    assert torch.isfinite(log_prob).all()
    assert (log_prob - replay["log_prob"]).abs().max() < 1e-5


@pytest.mark.parametrize("hybrid", [False, True])
def test_flow_sde_chain_log_prob_is_the_normal_density_around_the_sde_mean(hybrid: bool) -> None:
    """Each step's log-prob is ``Normal(mean, std).log_prob(x_{k+1})`` with the Flow-SDE mean and std.

    The mean and std are computed here from piRL / Flow-GRPO's formulas (not from ``step_kernel``), so a
    log-density centred anywhere else (e.g. on the ODE step ``x_t - dt v``) fails, in the sampler's
    stored ``log_prob`` and in ``step_log_probs`` / ``log_prob`` alike. Hybrid: only the SDE step counts.
    """
    head = flow_head(noise_level=0.7, hybrid=hybrid)
    embedding = torch.randn(16, 6)
    with torch.no_grad():
        actions, replay = head.sample(embedding, generator=torch.Generator().manual_seed(0))
        per_step = head.step_log_probs(embedding, replay)
        joint, _ = head.log_prob(embedding, actions, replay)
        chain, dt = replay["chain"], 1.0 / 5
        expected = []
        for step in range(5):
            t, x = 1.0 - step * dt, chain[:, step]
            velocity = head.velocity(embedding, x, t)
            t_sigma = min(t, 1.0 - dt)  # sigma_t's time clamped to the grid's second point
            sigma = 0.7 * math.sqrt(t_sigma / (1.0 - t_sigma))
            mean = x - dt * (velocity + sigma**2 / (2 * t) * (x + (1 - t) * velocity))
            log_prob = torch.distributions.Normal(mean, math.sqrt(dt) * sigma).log_prob(chain[:, step + 1])
            if hybrid:  # ODE steps are deterministic and add nothing
                log_prob = torch.where((replay["sde_step"] == step)[:, None, None], log_prob, 0.0)
            expected.append(log_prob)
    expected = torch.stack(expected, dim=1)
    assert torch.allclose(per_step, expected, atol=1e-5)
    assert torch.allclose(joint, expected.sum(1), atol=1e-5)
    assert torch.allclose(replay["log_prob"], expected.sum(1), atol=1e-5)


def test_diffusion_chain_log_prob_is_the_normal_density_around_the_ddpm_posterior_mean() -> None:
    """Each step's log-prob is ``Normal(mean, std).log_prob(x_prev)`` with the DDPM posterior (Ho et al. eq. 7).

    Independent computation: abar from diffusers' cosine schedule, the "trailing" grid 49, 39, ..., 9,
    ``x0 = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t)`` clipped to [-1, 1], posterior mean and variance
    ``(1 - abar_p) / (1 - abar_t) beta``, the std floored at ``min_std``. A log-density centred on the
    deterministic DDIM step (eta = 0) instead of the posterior mean fails.
    """
    head = diffusion_head()
    alphas = DDPMScheduler(num_train_timesteps=50, beta_schedule="squaredcos_cap_v2").alphas_cumprod
    grid = [49, 39, 29, 19, 9]
    embedding = torch.randn(16, 6)
    with torch.no_grad():
        actions, replay = head.sample(embedding, generator=torch.Generator().manual_seed(0))
        per_step = head.step_log_probs(embedding, replay)
        joint, _ = head.log_prob(embedding, actions, replay)
        chain = replay["chain"]
        expected = []
        for step, timestep in enumerate(grid):
            x = chain[:, step]
            abar_t = alphas[timestep]
            abar_p = alphas[grid[step + 1]] if step + 1 < len(grid) else torch.tensor(1.0)
            eps = head.denoiser(x, torch.full((1,), float(timestep)), embedding)
            x0 = ((x - (1 - abar_t).sqrt() * eps) / abar_t.sqrt()).clamp(-1.0, 1.0)
            beta = 1 - abar_t / abar_p
            x0_coefficient = abar_p.sqrt() * beta / (1 - abar_t)
            xt_coefficient = (1 - beta).sqrt() * (1 - abar_p) / (1 - abar_t)
            mean = x0_coefficient * x0 + xt_coefficient * x
            std = ((1 - abar_p) / (1 - abar_t) * beta).sqrt().clamp_min(head.config.min_std)
            expected.append(torch.distributions.Normal(mean, std).log_prob(chain[:, step + 1]))
    expected = torch.stack(expected, dim=1)
    assert torch.allclose(per_step, expected, atol=1e-5)
    assert torch.allclose(joint, expected.sum(1), atol=1e-5)
    assert torch.allclose(replay["log_prob"], expected.sum(1), atol=1e-5)
