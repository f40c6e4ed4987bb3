"""An SFT run stopped by a crash and resumed from its checkpoint ends as the uninterrupted run does: the same losses,
validations, metrics lines and weights, bit for bit."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import ENV_KWARGS, TASKS
from safetensors.torch import load_file
from test_sft_training import SEED, policy_config
from test_target_frames import block_position

from vla_rl.config import ConfigError
from vla_rl.stages.sft import training
from vla_rl.stages.sft.batches import ShuffledIndices
from vla_rl.stages.sft.checkpoint import checkpoint_path
from vla_rl.stages.sft.target_frames import collect_target_frames
from vla_rl.stages.sft.training import SFTConfig, run_sft

# Validations at 4, 8, 12 and 14; checkpoints after steps 5 and 10.
SETTINGS = dict(max_steps=14, batch_size=16, learning_rate=1e-3, warmup_steps=3, valid_every=4, log_every=2,
                show_progress=False, num_threads=1, checkpoint_every=5)  # fmt: skip


class Crash(Exception):
    """Stands in for the machine ending the run."""


def crash_at_step(monkeypatch, step: int) -> None:
    """Make ``run_sft`` fail inside step ``step`` (at its augmentation, before the step's loss)."""
    augment, calls = training.augment_batch, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            raise Crash(f"step {step}")
        return augment(*args, **kwargs)

    monkeypatch.setattr(training, "augment_batch", failing)


def metrics_rows(run) -> list[dict]:
    """``sft_metrics.jsonl`` without what the wall clock decides."""
    rows = [json.loads(line) for line in run.metrics_path.read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in ("time", "samples_per_s")} for row in rows]


def weights(folder) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def assert_same_run(resumed, whole) -> None:
    assert resumed.train_losses == whole.train_losses
    assert resumed.valid_losses == whole.valid_losses
    assert metrics_rows(resumed) == metrics_rows(whole)
    for folder in ("last_dir", "best_dir"):
        expected, got = weights(getattr(whole, folder)), weights(getattr(resumed, folder))
        assert set(got) == set(expected) and all(torch.equal(got[name], expected[name]) for name in expected)


def train(dataset, output, **changes):
    return run_sft(policy_config("flow"), "tabletop", ENV_KWARGS, dataset, output, SFTConfig(**{**SETTINGS, **changes}),
                   seed=SEED)  # fmt: skip


@pytest.fixture(scope="module")
def dataset_with_targets(tiny_dataset, tmp_path_factory):
    """The tiny demonstrations and 24 target frames, in a folder of their own."""
    folder = tmp_path_factory.mktemp("sft_resume_demos")
    for name in ("demos.hdf5", "stats.json"):
        shutil.copy(tiny_dataset / name, folder / name)
    collect_target_frames("tabletop", TASKS, ENV_KWARGS, folder, 24, seed=0, show_progress=False,
                          reader=block_position)  # fmt: skip
    return folder


@pytest.mark.parametrize("target_loss_weight", [0.0, 1.0])
def test_a_run_resumed_after_a_crash_equals_the_uninterrupted_run(dataset_with_targets, tmp_path, target_loss_weight):
    # The flow head's loss draws its noise from torch's global generator, the target loss its own batches.
    whole = train(dataset_with_targets, tmp_path / "whole", target_loss_weight=target_loss_weight)
    assert not checkpoint_path(tmp_path / "whole").exists()  # a finished run keeps its policies, not its state
    unsaved = train(dataset_with_targets, tmp_path / "unsaved", target_loss_weight=target_loss_weight,
                    checkpoint_every=0)  # fmt: skip
    assert_same_run(unsaved, whole)  # writing checkpoints changes nothing
    # Crashes: after the checkpoint of step 10 (lines past it in the metrics), between the two, before any.
    for crash_step in (13, 8, 3):
        output = tmp_path / f"crash_{crash_step}"
        with pytest.MonkeyPatch.context() as patch:
            crash_at_step(patch, crash_step)
            with pytest.raises(Crash):
                train(dataset_with_targets, output, target_loss_weight=target_loss_weight)
        assert checkpoint_path(output).is_file() == (crash_step > SETTINGS["checkpoint_every"])
        torch.manual_seed(12345)  # whatever the process drew since, the checkpoint's generators count
        resumed = train(dataset_with_targets, output, target_loss_weight=target_loss_weight, resume=True)
        assert_same_run(resumed, whole)
        assert not checkpoint_path(output).exists()


def test_resuming_with_other_settings_is_refused_and_names_them(tiny_dataset, tmp_path):
    with pytest.MonkeyPatch.context() as patch:
        crash_at_step(patch, 7)
        with pytest.raises(Crash):
            train(tiny_dataset, tmp_path)
    with pytest.raises(ConfigError, match=r"sft\.learning_rate=0\.001 \(now 0\.002\).*delete .*checkpoint"):
        train(tiny_dataset, tmp_path, learning_rate=2e-3, resume=True)
    assert checkpoint_path(tmp_path).is_file()  # refused, not deleted
    train(tiny_dataset, tmp_path, resume=True, show_progress=True)  # what the progress bar shows does not matter


def test_a_new_run_in_an_old_folder_deletes_its_checkpoint(tiny_dataset, tmp_path):
    with pytest.MonkeyPatch.context() as patch:
        crash_at_step(patch, 7)
        with pytest.raises(Crash):
            train(tiny_dataset, tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        crash_at_step(patch, 2)  # the new run fails before its own first checkpoint
        with pytest.raises(Crash):
            train(tiny_dataset, tmp_path, learning_rate=2e-3)
    assert not checkpoint_path(tmp_path).exists()


def test_shuffled_indices_resume_where_they_stood():
    def drawn(indices, count):
        return [next(indices) for _ in range(count)]

    for stop in (0, 1, 3, 4, 9):  # 10 samples in batches of 3: three batches an epoch, one sample left over
        first = ShuffledIndices(10, 3, torch.Generator().manual_seed(4))
        drawn(first, stop)
        state = first.state_dict()
        after = drawn(first, 5)
        second = ShuffledIndices(10, 3, torch.Generator().manual_seed(99))
        second.load_state_dict(state)
        assert drawn(second, 5) == after
    # Each epoch is one permutation of the generator's, cut into full batches.
    generator = torch.Generator().manual_seed(4)
    epochs = [torch.randperm(10, generator=generator).tolist() for _ in range(2)]
    expected = [epoch[start : start + 3] for epoch in epochs for start in (0, 3, 6)]
    assert drawn(ShuffledIndices(10, 3, torch.Generator().manual_seed(4)), 6) == expected
