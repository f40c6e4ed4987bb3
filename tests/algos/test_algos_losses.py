from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from policies.heads.base import reduce_log_prob
from vla_rl.algos import (
    PolicyLossConfig,
    compute_advantages,
    entropy_bonus_loss,
    get_policy_loss,
    minibatch_indices,
    ppo_clip_loss,
    valid_steps,
    value_loss,
)

# Hand-derived cases, clip range [1 - 0.2, 1 + 0.3], dual clip c = 3, one chunk-level token each.
# columns: advantage, ratio, expected per-token loss, expected d(loss_token)/d(log_prob)
CASES = [
    (1.0, 1.5, -1.3, 0.0),  # positive advantage above 1 + clip_high: clipped, no gradient
    (-1.0, 0.5, 0.8, 0.0),  # negative advantage below 1 - clip_low: clipped, no gradient
    (-1.0, 5.0, 3.0, 0.0),  # negative advantage, huge ratio: dual clip caps the loss at -c * A = 3
    (2.0, 1.1, -2.2, -2.2),  # inside the trust region: -A r, gradient -A r
    (-1.0, 2.0, 2.0, 2.0),  # negative advantage above 1 + clip_high but below c: unclipped term wins
    (1.0, 0.5, -0.5, -0.5),  # positive advantage below 1 - clip_low: unclipped (pessimistic) term wins
]
CONFIG = PolicyLossConfig(clip_low=0.2, clip_high=0.3, dual_clip_c=3.0)


def case_tensors():
    advantages = torch.tensor([case[0] for case in CASES])
    ratios = torch.tensor([case[1] for case in CASES])
    old_log_prob = torch.linspace(-3.0, -1.0, len(CASES))
    log_prob = (old_log_prob + ratios.log()).requires_grad_(True)
    return log_prob, old_log_prob, advantages, torch.ones(len(CASES), dtype=torch.bool)


def test_ppo_loss_values_and_gradients_on_hand_derived_cases():
    log_prob, old_log_prob, advantages, mask = case_tensors()
    output = ppo_clip_loss(log_prob, old_log_prob, advantages, mask, CONFIG)
    expected_loss = sum(case[2] for case in CASES) / len(CASES)
    assert output.loss.item() == pytest.approx(expected_loss, rel=1e-5)
    output.loss.backward()
    expected_grad = torch.tensor([case[3] for case in CASES]) / len(CASES)
    torch.testing.assert_close(log_prob.grad, expected_grad)
    assert output.metrics["clip_fraction"].item() == pytest.approx(2 / 6)
    assert output.metrics["dual_clip_fraction"].item() == pytest.approx(1 / 6)
    ratios = [case[1] for case in CASES]
    approx_kl = sum(r - 1 - math.log(r) for r in ratios) / len(ratios)
    assert output.metrics["approx_kl"].item() == pytest.approx(approx_kl, rel=1e-5)


def test_without_dual_clip_the_huge_ratio_is_not_capped():
    log_prob, old_log_prob, advantages, mask = case_tensors()
    config = PolicyLossConfig(clip_low=0.2, clip_high=0.3, dual_clip_c=None)
    output = ppo_clip_loss(log_prob, old_log_prob, advantages, mask, config)
    per_token = [case[2] for case in CASES]
    per_token[2] = 5.0
    assert output.loss.item() == pytest.approx(sum(per_token) / len(CASES), rel=1e-5)


def test_symmetric_clip_when_clip_high_is_none():
    advantage, ratio = torch.tensor([1.0]), torch.tensor([1.25])
    log_prob = ratio.log()
    loss = ppo_clip_loss(
        log_prob, torch.zeros(1), advantage, torch.ones(1), PolicyLossConfig(clip_low=0.2, clip_high=None)
    ).loss
    assert loss.item() == pytest.approx(-1.2)


def test_per_dimension_log_probs_with_per_sample_advantages_and_mask():
    generator = torch.Generator().manual_seed(1)
    samples, horizon, dims = 5, 3, 2
    old = torch.randn(samples, horizon, dims, generator=generator)
    log_prob = (old + 0.3 * torch.randn(samples, horizon, dims, generator=generator)).requires_grad_(True)
    advantages = torch.randn(samples, generator=generator)
    mask = torch.tensor([True, True, False, True, True])
    output = ppo_clip_loss(log_prob, old, advantages, mask, CONFIG)
    total, count = 0.0, 0
    for s in range(samples):
        if not mask[s]:
            continue
        for h in range(horizon):
            for a in range(dims):
                ratio = math.exp(float(log_prob[s, h, a].detach() - old[s, h, a]))
                adv = float(advantages[s])
                token = max(-adv * ratio, -adv * min(max(ratio, 0.8), 1.3))
                if adv < 0:
                    token = min(token, -3.0 * adv)
                total += token
                count += 1
    assert output.loss.item() == pytest.approx(total / count, rel=1e-5)
    output.loss.backward()
    assert (log_prob.grad[2] == 0).all()


def test_log_ratio_clamp_keeps_the_loss_finite():
    log_prob = torch.tensor([500.0], requires_grad=True)
    output = ppo_clip_loss(
        log_prob,
        torch.tensor([0.0]),
        torch.tensor([-1.0]),
        torch.ones(1),
        PolicyLossConfig(dual_clip_c=None, log_ratio_clamp=20.0),
    )
    assert output.loss.item() == pytest.approx(math.exp(20.0), rel=1e-5)
    output.loss.backward()
    assert log_prob.grad.item() == 0.0


@pytest.mark.parametrize("field", ["clip_low", "clip_high", "log_ratio_clamp"])
def test_the_loss_and_the_update_refuse_the_same_clip_values(field):
    """One range per knob: a zero clip (no ratio may move) is refused by the loss's config and by the update's
    config that extends it (``algo.update``), with the same message."""
    from vla_rl.workers.ppo_update import UpdateConfig

    for cls in (PolicyLossConfig, UpdateConfig):
        with pytest.raises(ValueError, match=f"^{field}=0.0: must be > 0$"):
            cls(**{field: 0.0})
    assert UpdateConfig(clip_low=0.1).clip_low == PolicyLossConfig(clip_low=0.1).clip_low == 0.1


def test_vanilla_loss_gradient_is_minus_advantage_at_ratio_one():
    log_prob = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    advantages = torch.tensor([1.0, -2.0, 0.5])
    get_policy_loss("vanilla")(log_prob, log_prob.detach(), advantages, torch.ones(3)).loss.backward()
    torch.testing.assert_close(log_prob.grad, -advantages / 3)


def test_policy_loss_config_and_registry_errors():
    with pytest.raises(ValueError, match="dual_clip_c=1.0: must be > 1"):
        PolicyLossConfig(dual_clip_c=1.0)
    with pytest.raises(ValueError, match="unknown policy loss 'ppo'; valid names: ppo_clip, vanilla"):
        get_policy_loss("ppo")
    assert get_policy_loss("ppo_clip") is ppo_clip_loss
    with pytest.raises(ValueError, match="differ in shape"):
        ppo_clip_loss(torch.zeros(2, 3), torch.zeros(2), torch.zeros(2), torch.ones(2))


def test_value_loss_clipping_and_gradients():
    values = torch.tensor([2.4, 1.0], requires_grad=True)
    old_values, returns = torch.tensor([2.0, 1.1]), torch.tensor([3.0, 2.0])
    output = value_loss(values, old_values, returns, torch.ones(2), clip_range=0.2)
    # sample 0: unclipped 0.5 * 0.6^2 = 0.18, clipped (V -> 2.2) 0.5 * 0.8^2 = 0.32: clipped wins, no gradient
    # sample 1: unclipped 0.5 * 1.0^2 = 0.5, clipped (V -> 1.0 within range) the same: gradient V - R = -1
    assert output.loss.item() == pytest.approx((0.32 + 0.5) / 2)
    output.loss.backward()
    torch.testing.assert_close(values.grad, torch.tensor([0.0, -0.5]))
    assert output.metrics["value_clip_fraction"].item() == pytest.approx(0.5)


def test_value_loss_huber_and_mask():
    values = torch.tensor([0.0, 0.0, 9.0], requires_grad=True)
    returns = torch.tensor([3.0, 0.5, 0.0])
    output = value_loss(values, values.detach(), returns, torch.tensor([True, True, False]), huber_delta=1.0)
    assert output.loss.item() == pytest.approx((1.0 * (3.0 - 0.5) + 0.5 * 0.25) / 2)
    output.loss.backward()
    torch.testing.assert_close(values.grad, torch.tensor([-0.5, -0.25, 0.0]))


def test_entropy_bonus():
    entropy = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    output = entropy_bonus_loss(entropy, torch.tensor([True, False]), coef=0.1)
    assert output.loss.item() == pytest.approx(-0.1 * 1.5)
    assert entropy_bonus_loss(None, torch.ones(2), coef=0.0).loss.item() == 0.0
    with pytest.raises(
        ValueError, match="entropy_coef=0.01, but this action head defines no closed-form entropy"
    ):
        entropy_bonus_loss(None, torch.ones(2), coef=0.01)


@pytest.mark.parametrize("granularity", ["dimension", "action", "chunk"])
def test_ppo_loss_at_each_head_granularity(granularity):
    generator = torch.Generator().manual_seed(4)
    old = torch.randn(4, 3, 2, generator=generator)
    new = old + 0.05 * torch.randn(4, 3, 2, generator=generator)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    log_prob, old_log_prob = reduce_log_prob(new, granularity), reduce_log_prob(old, granularity)
    output = ppo_clip_loss(log_prob, old_log_prob, advantages, torch.ones(4, dtype=torch.bool), CONFIG)
    ratio = torch.exp(log_prob - old_log_prob)
    adv = advantages.reshape((4,) + (1,) * (ratio.dim() - 1))
    expected = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.3)).mean()
    assert output.loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_bypass_pipeline_first_ratio_is_one():
    """The trainer's path: advantages on ``[N, T]``, old log-probs = the rollout's, valid steps, mini-batches."""
    generator = torch.Generator().manual_seed(5)
    num_envs, num_steps = 4, 6
    mask = torch.ones(num_envs, num_steps, dtype=torch.bool)
    mask[2, 3:] = False
    terminated = torch.zeros_like(mask)
    terminated[2, 2] = True
    batch = TensorDict(
        {
            "reward": torch.randn(num_envs, num_steps, generator=generator),
            "terminated": terminated,
            "truncated": torch.zeros_like(mask),
            "mask": mask,
            "rollout_log_prob": torch.randn(num_envs, num_steps, 2, 2, generator=generator),
            "value": torch.randn(num_envs, num_steps, generator=generator),
            "next_value": torch.randn(num_envs, num_steps, generator=generator),
        },
        batch_size=[num_envs, num_steps],
    )
    batch["advantage"] = compute_advantages(batch, "gae").advantages
    batch["old_log_prob"] = batch["rollout_log_prob"]
    flat = valid_steps(batch)
    assert flat.shape[0] == 21
    for indices in minibatch_indices(flat.shape[0], 2, torch.Generator().manual_seed(0)):
        minibatch = flat[indices]
        output = ppo_clip_loss(
            minibatch["rollout_log_prob"],
            minibatch["old_log_prob"],
            minibatch["advantage"],
            minibatch["mask"],
        )
        assert output.metrics["clip_fraction"].item() == 0.0
        assert output.metrics["ratio_mean"].item() == pytest.approx(1.0)
        assert output.loss.item() == pytest.approx(-minibatch["advantage"].mean().item(), rel=1e-5)
