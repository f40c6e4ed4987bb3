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
