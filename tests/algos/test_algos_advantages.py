from __future__ import annotations

import statistics

import pytest
import torch
from tensordict import TensorDict

from vla_rl.algos import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
    gae_advantages,
    get_advantage_estimator,
    grpo_advantages,
    next_values_from,
    rloo_advantages,
)

GAMMA, LAM = 0.9, 0.8


@pytest.fixture
def episode_data() -> dict[str, torch.Tensor]:
    """Random (N, T) rollout with terminations and truncations in the middle of rows (auto-reset style)."""
    generator = torch.Generator().manual_seed(0)
    num_envs, num_steps = 6, 12
    ends = torch.rand(num_envs, num_steps, generator=generator)
    terminated = ends < 0.12
    truncated = (ends >= 0.12) & (ends < 0.22)
    # make sure both kinds of ends occur in the middle of some row
    terminated[0, 4] = True
    truncated[0, 4] = False
    truncated[1, 6] = True
    terminated[1, 6] = False
    return {
        "reward": torch.randn(num_envs, num_steps, generator=generator),
        "value": torch.randn(num_envs, num_steps, generator=generator),
        "final_value": torch.randn(num_envs, num_steps, generator=generator),
        "last_value": torch.randn(num_envs, generator=generator),
        "terminated": terminated,
        "truncated": truncated,
    }


def mask_after_first_end(terminated: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """No auto-reset: steps after the first episode end of a row are invalid."""
    mask = torch.ones_like(terminated)
    for row in range(terminated.shape[0]):
        for step in range(terminated.shape[1]):
            if terminated[row, step] or truncated[row, step]:
                mask[row, step + 1 :] = False
                break
    return mask


def reference_next_values(data: dict[str, torch.Tensor]) -> torch.Tensor:
    num_envs, num_steps = data["reward"].shape
    result = torch.zeros(num_envs, num_steps)
    for row in range(num_envs):
        for step in range(num_steps):
            if data["terminated"][row, step] or data["truncated"][row, step]:
                result[row, step] = data["final_value"][row, step]
            elif step + 1 < num_steps:
                result[row, step] = data["value"][row, step + 1]
            else:
                result[row, step] = data["last_value"][row]
    return result


def reference_gae(
    data: dict[str, torch.Tensor], next_value: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    num_envs, num_steps = data["reward"].shape
    advantages = torch.zeros(num_envs, num_steps)
    for row in range(num_envs):
        later = 0.0
        for step in reversed(range(num_steps)):
            if not mask[row, step]:
                later = 0.0
                continue
            reward, value = float(data["reward"][row, step]), float(data["value"][row, step])
            terminal = bool(data["terminated"][row, step])
            ended = terminal or bool(data["truncated"][row, step])
            target = reward if terminal else reward + GAMMA * float(next_value[row, step])
            advantage = target - value + (0.0 if ended else GAMMA * LAM * later)
            advantages[row, step] = advantage
            later = advantage
    return advantages


def test_next_values_use_final_observation_at_episode_ends(episode_data):
    d = episode_data
    built = next_values_from(d["value"], d["last_value"], d["final_value"], d["terminated"], d["truncated"])
    torch.testing.assert_close(built, reference_next_values(d))


@pytest.mark.parametrize("auto_reset", [True, False])
def test_gae_matches_python_loop(episode_data, auto_reset):
    d = episode_data
    mask = (
        torch.ones_like(d["terminated"])
        if auto_reset
        else mask_after_first_end(d["terminated"], d["truncated"])
    )
    next_value = reference_next_values(d)
    result = gae_advantages(
        d["reward"], d["value"], next_value, d["terminated"], d["truncated"], mask, GAMMA, LAM
    )
    expected = reference_gae(d, next_value, mask)
    torch.testing.assert_close(result.advantages, expected)
    torch.testing.assert_close(result.returns, (expected + d["value"]) * mask)


def test_gae_bootstraps_on_truncation_not_on_termination():
    one = torch.ones(1, 1)
    common = dict(rewards=one, values=0.5 * one, next_values=2.0 * one, mask=one.bool(), gamma=0.9, lam=0.95)
    truncated = gae_advantages(terminated=~one.bool(), truncated=one.bool(), **common)
    terminated = gae_advantages(terminated=one.bool(), truncated=~one.bool(), **common)
    assert truncated.advantages.item() == pytest.approx(1.0 + 0.9 * 2.0 - 0.5)
    assert terminated.advantages.item() == pytest.approx(0.5)


def test_gae_ignores_nan_after_termination_and_on_padding(episode_data):
    d = episode_data
    mask = mask_after_first_end(d["terminated"], d["truncated"])
    next_value = reference_next_values(d)
    poisoned = next_value.clone()
    poisoned[d["terminated"] | ~mask] = float("nan")
    rewards = d["reward"].masked_fill(~mask, float("nan"))
    result = gae_advantages(rewards, d["value"], poisoned, d["terminated"], d["truncated"], mask, GAMMA, LAM)
    torch.testing.assert_close(result.advantages, reference_gae(d, next_value, mask))


def test_gae_whitening_over_valid_steps(episode_data):
    d = episode_data
    mask = mask_after_first_end(d["terminated"], d["truncated"])
    batch = {**d, "mask": mask, "next_value": reference_next_values(d)}
    result = compute_advantages(batch, "gae", gamma=GAMMA, lam=LAM, whiten=True)
    valid = result.advantages[mask]
    assert valid.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert valid.std().item() == pytest.approx(1.0, abs=1e-4)
    assert (result.advantages[~mask] == 0).all()
    raw = reference_gae(d, batch["next_value"], mask)
    torch.testing.assert_close(result.returns, (raw + d["value"]) * mask)


def outcome_batch(scores: list[float], group_ids: list[int], num_steps: int = 3) -> dict[str, torch.Tensor]:
    """One episode per row; the whole score arrives at the last valid step; row i has i % 3 + 1 steps."""
    num_envs = len(scores)
    mask = torch.zeros(num_envs, num_steps, dtype=torch.bool)
    reward = torch.zeros(num_envs, num_steps)
    terminated = torch.zeros(num_envs, num_steps, dtype=torch.bool)
    for row, score in enumerate(scores):
        length = row % num_steps + 1
        mask[row, :length] = True
        reward[row, length - 1] = score
        terminated[row, length - 1] = True
    return {
        "reward": reward,
        "mask": mask,
        "terminated": terminated,
        "truncated": torch.zeros_like(terminated),
        "group_id": torch.tensor(group_ids).reshape(-1, 1).expand(num_envs, num_steps),
    }


SCORES = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 3.0, 1.0]
GROUPS = [0, 0, 0, 0, 5, 5, 5, 5, 2, 2]


def per_group(values: list[float], groups: list[int], member: int) -> list[float]:
    return [v for v, g in zip(values, groups, strict=True) if g == groups[member]]


def test_grpo_on_hand_built_groups():
    eps = 1e-6
    advantages = grpo_advantages(torch.tensor(SCORES), torch.tensor(GROUPS), eps=eps)
    for i, score in enumerate(SCORES):
        group = per_group(SCORES, GROUPS, i)
        expected = (score - statistics.mean(group)) / (statistics.stdev(group) + eps)
        assert advantages[i].item() == pytest.approx(expected, rel=1e-5)
    assert (advantages[4:8] == 0).all()  # constant group: exactly zero, no NaN
    assert torch.isfinite(advantages).all()


def test_dr_grpo_and_rloo_on_hand_built_groups():
    batch = outcome_batch(SCORES, GROUPS)
    dr = compute_advantages(batch, "dr_grpo").advantages
    rloo = compute_advantages(batch, "rloo").advantages
    for i, score in enumerate(SCORES):
        group = per_group(SCORES, GROUPS, i)
        others = list(group)
        others.remove(score)
        valid = batch["mask"][i]
        assert dr[i][valid] == pytest.approx([score - statistics.mean(group)] * int(valid.sum()))
        assert rloo[i][valid] == pytest.approx([score - statistics.mean(others)] * int(valid.sum()))
        assert (dr[i][~valid] == 0).all() and (rloo[i][~valid] == 0).all()


def test_grpo_registry_broadcasts_row_advantage_to_valid_steps():
    batch = outcome_batch(SCORES, GROUPS)
    result = compute_advantages(batch, "grpo")
    per_row = grpo_advantages(torch.tensor(SCORES), torch.tensor(GROUPS))
    torch.testing.assert_close(result.advantages, per_row.reshape(-1, 1) * batch["mask"])


def test_singleton_group_raises_naming_the_group():
    with pytest.raises(ValueError, match=r"groups \[7\] have fewer than 2 samples"):
        grpo_advantages(torch.tensor([1.0, 0.0, 1.0]), torch.tensor([3, 3, 7]))
    with pytest.raises(ValueError, match="fewer than 2 samples"):
        rloo_advantages(torch.tensor([1.0]), torch.tensor([0]))


def test_outcome_estimators_reject_several_episodes_per_row():
    batch = outcome_batch([1.0, 0.0], [0, 0])
    batch["mask"] = torch.ones_like(batch["mask"])  # auto-reset: row 0 ends at step 0, then goes on
    with pytest.raises(ValueError, match="row 0 has a valid step 1 after its episode ended"):
        compute_advantages(batch, "grpo")


def reference_reward_to_go(reward, ended, mask, gamma):
    result = torch.zeros_like(reward)
    for row in range(reward.shape[0]):
        later = 0.0
        for step in reversed(range(reward.shape[1])):
            if not mask[row, step]:
                later = 0.0
                continue
            later = float(reward[row, step]) + (0.0 if ended[row, step] else gamma * later)
            result[row, step] = later
    return result


def whiten_valid(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    valid = values[mask].tolist()
    mean, std = statistics.mean(valid), statistics.stdev(valid)
    return torch.where(mask, (values - mean) / std, torch.zeros_like(values))


@pytest.mark.parametrize("auto_reset", [True, False])
def test_reinforce_plus_plus_matches_loop(episode_data, auto_reset):
    d = episode_data
    mask = (
        torch.ones_like(d["terminated"])
        if auto_reset
        else mask_after_first_end(d["terminated"], d["truncated"])
    )
    result = compute_advantages({**d, "mask": mask}, "reinforce_plus_plus", gamma=GAMMA)
    expected_returns = reference_reward_to_go(d["reward"], d["terminated"] | d["truncated"], mask, GAMMA)
    torch.testing.assert_close(result.returns, expected_returns)
    torch.testing.assert_close(result.advantages, whiten_valid(expected_returns, mask), rtol=1e-4, atol=1e-5)


def test_reinforce_plus_plus_baseline_matches_loop():
    batch = outcome_batch(SCORES, GROUPS)
    result = compute_advantages(batch, "reinforce_plus_plus_baseline")
    centred = torch.zeros_like(batch["reward"])
    for i, score in enumerate(SCORES):
        centred[i][batch["mask"][i]] = score - statistics.mean(per_group(SCORES, GROUPS, i))
    torch.testing.assert_close(result.advantages, whiten_valid(centred, batch["mask"]), rtol=1e-4, atol=1e-5)


def test_registry_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'.*dr_grpo, gae, grpo"):
        get_advantage_estimator("ppo")
    assert {"gae", "grpo", "dr_grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline"} <= set(
        ADVANTAGE_ESTIMATORS
    )
    with pytest.raises(KeyError, match=r"needs batch keys \['next_value'\]"):
        compute_advantages({"reward": 0, "terminated": 0, "truncated": 0, "mask": 0, "value": 0}, "gae")


def test_estimators_run_on_a_rollout_tensordict(episode_data):
    d = episode_data
    num_envs, num_steps = d["reward"].shape
    mask = torch.ones(num_envs, num_steps, dtype=torch.bool)
    batch = TensorDict(
        {
            "observation": {"state": torch.zeros(num_envs, num_steps, 3)},
            "action_chunk": torch.zeros(num_envs, num_steps, 2, 4),
            "reward": d["reward"],
            "terminated": d["terminated"],
            "truncated": d["truncated"],
            "mask": mask,
            "rollout_log_prob": torch.zeros(num_envs, num_steps, 2, 4),
            "value": d["value"],
            "next_value": reference_next_values(d),
        },
        batch_size=[num_envs, num_steps],
    )
    result = compute_advantages(batch, "gae", gamma=GAMMA, lam=LAM)
    torch.testing.assert_close(result.advantages, reference_gae(d, batch["next_value"], mask))
