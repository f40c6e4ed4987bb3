"""Random-shift augmentation of SFT batches, and early stopping on the validation loss."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from conftest import ENV_KWARGS
from test_sft_training import policy_config

import vla_rl.stages.sft.training as sft_module
from vla_rl.stages.sft.batches import augment_batch, random_shift_images
from vla_rl.stages.sft.training import SFTConfig, run_sft


def _random_images(batch: int, height: int = 12, width: int = 10, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, height, width, 3), dtype=torch.uint8, generator=generator)


def _pad_and_crop(image: torch.Tensor, pad: int, top: int, left: int) -> torch.Tensor:
    """DrQ written out: replicate-pad a (H, W, 3) image by ``pad`` and crop the H x W window at (top, left)."""
    height, width = image.shape[:2]
    padded = F.pad(image.permute(2, 0, 1).float()[None], (pad, pad, pad, pad), mode="replicate")[0]
    return padded[:, top : top + height, left : left + width].permute(1, 2, 0).to(torch.uint8)


def test_random_shift_is_pad_and_crop_with_offsets_within_the_bound():
    images, pad = _random_images(16), 2
    shifted = random_shift_images(images, pad, torch.Generator().manual_seed(1))
    assert shifted.shape == images.shape and shifted.dtype == torch.uint8
    offsets = []
    for image, result in zip(images, shifted, strict=True):
        # random pixels: exactly one crop window of the padded image reproduces the result
        matches = [(top, left) for top in range(2 * pad + 1) for left in range(2 * pad + 1)
                   if torch.equal(_pad_and_crop(image, pad, top, left), result)]  # fmt: skip
        assert len(matches) == 1
        offsets.append(matches[0])
    assert len(set(offsets)) > 4  # offsets are drawn per image, not per batch
    assert any(offset != (pad, pad) for offset in offsets)  # (pad, pad) is the unshifted window


def test_random_shift_is_seeded_and_zero_shift_is_identity():
    images = _random_images(8)
    first = random_shift_images(images, 3, torch.Generator().manual_seed(7))
    again = random_shift_images(images, 3, torch.Generator().manual_seed(7))
    assert torch.equal(first, again) and not torch.equal(first, images)
    assert torch.equal(random_shift_images(images, 0, torch.Generator()), images)


def test_augment_batch_shifts_each_camera_on_its_own_and_leaves_the_rest():
    front = _random_images(8, seed=1)
    batch = {"images": {"front": front, "wrist": front.clone()}, "state": torch.randn(8, 9),
             "instruction": ["reach"] * 8, "action": torch.randn(8, 4, 4)}  # fmt: skip
    augmented = augment_batch(batch, 2, torch.Generator().manual_seed(0))
    assert torch.equal(batch["images"]["front"], front)  # the input batch is not changed
    assert not torch.equal(augmented["images"]["front"], augmented["images"]["wrist"])
    assert augmented["state"] is batch["state"] and augmented["action"] is batch["action"]
    assert augmented["instruction"] == batch["instruction"]


def test_config_checks_augment_and_patience():
    with pytest.raises(ValueError, match="augment_shift_pixels=-1: must be >= 0"):
        SFTConfig(augment_shift_pixels=-1)
    with pytest.raises(ValueError, match="early_stopping_patience=0: must be >= 1"):
        SFTConfig(early_stopping_patience=0)


def test_early_stopping_keeps_the_best_and_training_batches_are_augmented(
    tiny_dataset, tmp_path, monkeypatch, capsys
):
    scripted_losses = iter([1.0, 0.5, 0.7, 0.6, 0.3, 0.2])
    monkeypatch.setattr(sft_module, "validation_loss", lambda *args, **kwargs: next(scripted_losses))
    shifts: list[int] = []

    def recording_augment(batch, max_shift, generator):
        shifts.append(max_shift)
        return augment_batch(batch, max_shift, generator)

    monkeypatch.setattr(sft_module, "augment_batch", recording_augment)
    config = SFTConfig(max_steps=10, batch_size=8, valid_every=1, early_stopping_patience=2, augment_shift_pixels=3,
                       show_progress=False, num_threads=1)  # fmt: skip
    result = run_sft(policy_config("gaussian"), "tabletop", ENV_KWARGS, tiny_dataset, tmp_path, config)

    # best at step 2 (0.5); steps 3 and 4 do not improve on it: stop after step 4 of 10
    assert result.num_steps == 4 and len(result.train_losses) == 4
    assert result.valid_losses == [(1, 1.0), (2, 0.5), (3, 0.7), (4, 0.6)]
    assert result.best_valid_loss == 0.5 and result.policy_dir == tmp_path / "best"
    assert "early stop at step 4" in capsys.readouterr().out
    summary = json.loads(result.metrics_path.read_text().splitlines()[-1])
    assert summary["split"] == "summary" and summary["num_steps"] == 4
    assert shifts == [3, 3, 3, 3]  # every training batch, and only those

    shifts.clear()
    scripted_losses = iter([1.0, 0.9])
    run_sft(policy_config("gaussian"), "tabletop", ENV_KWARGS, tiny_dataset, tmp_path / "plain",
            SFTConfig(max_steps=2, batch_size=8, valid_every=1, augment=False, show_progress=False))  # fmt: skip
    assert shifts == []
