"""The LIBERO expert's grasp geometry against closed forms: rectangle-box overlap and the span of a box
along a closing line (no LIBERO needed: plain MuJoCo models)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from envs.experts.libero import Box, rectangle_meets_box, span_along


def test_rectangle_meets_box_by_separating_axes():
    box = Box(np.array([0.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0]))
    half = np.array([0.5, 0.1])
    assert rectangle_meets_box(np.array([0.5, 0.5]), half, 0.0, box)  # inside
    assert not rectangle_meets_box(np.array([-0.6, 0.5]), half, 0.0, box)  # 0.1 left of it
    assert rectangle_meets_box(np.array([-0.4, 0.5]), half, 0.0, box)  # 0.1 into it
    # Turned a quarter, the long side runs along y: 0.6 left of the box no longer reaches it, 0.05 does.
    assert not rectangle_meets_box(np.array([-0.15, 0.5]), half, np.pi / 2, box)
    assert rectangle_meets_box(np.array([-0.05, 0.5]), half, np.pi / 2, box)
    # Off the corner (1, 1) on the diagonal: a square of half side 0.1 reaches the corner with its own corner
    # (0.1 * sqrt(2) = 0.141 along the diagonal), or, turned 45 degrees, with a face (0.1 along it).
    square = np.array([0.1, 0.1])
    centre = np.array([1.08, 1.08])  # 0.113 from the corner
    assert rectangle_meets_box(centre, square, 0.0, box)
    assert not rectangle_meets_box(centre, square, np.pi / 4, box)
    assert rectangle_meets_box(np.array([1.06, 1.06]), square, np.pi / 4, box)  # 0.085 from the corner


@pytest.mark.parametrize("yaw", [0.0, 0.3, 0.6])
def test_span_of_a_lying_box_along_a_turned_closing_line(yaw):
    """A 0.08 x 0.04 box (long along x) crossed by a line through its centre turned ``yaw`` from y: the chord
    is 0.04 / cos(yaw) while it leaves through the long sides; lines 0.01 to either side shift it by
    0.01 * tan(yaw) each way along the line."""
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body name="b" pos="0.3 0.2 0.1"><geom type="box" size="0.04 0.02 0.01"/></body>'
        "</worldbody></mujoco>"
    )
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    direction = np.array([-np.sin(yaw), np.cos(yaw), 0.0])
    centre = np.array([0.3, 0.2, 0.1])
    assert span_along(model, data, 1, centre, direction, 0.0) == pytest.approx(0.04 / np.cos(yaw))
    assert span_along(model, data, 1, centre, direction, 0.01) == pytest.approx(0.04 / np.cos(yaw) + 2 * 0.01 * np.tan(yaw))
    assert span_along(model, data, 1, centre + np.array([0.0, 0.0, 0.5]), direction, 0.0) == 0.0  # above it
