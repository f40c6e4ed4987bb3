from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from vla_rl.algos import (
    attach_old_log_probs,
    build_rollout_batch,
    pad_to_multiple,
    shard_for_rank,
    split_microbatches,
    split_minibatches,
    unpad,
    validate_rollout_batch,
)

NUM_ENVS, NUM_STEPS, HORIZON, ACTION_DIM = 5, 4, 3, 2


def make_batch(seed: int = 0) -> TensorDict:
    generator = torch.Generator().manual_seed(seed)
    mask = torch.ones(NUM_ENVS, NUM_STEPS, dtype=torch.bool)
    mask[1, 2:] = False
    mask[3, 1:] = False
    terminated = torch.zeros(NUM_ENVS, NUM_STEPS, dtype=torch.bool)
    terminated[1, 1] = terminated[3, 0] = True
    return build_rollout_batch(
        observation={
            "state": torch.randn(NUM_ENVS, NUM_STEPS, 7, generator=generator),
            "images": TensorDict(
                {"wrist": torch.zeros(NUM_ENVS, NUM_STEPS, 8, 8, 3, dtype=torch.uint8)},
                batch_size=[NUM_ENVS, NUM_STEPS],
            ),
        },
        action_chunk=torch.randn(NUM_ENVS, NUM_STEPS, HORIZON, ACTION_DIM, generator=generator),
        reward=torch.randn(NUM_ENVS, NUM_STEPS, generator=generator),
        terminated=terminated,
        truncated=torch.zeros(NUM_ENVS, NUM_STEPS, dtype=torch.bool),
        mask=mask,
        rollout_log_prob=torch.randn(NUM_ENVS, NUM_STEPS, HORIZON, ACTION_DIM, generator=generator),
        replay={"noise": torch.randn(NUM_ENVS, NUM_STEPS, HORIZON, ACTION_DIM, generator=generator)},
        group_id=torch.tensor([0, 0, 1, 1, 1]),
        step_id=torch.arange(NUM_ENVS * NUM_STEPS).reshape(NUM_ENVS, NUM_STEPS),
    )


def test_build_fills_group_ids_over_steps_and_validates():
    batch = make_batch()
    assert batch.batch_size == torch.Size([NUM_ENVS, NUM_STEPS])
    assert (batch["group_id"][:, 0] == torch.tensor([0, 0, 1, 1, 1])).all()
    assert (batch["group_id"] == batch["group_id"][:, :1]).all()
    assert batch["observation", "images", "wrist"].shape == (NUM_ENVS, NUM_STEPS, 8, 8, 3)


def test_validation_errors_name_the_key():
    batch = make_batch()
    with pytest.raises(KeyError, match="the rollout batch has no key 'reward'"):
        validate_rollout_batch(batch.exclude("reward"))
    with pytest.raises(KeyError, match="no key 'value'"):
        validate_rollout_batch(batch, required=("value",))
    broken = batch.clone()
    broken["mask"] = broken["mask"].float()
    with pytest.raises(TypeError, match="'mask' must be bool"):
        validate_rollout_batch(broken)
    broken = batch.clone()
    broken["group_id"][0, 1] = 9
    with pytest.raises(ValueError, match="'group_id' must be constant along the steps"):
        validate_rollout_batch(broken)
    with pytest.raises(ValueError, match=r"must all start with \(num_envs, num_steps\) = \(5, 4\)"):
        build_rollout_batch(
            {},
            torch.zeros(5, 3, 1, 1),
            torch.zeros(5, 4),
            *[torch.zeros(5, 4, dtype=torch.bool)] * 3,
            rollout_log_prob=torch.zeros(5, 4, 1, 1),
        )


@pytest.mark.parametrize("num_minibatches", [1, 3, 4])
def test_step_minibatches_cover_every_valid_step_exactly_once(num_minibatches):
    batch = make_batch()
    minibatches = split_minibatches(batch, num_minibatches, seed=7)
    seen = torch.cat([mb["step_id"] for mb in minibatches]).tolist()
    assert sorted(seen) == sorted(batch["step_id"][batch["mask"]].tolist())
    sizes = [mb.shape[0] for mb in minibatches]
    assert max(sizes) - min(sizes) <= 1 and len(sizes) == num_minibatches
    for mb in minibatches:  # every entry travels with its step
        rows, cols = mb["step_id"] // NUM_STEPS, mb["step_id"] % NUM_STEPS
        torch.testing.assert_close(mb["action_chunk"], batch["action_chunk"][rows, cols])
        torch.testing.assert_close(mb["replay", "noise"], batch["replay", "noise"][rows, cols])


def test_minibatch_permutation_is_seeded():
    batch = make_batch()
    first = [mb["step_id"].tolist() for mb in split_minibatches(batch, 2, seed=1)]
    again = [mb["step_id"].tolist() for mb in split_minibatches(batch, 2, seed=1)]
    other = [mb["step_id"].tolist() for mb in split_minibatches(batch, 2, seed=2)]
    assert first == again and first != other


def test_row_minibatches_and_microbatches():
    batch = make_batch()
    minibatches = split_minibatches(batch, 2, seed=0, unit="row")
    assert all(mb.batch_size[1] == NUM_STEPS for mb in minibatches)
    rows = sorted(int(r) for mb in minibatches for r in mb["step_id"][:, 0] // NUM_STEPS)
    assert rows == list(range(NUM_ENVS))
    flat = split_minibatches(batch, 1, seed=0)[0]
    micro = split_microbatches(flat, 4)
    assert [m.shape[0] for m in micro] == [4, 4, 4, 3]  # 15 valid steps
    assert torch.cat([m["step_id"] for m in micro]).tolist() == flat["step_id"].tolist()
    with pytest.raises(ValueError, match="num_minibatches=99 must be between 1 and the number of steps"):
        split_minibatches(batch, 99, seed=0)


@pytest.mark.parametrize("world_size", [1, 2, 3, 8])
def test_pad_unpad_round_trip(world_size):
    batch = make_batch()
    num_valid = int(batch["mask"].sum())
    flat = split_minibatches(batch, 1, seed=0)[0]
    padded, num_padding = pad_to_multiple(flat, world_size)
    assert padded.shape[0] % world_size == 0 and num_padding == (-num_valid) % world_size
    assert padded["mask"][:num_valid].all() and not padded["mask"][num_valid:].any()
    assert (padded["group_id"][num_valid:] == -1).all()
    assert (padded["action_chunk"][num_valid:] == 0).all()
    restored = unpad(padded, num_padding)
    assert restored.shape == flat.shape
    assert (restored == flat).all()
    shards = [shard_for_rank(padded, rank, world_size) for rank in range(world_size)]
    assert torch.cat([s["step_id"] for s in shards]).tolist() == padded["step_id"].tolist()


def test_padding_errors():
    batch = make_batch()
    with pytest.raises(ValueError, match="call pad_to_multiple"):
        shard_for_rank(batch, 0, 2)
    with pytest.raises(ValueError, match="num_padding=9 is outside"):
        unpad(batch, 9)


def test_bypass_uses_rollout_log_probs_and_recompute_replaces_them():
    batch = make_batch()
    calls = []

    def recompute(b: TensorDict) -> torch.Tensor:
        calls.append(1)
        return b["rollout_log_prob"] + 1.0

    bypassed = attach_old_log_probs(batch, bypass=True, recompute=recompute)
    assert calls == [] and torch.equal(bypassed["old_log_prob"], batch["rollout_log_prob"])
    assert "old_log_prob" not in batch.keys()
    recomputed = attach_old_log_probs(batch, bypass=False, recompute=recompute)
    assert calls == [1] and torch.equal(recomputed["old_log_prob"], batch["rollout_log_prob"] + 1.0)
    with pytest.raises(ValueError, match="bypass=False needs a recompute function"):
        attach_old_log_probs(batch, bypass=False)
    with pytest.raises(ValueError, match=r"recompute must return per-dimension log-probs \(N, T, H, A\)"):
        attach_old_log_probs(batch, bypass=False, recompute=lambda b: b["reward"])
