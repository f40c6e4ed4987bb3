"""Analytic inverse kinematics of the tabletop arm (``assets/tabletop/robot.xml``).

The arm has base yaw ``q0`` (about world z), three pitch joints ``q1, q2, q3`` (about the link y
axes) and a wrist roll ``q4``. With all joints at zero every link points straight up. A pitch
angle ``a`` tilts a link from vertical towards the arm's radial direction, so the upper arm points
along ``(sin q1, cos q1)`` in the (radial, up) plane, the forearm along ``(sin(q1+q2), cos(q1+q2))``.
The gripper points straight down when ``q1 + q2 + q3 = pi``.

With the gripper pointing down, the grip site (between the finger pads) sits ``GRIP_OFFSET`` below
the wrist pitch joint, so the wrist must be at ``(r, z + GRIP_OFFSET)`` for a grip target at radial
distance ``r`` and height ``z``; the two-link problem shoulder -> wrist is solved with the law of
cosines (elbow up). The fingers close along the hand's y axis, whose world yaw is
``pi/2 + q0 - q4``; the gripper yaw ``psi`` is defined so that ``psi = 0`` closes along world y,
hence ``q4 = q0 - psi``.
"""

from __future__ import annotations

import math

import numpy as np

SHOULDER_HEIGHT = 0.18  # world z of the shoulder pitch axis (pedestal 0.1 + turret 0.08)
UPPER_ARM = 0.38
FOREARM = 0.36
GRIP_OFFSET = 0.12  # wrist pitch joint -> grip site along the hand
ARM_JOINTS = ("base_yaw", "shoulder_pitch", "elbow_pitch", "wrist_pitch", "wrist_roll")
_MAX_REACH = UPPER_ARM + FOREARM - 1e-3
_MIN_REACH = abs(UPPER_ARM - FOREARM) + 1e-3


def solve_ik(grip_position: np.ndarray, gripper_yaw: float = 0.0) -> np.ndarray:
    """Joint angles (5,) that put the grip site at ``grip_position`` (3,), gripper pointing down.

    Targets outside the arm's reach are pulled onto its boundary (the env keeps targets inside a
    workspace box that is reachable, so this only guards against misuse).
    """
    x, y, z = (float(v) for v in grip_position)
    return np.array(solve_ik_floats(x, y, z, float(gripper_yaw)))


def solve_ik_floats(x: float, y: float, z: float, gripper_yaw: float) -> tuple[float, ...]:
    """:func:`solve_ik` on plain floats, returning a tuple: the env's per-step path (no array in, none out)."""
    base_yaw = math.atan2(y, x)
    radial = math.hypot(x, y)
    wrist_radial = radial
    wrist_up = z + GRIP_OFFSET - SHOULDER_HEIGHT
    distance = math.hypot(wrist_radial, wrist_up)
    distance = min(max(distance, _MIN_REACH), _MAX_REACH)
    cos_elbow = (distance**2 - UPPER_ARM**2 - FOREARM**2) / (2.0 * UPPER_ARM * FOREARM)
    elbow = math.acos(min(1.0, max(-1.0, cos_elbow)))
    direction = math.atan2(wrist_radial, wrist_up)  # angle of shoulder->wrist from vertical
    shoulder = direction - math.atan2(FOREARM * math.sin(elbow), UPPER_ARM + FOREARM * math.cos(elbow))
    wrist_pitch = math.pi - shoulder - elbow
    wrist_roll = wrap_angle(base_yaw - gripper_yaw)
    return (base_yaw, shoulder, elbow, wrist_pitch, wrist_roll)


def wrap_angle(angle: float) -> float:
    """Angle wrapped into [-pi, pi)."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi
