"""Controller configuration of the robosuite adapter, and the action scaling to robot units.

robosuite 1.5 configures a robot with a *composite* controller whose ``body_parts`` hold one *part*
controller per arm (with a gripper entry). The adapter takes either a part controller type
(``"OSC_POSE"`` (default), ``"OSC_POSITION"``, ``"IK_POSE"``, ``"JOINT_POSITION"``, ``"JOINT_VELOCITY"``,
``"JOINT_TORQUE"``), which replaces the arm controllers of the robot's default composite config,
or the path of a composite controller JSON file.

robosuite's actions are normalised to each part controller's input range ([-1, 1]) and scaled to
its output range (OSC_POSE: +-0.05 m and +-0.5 rad per step). The env's action Box is the output
range (robot units), and :class:`ActionScaling` maps it back linearly to robosuite's input range.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

PART_CONTROLLERS = ("OSC_POSE", "OSC_POSITION", "IK_POSE", "JOINT_POSITION", "JOINT_VELOCITY", "JOINT_TORQUE")
ARM_NAMES = ("right", "left")
_DIMENSION_NAMES = {
    "OperationalSpaceController": {6: ("dx", "dy", "dz", "dax", "day", "daz"), 3: ("dx", "dy", "dz")},
    "InverseKinematicsController": {6: ("dx", "dy", "dz", "dax", "day", "daz")},
}


def build_controller_config(
    controller: str, robot: str, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The composite controller config for ``robot`` with arm controller ``controller``.

    ``overrides`` are merged into every arm part config (e.g. ``{"kp": 300}``).

    Raises:
        ValueError: ``controller`` is neither a part controller type nor a ``.json`` path.
    """
    from robosuite.controllers import load_composite_controller_config, load_part_controller_config

    if controller.endswith(".json"):
        config = load_composite_controller_config(controller=controller)
    elif controller in PART_CONTROLLERS:
        config = load_composite_controller_config(robot=robot)
        part = load_part_controller_config(default_controller=controller)
        for arm in ARM_NAMES:
            if arm in config["body_parts"]:
                gripper = config["body_parts"][arm].get("gripper", {"type": "GRIP"})
                config["body_parts"][arm] = {**copy.deepcopy(part), "gripper": gripper}
    else:
        raise ValueError(
            f"unknown controller {controller!r}; give one of {', '.join(PART_CONTROLLERS)} "
            "or the path of a robosuite composite controller .json file"
        )
    for arm in ARM_NAMES:
        if overrides and arm in config["body_parts"]:
            config["body_parts"][arm].update(overrides)
    return config


@dataclass(frozen=True)
class ActionScaling:
    """Linear map from robot-unit actions (the env's Box) to robosuite's normalised actions.

    ``robosuite_action = input_low + (action - low) * (input_high - input_low) / (high - low)``,
    all arrays of shape (A,).
    """

    low: np.ndarray
    high: np.ndarray
    input_low: np.ndarray
    input_high: np.ndarray
    names: tuple[str, ...]

    def to_robosuite(self, action: np.ndarray) -> np.ndarray:
        """(A,) robot units -> (A,) robosuite input range."""
        fraction = (action - self.low) / (self.high - self.low)
        return self.input_low + fraction * (self.input_high - self.input_low)


def action_scaling_of(robot: Any) -> ActionScaling:
    """Read the part controllers of a robosuite ``robot`` and build its :class:`ActionScaling`."""
    composite = robot.composite_controller
    size = max(end for _, end in composite._action_split_indexes.values())
    low, high = np.full(size, -1.0), np.full(size, 1.0)
    input_low, input_high = low.copy(), high.copy()
    names = [""] * size
    for part_name, (start, end) in composite._action_split_indexes.items():
        part = composite.part_controllers[part_name]
        count = end - start
        output_bounds = _bounds(part, "output_min", "output_max", count)
        input_bounds = _bounds(part, "input_min", "input_max", count)
        if output_bounds is not None and input_bounds is not None:  # else: robosuite's [-1, 1] as is
            low[start:end], high[start:end] = output_bounds
            input_low[start:end], input_high[start:end] = input_bounds
        names[start:end] = _part_names(part_name, type(part).__name__, count)
    return ActionScaling(low, high, input_low, input_high, tuple(names))


def _bounds(part: Any, low_key: str, high_key: str, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The part's (low, high) of shape (count,), or None where it has none that fit (e.g. grippers)."""
    low = np.atleast_1d(np.asarray(getattr(part, low_key, np.nan), dtype=float))
    high = np.atleast_1d(np.asarray(getattr(part, high_key, np.nan), dtype=float))
    if low.size not in (1, count) or high.size not in (1, count):
        return None
    low, high = np.broadcast_to(low, (count,)).copy(), np.broadcast_to(high, (count,)).copy()
    return (low, high) if np.all(np.isfinite(low) & np.isfinite(high) & (high > low)) else None


def _part_names(part_name: str, class_name: str, count: int) -> list[str]:
    if part_name.endswith("gripper"):
        prefix = part_name.removesuffix("gripper").rstrip("_")
        base = "gripper" if prefix in ("", "right") else f"{prefix}_gripper"
        return [base] if count == 1 else [f"{base}_{i}" for i in range(count)]
    known = _DIMENSION_NAMES.get(class_name, {}).get(count)
    if known is not None:
        return list(known) if part_name == "right" else [f"{part_name}_{n}" for n in known]
    return [f"{part_name}_{i}" for i in range(count)]
