"""envs/builtin/captions.py: captioned tabletop frames say where the instruction's object and the gripper are,
in the vocabulary's words, seeded, with disjoint reset seeds per split."""

from __future__ import annotations

import numpy as np
import pytest

from envs.builtin.captions import (
    CAPTION_WORDS,
    X_EDGES,
    X_WORDS,
    Y_EDGES,
    Y_WORDS,
    Z_EDGES,
    Z_WORDS,
    bin_word,
    captioned_frames,
    vocabulary_words,
)
from envs.builtin.tasks import TASKS


def test_bins_are_thirds_with_their_edges_in_the_upper_bin():
    assert X_EDGES == (0.3733, 0.4667) and Y_EDGES == (-0.1467, -0.0133)
    assert [bin_word(x, X_EDGES, X_WORDS) for x in (0.30, 0.3733, 0.42, 0.55)] == ["near", "middle", "middle", "far"]
    assert [bin_word(y, Y_EDGES, Y_WORDS) for y in (-0.2, 0.0)] == ["right", "left"]
    assert [bin_word(z, Z_EDGES, Z_WORDS) for z in (0.05, 0.15, 0.25)] == ["low", "middle", "high"]


def test_captions_tell_the_privileged_positions_and_repeat_under_a_seed():
    frames = captioned_frames(14, seed=1, image_size=32)
    assert frames.tasks == [*TASKS, *TASKS] and frames.images["front"].shape == (14, 32, 32, 3)
    vocabulary = set(vocabulary_words())
    for i, (words, slots) in enumerate(zip(frames.captions, frames.slots, strict=True)):
        assert set(words) <= set(CAPTION_WORDS) <= vocabulary
        assert words[0] in frames.instructions[i].split()  # the named block's or drawer's colour
        by_slot = {slot: word for word, slot in zip(words, slots, strict=True) if slot}
        x, y, z = frames.gripper_xyz[i]
        assert (by_slot["gripper_x"], by_slot["gripper_y"], by_slot["gripper_z"]) == (
            bin_word(x, X_EDGES, X_WORDS), bin_word(y, Y_EDGES, Y_WORDS), bin_word(z, Z_EDGES, Z_WORDS))
        if "drawer" in words:
            assert np.isnan(frames.object_xy[i]).all() and by_slot["drawer"] in ("open", "closed")
        else:
            assert (by_slot["object_x"], by_slot["object_y"]) == (
                bin_word(frames.object_xy[i][0], X_EDGES, X_WORDS), bin_word(frames.object_xy[i][1], Y_EDGES, Y_WORDS))
    again = captioned_frames(14, seed=1, image_size=32)
    assert again.captions == frames.captions and np.array_equal(again.images["wrist"], frames.images["wrist"])
    assert np.array_equal(again.gripper_xyz, frames.gripper_xyz)
    # the gripper is steered away from the start box (z 0.20-0.28 m) in some frames
    assert (frames.gripper_xyz[:, 2] < 0.19).any()
    held_out = captioned_frames(2, seed=1, split="held_out", image_size=32)
    assert not set(held_out.seeds) & set(frames.seeds)


def test_an_unknown_split_or_task_is_named():
    with pytest.raises(ValueError, match="split='test'; allowed: train, held_out, probe"):
        captioned_frames(1, split="test")
    with pytest.raises(ValueError, match=r"unknown tabletop task\(s\) \['fly'\]"):
        captioned_frames(1, tasks=["fly"])
