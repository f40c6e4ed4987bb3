from __future__ import annotations

import math

import pytest
import torch

from vla_rl.algos import kl_estimate, kl_loss, kl_penalized_rewards

MEAN_P, STD_P, MEAN_Q, STD_Q = 0.3, 1.0, 0.0, 1.2
NUM_SAMPLES = 400_000


def gaussian_log_prob(x: torch.Tensor, mean: float, std: float) -> torch.Tensor:
    return -0.5 * ((x - mean) / std) ** 2 - math.log(std) - 0.5 * math.log(2 * math.pi)


@pytest.fixture(scope="module")
def samples():
    generator = torch.Generator().manual_seed(0)
    x = MEAN_P + STD_P * torch.randn(NUM_SAMPLES, generator=generator, dtype=torch.float64)
    return gaussian_log_prob(x, MEAN_P, STD_P), gaussian_log_prob(x, MEAN_Q, STD_Q)


def closed_form_kl() -> float:
    return math.log(STD_Q / STD_P) + (STD_P**2 + (MEAN_P - MEAN_Q) ** 2) / (2 * STD_Q**2) - 0.5


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_unbiased_estimators_match_closed_form_gaussian_kl(samples, estimator):
    estimates = kl_estimate(*samples, estimator=estimator)
    standard_error = estimates.std().item() / math.sqrt(NUM_SAMPLES)
    assert abs(estimates.mean().item() - closed_form_kl()) < 4 * standard_error


def closed_form_k2_mean() -> float:
    """E_p[0.5 * log_ratio^2]: with x = m_p + s_p z, log_ratio = a + b z + c z^2 (z standard normal)."""
    ratio = STD_P / STD_Q
    a = math.log(STD_Q / STD_P) + 0.5 * (MEAN_P - MEAN_Q) ** 2 / STD_Q**2
    b = (MEAN_P - MEAN_Q) * ratio / STD_Q
    c = 0.5 * (ratio**2 - 1.0)
    return 0.5 * (a**2 + b**2 + 3 * c**2 + 2 * a * c)


def test_k2_is_biased_but_close(samples):
    k2, k3 = (kl_estimate(*samples, estimator=name) for name in ("k2", "k3"))
    truth = closed_form_kl()
    standard_error = k2.std().item() / math.sqrt(NUM_SAMPLES)
    assert abs(k2.mean().item() - closed_form_k2_mean()) < 4 * standard_error
    assert abs(closed_form_k2_mean() - truth) > 20 * standard_error  # measurably biased ...
    assert abs(closed_form_k2_mean() - truth) < 0.3 * truth  # ... but close
    assert (k3 >= 0).all()


def test_k3_has_lower_variance_than_k1_when_policies_are_close():
    # p = N(0, 1), q = N(0.1, 1): the regime of a policy near its reference (Schulman's example)
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    log_p, log_q = gaussian_log_prob(x, 0.0, 1.0), gaussian_log_prob(x, 0.1, 1.0)
    k1, k3 = kl_estimate(log_p, log_q, estimator="k1"), kl_estimate(log_p, log_q, estimator="k3")
    assert k3.std() < 0.2 * k1.std()


def test_kl_loss_gradient_of_k3():
    log_prob = torch.tensor([0.0, -1.0, -2.0], requires_grad=True)
    ref = torch.tensor([-0.5, -1.0, -1.0])
    loss = kl_loss(log_prob, ref, torch.ones(3), estimator="k3")
    log_ratio = log_prob.detach() - ref
    assert loss.item() == pytest.approx(((torch.exp(-log_ratio) - 1 + log_ratio).mean()).item())
    loss.backward()
    torch.testing.assert_close(log_prob.grad, (1 - torch.exp(-log_ratio)) / 3)


def test_kl_reward_penalty_sums_the_chunk_and_skips_invalid_steps():
    rewards = torch.tensor([[1.0, 2.0], [0.0, 5.0]])
    log_prob = torch.tensor([[[-1.0, -1.0], [-2.0, 0.0]], [[0.0, 0.0], [-3.0, -3.0]]])
    ref = torch.tensor([[[-1.5, -1.0], [-1.0, -1.0]], [[0.0, -1.0], [0.0, 0.0]]])
    mask = torch.tensor([[True, True], [True, False]])
    penalized, kl = kl_penalized_rewards(rewards, log_prob, ref, mask, coef=0.5, estimator="k1")
    expected_kl = torch.tensor([[0.5, 0.0], [1.0, 0.0]])
    torch.testing.assert_close(kl, expected_kl)
    torch.testing.assert_close(penalized, rewards - 0.5 * expected_kl)


def test_unknown_kl_estimator_lists_names():
    with pytest.raises(ValueError, match="unknown KL estimator 'k4'; valid names: k1, k2, k3"):
        kl_estimate(torch.zeros(1), torch.zeros(1), estimator="k4")
