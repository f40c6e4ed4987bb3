"""Which robots a robosuite task gets, and the proprioceptive state read from them.

A task of robosuite's ``TwoArmEnv`` needs two arms: one bimanual robot (Baxter, GR1, Tiago) or two
single-arm robots. ``robot="Panda"`` on a two-arm task therefore means two Pandas (robosuite's default
"opposed" placement); a list names the robots one by one.

State layout, per robot and per arm in robosuite's order (``robot.arms``: right, then left)::

    [eef_x, eef_y, eef_z, eef_qx, eef_qy, eef_qz, eef_qw, finger joints (gripper dof)] ...
    then the robot's arm joint angles (all its arms)

so a one-arm robot (the Panda) gives ``[eef xyz, eef quat (xyzw, w >= 0), fingers, joints]``: 7 + 2 + 7 = 16.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

#: robosuite robots with two arms of their own (robosuite.robots: bimanual models).
BIMANUAL_ROBOTS = frozenset({"Baxter", "GR1", "GR1FixedLowerBody", "GR1ArmsOnly", "GR1FloatingBody", "Tiago"})


def robots_for(task: str, robot: str | Sequence[str]) -> list[str]:
    """The robots robosuite's ``task`` is built with, for the config's ``robot`` (a name or a list)."""
    if not isinstance(robot, str):
        return [str(name) for name in robot]
    from robosuite.environments.base import REGISTERED_ENVS
    from robosuite.environments.manipulation.two_arm_env import TwoArmEnv

    two_arm = issubclass(REGISTERED_ENVS[task], TwoArmEnv)
    return [robot, robot] if two_arm and robot not in BIMANUAL_ROBOTS else [robot]


@dataclass(frozen=True)
class StateLayout:
    """Where the state's entries live in MuJoCo's data: one (site, finger qpos) per arm, joint qpos per robot."""

    eef_sites: tuple[int, ...]
    finger_qpos: tuple[np.ndarray, ...]
    joint_qpos: tuple[np.ndarray, ...]
    #: entries of each arm block in order (used to keep robot joints after every arm of that robot)
    arms_per_robot: tuple[int, ...]

    @property
    def state_dim(self) -> int:
        return sum(7 + len(f) for f in self.finger_qpos) + sum(len(j) for j in self.joint_qpos)

    def read(self, data: mujoco.MjData) -> np.ndarray:
        """(state_dim,) float32 state of the module docstring."""
        parts: list[np.ndarray] = []
        arm = 0
        for robot, count in enumerate(self.arms_per_robot):
            for _ in range(count):
                site = self.eef_sites[arm]
                quaternion = np.empty(4)
                mujoco.mju_mat2Quat(quaternion, data.site_xmat[site])  # wxyz
                xyzw = np.roll(quaternion, -1) * (1.0 if quaternion[0] >= 0 else -1.0)
                parts += [data.site_xpos[site], xyzw, data.qpos[self.finger_qpos[arm]]]
                arm += 1
            parts.append(data.qpos[self.joint_qpos[robot]])
        return np.concatenate(parts).astype(np.float32)


def state_layout(robots: Sequence[Any]) -> StateLayout:
    """The :class:`StateLayout` of robosuite robot objects (``env.robots``)."""
    sites, fingers, joints, counts = [], [], [], []
    for robot in robots:
        for arm in robot.arms:
            sites.append(robot.eef_site_id[arm])
            fingers.append(np.asarray(robot._ref_gripper_joint_pos_indexes.get(arm, []) if robot.has_gripper[arm] else [], int))
        joints.append(np.asarray(robot._ref_arm_joint_pos_indexes, int))
        counts.append(len(robot.arms))
    return StateLayout(tuple(sites), tuple(fingers), tuple(joints), tuple(counts))
