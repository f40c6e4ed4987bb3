"""The action tokenizer: uniform bins over [-1, 1], ids at the end of the vocabulary or added after it, and the
round trip through the dataset statistics in env units."""

from __future__ import annotations

import pytest
import torch

from policies.normalization import Normalizer
from policies.tokens import ActionTokenizer, decode_actions, encode_actions


def test_round_trip_error_is_at_most_half_a_bin_inside_the_range():
    tokenizer = ActionTokenizer(256, 32000)
    values = torch.rand(4, 5, 7, generator=torch.Generator().manual_seed(0)) * 2 - 1
    decoded = tokenizer.decode(tokenizer.encode(values))
    assert decoded.shape == values.shape
    assert (decoded - values).abs().max() <= tokenizer.bin_width / 2 + 1e-7
    assert tokenizer.bin_width == pytest.approx(2 / 256)


def test_bins_are_uniform_and_centres_are_independent_arithmetic():
    tokenizer = ActionTokenizer(4, 100)
    # [-1, -0.5) -> 0, [-0.5, 0) -> 1, [0, 0.5) -> 2, [0.5, 1] -> 3
    values = torch.tensor([-1.0, -0.51, -0.49, 0.0, 0.49, 0.5, 1.0])
    assert tokenizer.bins(values).tolist() == [0, 0, 1, 2, 2, 3, 3]
    assert tokenizer.centers(torch.arange(4)).tolist() == [-0.75, -0.25, 0.25, 0.75]


def test_values_outside_the_range_clip_to_the_edge_bins():
    tokenizer = ActionTokenizer(8, 100)
    ids = tokenizer.encode(torch.tensor([-7.0, -1.0, 1.0, 3.0]))
    assert tokenizer.bins_of_ids(ids).tolist() == [0, 0, 7, 7]
    assert tokenizer.decode(ids).tolist() == [-0.875, -0.875, 0.875, 0.875]


@pytest.mark.parametrize(("placement", "first", "total"), [("last", 100 - 16, 100), ("added", 100, 116)])
def test_ids_lie_where_the_placement_says(placement, first, total):
    tokenizer = ActionTokenizer(16, 100, placement)
    ids = tokenizer.encode(torch.linspace(-1.5, 1.5, 301))
    assert int(ids.min()) == first and int(ids.max()) == first + 15
    assert tokenizer.total_vocab_size == total and int(ids.max()) < total
    if placement == "last":
        assert int(ids.max()) == 99  # the vocabulary's last id


def test_bad_settings_and_foreign_ids_are_refused():
    with pytest.raises(ValueError, match="id_placement='added'"):
        ActionTokenizer(256, 70, "last")
    with pytest.raises(ValueError, match="id_placement"):
        ActionTokenizer(8, 100, "middle")
    with pytest.raises(ValueError, match="num_bins"):
        ActionTokenizer(1, 100)
    with pytest.raises(ValueError, match="not all action tokens"):
        ActionTokenizer(8, 100).decode(torch.tensor([5]))


def test_env_units_round_trip_through_the_statistics():
    low, high = torch.tensor([2.0, 10.0, 100.0]), torch.tensor([4.0, 20.0, 300.0])
    stats = {"action": {"min": low.tolist(), "max": high.tolist()}}
    normalizer = Normalizer(stats, {"action": "min_max"}, {"action": 3})
    tokenizer = ActionTokenizer(256, 70, "added")
    actions = low + torch.rand(6, 4, 3, generator=torch.Generator().manual_seed(1)) * (high - low)
    decoded = decode_actions(tokenizer, encode_actions(tokenizer, actions, normalizer), normalizer)
    half_bin = (high - low) / 256  # w / 2 in normalised units is (high - low) / 2 * (1 / 256) in env units
    assert decoded.shape == (6, 4, 3)
    assert ((decoded - actions).abs() <= half_bin + 1e-5).all()


def test_soft_targets_are_the_gaussian_mass_of_each_bin_renormalised_over_the_range():
    import math

    tokenizer = ActionTokenizer(8, 100)
    values, std = torch.tensor([[-1.0, -0.3], [0.6, 2.0]]), 0.4
    targets = tokenizer.soft_targets(values, std)
    assert targets.shape == (2, 2, 8)

    def cdf(x, mean):
        return 0.5 * (1 + math.erf((x - mean) / (std * math.sqrt(2))))

    for index in ((0, 0), (0, 1), (1, 0), (1, 1)):
        mean = max(-1.0, min(1.0, float(values[index])))  # a value outside the range is clipped first
        inside = cdf(1.0, mean) - cdf(-1.0, mean)
        expected = [(cdf(-1 + (k + 1) * 0.25, mean) - cdf(-1 + k * 0.25, mean)) / inside for k in range(8)]
        assert torch.allclose(targets[index], torch.tensor(expected), atol=1e-6)
    assert torch.allclose(targets.sum(-1), torch.ones(2, 2), atol=1e-6)


def test_soft_targets_of_a_narrow_gaussian_are_the_one_hot_bin_and_neighbours_share_a_wide_one():
    tokenizer = ActionTokenizer(16, 100)
    values = torch.linspace(-0.9, 0.9, 7) + 0.01
    narrow = tokenizer.soft_targets(values, 1e-4)
    assert torch.equal(narrow.argmax(-1), tokenizer.bins(values)) and (narrow.max(-1).values > 0.999).all()
    wide = tokenizer.soft_targets(torch.tensor([0.0]), 0.3)[0]
    assert torch.allclose(wide, wide.flip(0), atol=1e-6)  # symmetric about the centre of the range
    assert (wide[8:].diff() < 0).all()  # falling away from the value


def test_soft_targets_need_a_positive_std():
    with pytest.raises(ValueError, match="std > 0"):
        ActionTokenizer(8, 100).soft_targets(torch.zeros(3), 0.0)
