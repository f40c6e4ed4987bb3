"""The cuts of the update's batch (``vla_rl.algos.batch``), checked against hand-written expectations."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from vla_rl.algos import minibatch_indices, pad_to_multiple, shard_for_rank, split_microbatches, valid_steps

NUM_ENVS, NUM_STEPS, HORIZON, ACTION_DIM = 3, 4, 2, 2


def rollout_batch() -> TensorDict:
    """``[N, T]`` with a ``step_id`` (n * T + t) to follow every step, and nested entries as in a rollout."""
    generator = torch.Generator().manual_seed(0)
    mask = torch.ones(NUM_ENVS, NUM_STEPS, dtype=torch.bool)
    mask[0, 3] = mask[2, 1:] = False
    return TensorDict(
        {
            "step_id": torch.arange(NUM_ENVS * NUM_STEPS).reshape(NUM_ENVS, NUM_STEPS),
            "observation": {"state": torch.randn(NUM_ENVS, NUM_STEPS, 5, generator=generator)},
            "extras": {
                "replay.chain": torch.randn(NUM_ENVS, NUM_STEPS, 3, HORIZON, ACTION_DIM, generator=generator)
            },
            "old_log_prob": torch.randn(NUM_ENVS, NUM_STEPS, HORIZON, ACTION_DIM, generator=generator),
            "mask": mask,
        },
        batch_size=[NUM_ENVS, NUM_STEPS],
    )


def flat_batch(size: int) -> TensorDict:
    """``[size]`` valid steps; ``step_id`` is the position and every other entry a function of it."""
    step_id = torch.arange(size)
    return TensorDict(
        {
            "step_id": step_id,
            "extras": {
                "replay.chain": step_id.float().reshape(-1, 1, 1).expand(size, HORIZON, ACTION_DIM) + 0.5
            },
            "mask": torch.ones(size, dtype=torch.bool),
        },
        batch_size=[size],
    )


def test_valid_steps_keeps_the_masked_in_steps_row_by_row_with_all_their_entries():
    batch = rollout_batch()
    flat = valid_steps(batch)
    # (env, step) pairs written out: row 0 loses step 3, row 2 keeps only step 0
    kept = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0)]
    assert flat.batch_size == torch.Size([len(kept)])
    assert flat["step_id"].tolist() == [n * NUM_STEPS + t for n, t in kept]
    assert flat["mask"].all()
    for index, (n, t) in enumerate(kept):
        assert torch.equal(flat["observation", "state"][index], batch["observation", "state"][n, t])
        assert torch.equal(flat["extras", "replay.chain"][index], batch["extras", "replay.chain"][n, t])
        assert torch.equal(flat["old_log_prob"][index], batch["old_log_prob"][n, t])


@pytest.mark.parametrize(
    ("count", "num_minibatches", "sizes"),
    [(11, 2, [6, 5]), (11, 3, [4, 4, 3]), (8, 4, [2] * 4), (3, 5, [1, 1, 1, 0, 0])],
)
def test_minibatch_indices_cover_every_step_once_in_near_equal_sizes(count, num_minibatches, sizes):
    indices = minibatch_indices(count, num_minibatches, torch.Generator().manual_seed(4))
    assert [len(i) for i in indices] == sizes
    assert sorted(torch.cat(indices).tolist()) == list(range(count))


def test_minibatch_indices_follow_the_generator():
    def draw(seed: int) -> list[list[int]]:
        return [i.tolist() for i in minibatch_indices(20, 3, torch.Generator().manual_seed(seed))]

    assert draw(1) == draw(1) and draw(1) != draw(2)
    # the order is torch's seeded permutation, cut in order: resumed runs and all ranks depend on it
    expected = torch.randperm(20, generator=torch.Generator().manual_seed(1)).tolist()
    assert sum(draw(1), []) == expected
    assert sum(draw(1), []) != list(range(20))  # a permutation, not the identity


@pytest.mark.parametrize(
    ("size", "multiple", "copied"),
    [(7, 2, [0]), (7, 4, [0]), (5, 3, [0]), (6, 4, [0, 1]), (1, 3, [0, 0]), (2, 5, [0, 1, 0])],
)
def test_padding_appends_masked_copies_of_the_first_steps(size, multiple, copied):
    minibatch = flat_batch(size)
    padded = pad_to_multiple(minibatch, multiple)
    assert padded.shape[0] == size + len(copied) and padded.shape[0] % multiple == 0
    assert padded["step_id"].tolist() == list(range(size)) + copied
    assert padded["mask"].tolist() == [True] * size + [False] * len(copied)
    # a copy carries its step's entries (a finite denoising chain, unlike zeros); the input is left unmasked
    assert torch.equal(padded["extras", "replay.chain"][size:], minibatch["extras", "replay.chain"][copied])
    assert minibatch["mask"].all()


def test_no_padding_when_the_size_is_already_a_multiple():
    minibatch = flat_batch(6)
    for multiple in (1, 2, 3, 6):
        assert pad_to_multiple(minibatch, multiple) is minibatch


@pytest.mark.parametrize(
    ("size", "world_size", "expected"),
    [
        (6, 2, [[0, 1, 2], [3, 4, 5]]),
        (5, 2, [[0, 1, 2], [3, 4, 0]]),
        (7, 3, [[0, 1, 2], [3, 4, 5], [6, 0, 1]]),
        (1, 2, [[0], [0]]),
    ],
)
def test_rank_shards_are_contiguous_slices_of_the_padded_minibatch(size, world_size, expected):
    padded = pad_to_multiple(flat_batch(size), world_size)
    shards = [shard_for_rank(padded, rank, world_size) for rank in range(world_size)]
    assert [s["step_id"].tolist() for s in shards] == expected
    # every real step is trained on exactly once over all ranks; the copies are masked out
    real = torch.cat([s["step_id"][s["mask"]] for s in shards])
    assert sorted(real.tolist()) == list(range(size))


def test_sharding_an_unpadded_batch_says_to_pad_first():
    with pytest.raises(ValueError, match="a batch of 5 steps does not split into 2 equal shards; pad it"):
        shard_for_rank(flat_batch(5), 0, 2)


@pytest.mark.parametrize(
    ("size", "micro_batch_size", "sizes"), [(11, 4, [4, 4, 3]), (8, 4, [4, 4]), (3, 8, [3])]
)
def test_microbatches_are_consecutive_slices(size, micro_batch_size, sizes):
    shard = flat_batch(size)
    micro = split_microbatches(shard, micro_batch_size)
    assert [m.shape[0] for m in micro] == sizes
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    assert [m["step_id"].tolist() for m in micro] == [
        list(range(s, s + n)) for s, n in zip(starts, sizes, strict=True)
    ]
