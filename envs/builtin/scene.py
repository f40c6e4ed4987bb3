"""Named access to the tabletop scene: where things are, and setting up a layout.

``TabletopScene`` wraps one ``MjModel``/``MjData`` pair. It knows the object names of
``assets/tabletop/objects.xml`` and offers privileged state (positions, drawer opening) to tasks
and scripted experts; the policy never sees it. A *layout* is a plain dict (JSON-able) describing
an initial scene; ``apply_layout`` puts the simulation into it.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

from envs.builtin.arm import ARM_JOINTS, solve_ik

#: Colour names and their RGBA; instructions use the names.
PALETTE: dict[str, tuple[float, float, float, float]] = {
    "red": (0.85, 0.12, 0.10, 1.0),
    "green": (0.15, 0.70, 0.20, 1.0),
    "blue": (0.12, 0.30, 0.90, 1.0),
    "yellow": (0.95, 0.85, 0.10, 1.0),
    "purple": (0.55, 0.20, 0.75, 1.0),
    "orange": (0.95, 0.50, 0.05, 1.0),
    "cyan": (0.10, 0.80, 0.85, 1.0),
}
NUM_BLOCKS = 3
NUM_ZONES = 2
BLOCK_HALF_SIZE = 0.02
BOWL_INNER_RADIUS = 0.055
BOWL_WALL_HEIGHT = 0.046
ZONE_RADIUS = 0.05
DRAWER_RANGE = 0.16
FINGER_OPEN = 0.045  # slide joint position of one finger when fully open (m)
HANDLE_OFFSET = np.array([-0.17, 0.0, 0.07])  # handle bar centre relative to the cabinet at drawer = 0


class TabletopScene:
    """Privileged views and setters over the simulation state."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        self.model = model
        self.data = data
        self.arm_qpos_addr = np.array([model.jnt_qposadr[model.joint(j).id] for j in ARM_JOINTS])
        self.arm_dof_addr = np.array([model.jnt_dofadr[model.joint(j).id] for j in ARM_JOINTS])
        self.finger_qpos_addr = np.array(
            [model.jnt_qposadr[model.joint(j).id] for j in ("finger_left", "finger_right")]
        )
        self.finger_geoms = (model.geom("finger_left").id, model.geom("finger_right").id)
        self.grip_site = model.site("grip").id
        self.block_bodies = [model.body(f"block_{i}").id for i in range(NUM_BLOCKS)]
        self.block_geoms = [model.geom(f"block_{i}").id for i in range(NUM_BLOCKS)]
        self.block_qpos_addr = [model.jnt_qposadr[model.joint(f"block_{i}").id] for i in range(NUM_BLOCKS)]
        self.zone_bodies = [model.body(f"zone_{i}").id for i in range(NUM_ZONES)]
        self.zone_geoms = [model.geom(f"zone_{i}").id for i in range(NUM_ZONES)]
        self.bowl_body = model.body("bowl").id
        self.cabinet_body = model.body("cabinet").id
        self.drawer_front_geom = model.geom("drawer_front").id
        self.drawer_qpos_addr = model.jnt_qposadr[model.joint("drawer").id]
        self.block_colors: list[str] = ["red", "green", "blue"]
        self.zone_colors: list[str] = ["yellow", "purple"]
        self.drawer_color = "orange"

    # ----------------------------------------------------------------- privileged state
    @property
    def ee_position(self) -> np.ndarray:
        """Grip site (between the finger pads), world frame (3,)."""
        return self.data.site_xpos[self.grip_site].copy()

    @property
    def gripper_yaw(self) -> float:
        """Yaw of the finger closing axis relative to world y (rad)."""
        rotation = self.data.site_xmat[self.grip_site].reshape(3, 3)
        return math.atan2(rotation[1, 1], rotation[0, 1]) - math.pi / 2

    @property
    def gripper_opening(self) -> float:
        """Distance between the finger pads (m): 0 closed, 0.09 fully open."""
        left, right = self.finger_qpos_addr
        qpos = self.data.qpos
        return float(qpos[left] + qpos[right])

    def block_index(self, color: str) -> int:
        if color not in self.block_colors:
            raise ValueError(f"no {color!r} block in the scene; blocks are {self.block_colors}")
        return self.block_colors.index(color)

    def block_position(self, color: str) -> np.ndarray:
        return self.data.xpos[self.block_bodies[self.block_index(color)]].copy()

    def zone_position(self, color: str) -> np.ndarray:
        if color not in self.zone_colors:
            raise ValueError(f"no {color!r} zone in the scene; zones are {self.zone_colors}")
        return self.data.xpos[self.zone_bodies[self.zone_colors.index(color)]].copy()

    @property
    def bowl_position(self) -> np.ndarray:
        return self.data.xpos[self.bowl_body].copy()

    @property
    def drawer_opening(self) -> float:
        """How far the drawer is pulled out (m): 0 closed, 0.16 fully open."""
        return float(self.data.qpos[self.drawer_qpos_addr])

    @property
    def handle_position(self) -> np.ndarray:
        """Centre of the drawer handle bar, world frame (3,)."""
        return self.data.xpos[self.cabinet_body] + HANDLE_OFFSET - np.array([self.drawer_opening, 0.0, 0.0])

    def fingers_touch_block(self, color: str) -> bool:
        """Whether either finger is in contact with the block of ``color``."""
        block = self.block_geoms[self.block_index(color)]
        left, right = self.finger_geoms
        # the geom pairs of the active contacts as plain ints: iterating MjContact structs is far slower
        for geom1, geom2 in self.data.contact.geom.tolist():
            if (geom1 == block and (geom2 == left or geom2 == right)) or (
                geom2 == block and (geom1 == left or geom1 == right)
            ):
                return True
        return False

    # ----------------------------------------------------------------- layout
    def apply_layout(self, layout: dict[str, Any]) -> None:
        """Reset the simulation into ``layout`` (see :func:`envs.builtin.tasks.base.sample_layout`)."""
        model, data = self.model, self.data
        mujoco.mj_resetData(model, data)
        self.block_colors = list(layout["block_colors"])
        self.zone_colors = list(layout["zone_colors"])
        self.drawer_color = str(layout["drawer_color"])
        for i, color in enumerate(self.block_colors):
            model.geom_rgba[self.block_geoms[i]] = PALETTE[color]
            x, y, yaw = layout["block_poses"][i]
            address = self.block_qpos_addr[i]
            data.qpos[address : address + 7] = [
                x,
                y,
                BLOCK_HALF_SIZE,
                math.cos(yaw / 2),
                0,
                0,
                math.sin(yaw / 2),
            ]
        for i, color in enumerate(self.zone_colors):
            model.geom_rgba[self.zone_geoms[i]] = PALETTE[color]
            model.body_pos[self.zone_bodies[i]][:2] = layout["zone_positions"][i]
        model.geom_rgba[self.drawer_front_geom] = PALETTE[self.drawer_color]
        model.body_pos[self.bowl_body][:2] = layout["bowl_position"]
        data.qpos[self.drawer_qpos_addr] = layout["drawer_opening"]
        arm = solve_ik(np.asarray(layout["ee_start"], dtype=float), 0.0)
        data.qpos[self.arm_qpos_addr] = arm
        data.qpos[self.finger_qpos_addr] = FINGER_OPEN
        data.ctrl[:5] = arm
        data.ctrl[5:7] = FINGER_OPEN
        mujoco.mj_forward(model, data)
