from __future__ import annotations

import pytest
import torch

from vla_rl.algos import aggregate_loss

LENGTHS = [4, 2, 0, 3]  # ragged: sequence 2 has no valid token


def ragged():
    generator = torch.Generator().manual_seed(3)
    loss = torch.randn(len(LENGTHS), 4, generator=generator)
    mask = torch.zeros(len(LENGTHS), 4, dtype=torch.bool)
    for row, length in enumerate(LENGTHS):
        mask[row, :length] = True
    loss[~mask] = float("nan")  # padding must never leak into the result
    return loss, mask


def hand_values(loss, mask):
    sums = [sum(float(loss[r, t]) for t in range(n)) for r, n in enumerate(LENGTHS)]
    present = [r for r, n in enumerate(LENGTHS) if n > 0]
    return {
        "token-mean": sum(sums) / sum(LENGTHS),
        "seq-mean-token-sum": sum(sums[r] for r in present) / len(present),
        "seq-mean-token-mean": sum(sums[r] / LENGTHS[r] for r in present) / len(present),
        "seq-mean-token-sum-norm": sum(sums) / (len(LENGTHS) * 4),
    }


@pytest.mark.parametrize(
    "mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
)
def test_modes_on_ragged_masks(mode):
    loss, mask = ragged()
    assert aggregate_loss(loss, mask, mode).item() == pytest.approx(hand_values(loss, mask)[mode], rel=1e-5)


def test_prefix_mask_broadcasts_over_action_dims():
    loss, mask = ragged()
    loss = torch.nan_to_num(loss)
    per_dim = torch.stack([loss, 3 * loss], dim=-1)  # (S, T, A=2)
    expected = (1 + 3) * float(loss[mask].sum()) / (2 * sum(LENGTHS))  # both dims of every valid step
    assert aggregate_loss(per_dim, mask, "token-mean").item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_global_normalizer_makes_micro_batches_add_up(mode):
    loss, mask = ragged()
    full = aggregate_loss(loss, mask, mode)
    normalizer = mask.sum() if mode == "token-mean" else (mask.sum(1) > 0).sum()
    parts = sum(aggregate_loss(loss[i : i + 2], mask[i : i + 2], mode, normalizer) for i in (0, 2))
    assert parts.item() == pytest.approx(full.item(), rel=1e-6)


def test_all_masked_gives_zero_not_nan():
    for mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"):
        assert aggregate_loss(torch.ones(2, 3), torch.zeros(2, 3), mode).item() == 0.0


def test_errors():
    with pytest.raises(
        ValueError, match="unknown loss aggregation mode 'mean'; valid modes: seq-mean-token-mean"
    ):
        aggregate_loss(torch.ones(2), torch.ones(2), "mean")
    with pytest.raises(ValueError, match=r"shape \(3,\) is not a prefix of \(2, 4\)"):
        aggregate_loss(torch.ones(2, 4), torch.ones(3), "token-mean")
