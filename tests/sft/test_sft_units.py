"""The pieces of SFT on their own: schedule, step budget, batches, collate, config errors."""

from __future__ import annotations

import math

import pytest
import torch

from vla_rl.algos.lr_schedules import warmup_cosine_factor
from vla_rl.cli import main
from vla_rl.stages.sft.batches import collate_chunks, ordered_batches, shuffled_batches
from vla_rl.stages.sft.datasets import load_demonstrations
from vla_rl.stages.sft.demos import ChunkDataset
from vla_rl.stages.sft.training import SFTConfig, second_half_drop, total_training_steps
from vla_rl.workers.actor_worker import OptimConfig


def test_warmup_then_cosine_matches_the_closed_form():
    """SFT's schedule: the cosine decays over ``total - warmup - 1`` steps, so the last step is at the floor."""
    warmup, total, floor = 10, 110, 0.1
    decay = total - warmup - 1
    assert [warmup_cosine_factor(s, warmup, decay, floor) for s in range(warmup)] == pytest.approx(
        [(s + 1) / warmup for s in range(warmup)]
    )
    # After warmup, p runs from 0 (step 10) to 1 (step 109, the last step) over 99 intervals.
    for step in (10, 30, 59, 100, 109):
        p = (step - warmup) / (total - warmup - 1)
        expected = floor + (1 - floor) * (1 + math.cos(math.pi * p)) / 2
        assert warmup_cosine_factor(step, warmup, decay, floor) == pytest.approx(expected)
    assert warmup_cosine_factor(10, warmup, decay, floor) == pytest.approx(1.0)
    assert warmup_cosine_factor(109, warmup, decay, floor) == pytest.approx(floor)
    assert warmup_cosine_factor(0, 0, 1, floor) == pytest.approx(1.0)


def test_rl_optimiser_schedule_is_the_same_warmup_cosine_over_total_minus_warmup_steps():
    optim = OptimConfig(warmup_steps=2, schedule="cosine", total_steps=12, min_lr_ratio=0.1)
    assert [optim.lr_factor(s) for s in (0, 1)] == pytest.approx([0.5, 1.0])
    for step in (2, 5, 12, 20):
        p = min(1.0, (step - 2) / 10)
        assert optim.lr_factor(step) == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * p)) / 2)
    assert OptimConfig(schedule="constant", total_steps=12).lr_factor(7) == 1.0


def test_second_half_drop_compares_the_best_loss_of_each_half():
    # Shaped like the seven-task SFT at 5000 steps: its first half's best 0.0888, 0.0665 in all.
    losses = [(500, 0.18), (1000, 0.15), (2500, 0.0888), (3000, 0.0908), (4800, 0.0665), (5000, 0.0674)]
    assert second_half_drop(losses) == pytest.approx((0.0888 - 0.0665) / 0.0888)
    # A loss that stopped falling before the midpoint: no drop, however the later ones wander.
    assert second_half_drop([(100, 0.5), (200, 0.3), (300, 0.31), (400, 0.35)]) == 0.0
    # Too few validations, or none in the first half: nothing to compare.
    assert second_half_drop([(100, 0.5)]) is None
    assert second_half_drop([(300, 0.5), (400, 0.4)]) is None


def test_step_budget_is_the_smaller_of_max_steps_and_epochs():
    assert total_training_steps(SFTConfig(max_steps=500), 1000) == 500
    # 1000 samples in full batches of 64: 15 batches per epoch.
    assert total_training_steps(SFTConfig(max_steps=500, epochs=2), 1000) == 30
    assert total_training_steps(SFTConfig(max_steps=20, epochs=2), 1000) == 20
    assert total_training_steps(SFTConfig(max_steps=500, epochs=3, batch_size=64), 10) == 3


def test_batches_are_seeded_full_and_cover_each_epoch(tiny_dataset):
    episodes, _ = load_demonstrations(tiny_dataset, split="train")
    dataset = ChunkDataset(episodes, chunk_size=4)
    cameras = ["front", "wrist"]
    batch_size = 8
    per_epoch = len(dataset) // batch_size

    def epoch_of_states(seed: int) -> list[torch.Tensor]:
        batches = shuffled_batches(dataset, batch_size, cameras, torch.Generator().manual_seed(seed))
        return [next(batches)["state"] for _ in range(per_epoch)]

    first, again, other = epoch_of_states(3), epoch_of_states(3), epoch_of_states(4)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))
    assert all(states.shape == (batch_size, 9) for states in first)
    # No sample twice within an epoch: the rows are distinct states of the dataset.
    rows = {tuple(row.tolist()) for states in first for row in states}
    all_rows = {tuple(dataset[i]["state"].tolist()) for i in range(len(dataset))}
    assert len(rows) == per_epoch * batch_size and rows <= all_rows
    # A dataset smaller than a batch: one batch of everything.
    whole = next(shuffled_batches(dataset, 10 * len(dataset), cameras, torch.Generator().manual_seed(0)))
    assert whole["action"].shape == (len(dataset), 4, 4)


def test_collate_builds_the_policy_batch(tiny_dataset):
    episodes, _ = load_demonstrations(tiny_dataset, split="train")
    dataset = ChunkDataset(episodes, chunk_size=4)
    items = [dataset[i] for i in (0, 5, len(dataset) - 1)]
    batch = collate_chunks(items, ["front", "wrist"])
    assert set(batch) == {"images", "state", "instruction", "action", "action_mask"}
    assert batch["images"]["wrist"].dtype == torch.uint8 and batch["images"]["wrist"].shape == (3, 32, 32, 3)
    for row, item in enumerate(items):
        assert torch.equal(batch["images"]["front"][row], item["images"]["front"])
        assert torch.equal(batch["action"][row], item["action"])
        assert batch["instruction"][row] == item["instruction"]
    # The last sample of an episode has one real action and three masked repeats.
    assert batch["action_mask"][2].tolist() == [True, False, False, False]
    sizes = [len(b["instruction"]) for b in ordered_batches(dataset, 16, ["front"])]
    assert sum(sizes) == len(dataset) and max(sizes) == 16


def test_config_errors_name_the_key(capsys):
    with pytest.raises(ValueError, match=r"sft\.batchsize=3: unknown key; allowed: batch_size, max_steps"):
        SFTConfig.from_dict({"batchsize": 3})
    with pytest.raises(ValueError, match=r"min_learning_rate_ratio=1\.5: must be >= 0 and <= 1"):
        SFTConfig(min_learning_rate_ratio=1.5)
    with pytest.raises(ValueError, match=r"sft\.epochs=0: must be > 0"):
        SFTConfig.from_dict({"epochs": 0})
    assert main(["sft", "sft.batch_size=0"]) == 2
    assert "config error: 'sft.batch_size'=0: must be >= 1" in capsys.readouterr().err
    assert main(["sft", "sft.learnin_rate=0.1"]) == 2
    assert "sft.learnin_rate" in capsys.readouterr().err
