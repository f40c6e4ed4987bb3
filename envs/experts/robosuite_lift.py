"""Scripted experts for robosuite tasks (Lift, Stack): phase machines over privileged sim state.

The experts send actions in the adapter's robot units (OSC_POSE: metres and radians per step,
gripper -1 open / +1 close). Each phase has a grip-site target recomputed every step from the
current object positions, a gripper command, a tolerance and a minimum number of steps; the
translation is a proportional step towards the target clipped to the action bound. The gripper
is turned about the vertical to the nearest face of the cube (cubes are placed at random yaw).

Noise for diverse demonstrations: ``noise_std`` (m) adds Gaussian noise to every translation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from envs.experts.base import ScriptedExpert
from envs.experts.phases import Phase as BasePhase
from envs.experts.phases import PhaseSequence

OPEN, CLOSED = -1.0, 1.0
POSITION_GAIN = 1.5
YAW_GAIN = 1.0
PHASE_TIMEOUT = 40  # steps; a phase that cannot reach its tolerance moves on


@dataclass
class Phase(BasePhase):
    tolerance: float | None = 0.01
    align_yaw: bool = True


def _yaw_of_matrix(rotation: np.ndarray) -> float:
    """Heading (rad) of a rotation matrix's x axis in the world xy plane."""
    return float(np.arctan2(rotation[1, 0], rotation[0, 0]))


def _wrap_quarter_turn(angle: float) -> float:
    """``angle`` mapped to [-pi/4, pi/4) (a cube looks the same every quarter turn)."""
    return float((angle + np.pi / 4) % (np.pi / 2) - np.pi / 4)


class RobosuiteExpert(ScriptedExpert):
    """Base class: subclasses implement ``phases()`` and ``grasp_body()``."""

    def __init__(self, env, noise_std: float = 0.0, seed: int | None = None) -> None:
        action_names = env.unwrapped.env_spec.action_names
        if tuple(action_names[:6]) != ("dx", "dy", "dz", "dax", "day", "daz"):
            raise ValueError(
                f"the robosuite experts need the OSC_POSE controller (action names dx..daz, gripper); "
                f"this env has {action_names}: build it with controller='OSC_POSE'"
            )
        super().__init__(env, noise_std, seed)

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (call after ``env.reset``); ``seed`` re-seeds this episode's noise."""
        super().reset(seed)
        self.sequence = PhaseSequence(PHASE_TIMEOUT)
        self._start_height: float | None = None

    # ----------------------------------------------------------------- privileged state
    @property
    def sim(self):
        return self.env.robosuite_env.sim

    def body_position(self, body_id: int) -> np.ndarray:
        return np.array(self.sim.data.body_xpos[body_id])

    def body_yaw(self, body_id: int) -> float:
        return _yaw_of_matrix(np.array(self.sim.data.body_xmat[body_id]).reshape(3, 3))

    def gripper_yaw(self) -> float:
        site = self.env.robosuite_env.robots[0].eef_site_id["right"]
        return _yaw_of_matrix(np.array(self.sim.data.site_xmat[site]).reshape(3, 3))

    def phases(self) -> list[Phase]:
        raise NotImplementedError

    def grasp_body(self) -> int:
        """Body id of the object whose yaw the gripper aligns with."""
        raise NotImplementedError

    # ----------------------------------------------------------------- acting
    def act(self, obs: object = None) -> np.ndarray:
        """Next action (7,): [dx, dy, dz, dax, day, daz, gripper] in robot units."""
        phase, target = self.sequence.advance(self.phases, lambda: self.env.eef_position)
        high = np.asarray(self.env.env_spec.action_high)
        translation = POSITION_GAIN * (target - self.env.eef_position)
        if self.noise_std > 0:
            translation = translation + self.rng.normal(0.0, self.noise_std, size=3)
        translation = np.clip(translation, -high[:3], high[:3])
        yaw_error = _wrap_quarter_turn(self.body_yaw(self.grasp_body()) - self.gripper_yaw())
        turn = np.clip(YAW_GAIN * yaw_error, -high[5], high[5]) if phase.align_yaw else 0.0
        return np.array([*translation, 0.0, 0.0, turn, phase.gripper], dtype=np.float32)

    # ----------------------------------------------------------------- building blocks
    def offset(self, point: Callable[[], np.ndarray], dz: float) -> Callable[[], np.ndarray]:
        return lambda: point() + np.array([0.0, 0.0, dz])

    def pick_phases(self, body_id: int, lift_height: float) -> list[Phase]:
        """Above the object, down to it open, close, lift straight up by ``lift_height``."""
        grasp = lambda: self.body_position(body_id)  # noqa: E731
        held_at: dict[str, np.ndarray] = {}

        def lift_target() -> np.ndarray:
            start = held_at.setdefault("xyz", self.env.eef_position.copy())
            return start + np.array([0.0, 0.0, lift_height])

        return [
            Phase(self.offset(grasp, 0.08), OPEN, tolerance=0.012),
            Phase(grasp, OPEN, tolerance=0.008, min_steps=2),
            Phase(lambda: self.env.eef_position, CLOSED, tolerance=None, min_steps=6, align_yaw=False),
            Phase(lift_target, CLOSED, tolerance=0.02, align_yaw=False),
        ]


class LiftExpert(RobosuiteExpert):
    """Grasp the cube and lift it 15 cm (success: 4 cm above the table)."""

    def grasp_body(self) -> int:
        return self.env.robosuite_env.cube_body_id

    def phases(self) -> list[Phase]:
        return self.pick_phases(self.grasp_body(), lift_height=0.15)


class StackExpert(RobosuiteExpert):
    """Pick cube A (red), carry it above cube B (green), lower it onto B and let go."""

    def grasp_body(self) -> int:
        return self.env.robosuite_env.cubeA_body_id

    def phases(self) -> list[Phase]:
        inner = self.env.robosuite_env
        above_b = lambda: self.body_position(inner.cubeB_body_id) + np.array([0.0, 0.0, 0.10])  # noqa: E731
        onto_b = lambda: self.body_position(inner.cubeB_body_id) + np.array([0.0, 0.0, 0.05])  # noqa: E731
        return [
            *self.pick_phases(inner.cubeA_body_id, lift_height=0.12),
            Phase(above_b, CLOSED, tolerance=0.01, align_yaw=False),
            Phase(onto_b, CLOSED, tolerance=0.008, align_yaw=False),
            Phase(lambda: self.env.eef_position, OPEN, tolerance=None, min_steps=6, align_yaw=False),
            Phase(above_b, OPEN, tolerance=0.02, align_yaw=False),
        ]


#: task name -> expert class (``envs.experts.get_expert("robosuite", task, env)``)
ROBOSUITE_EXPERTS = {"Lift": LiftExpert, "Stack": StackExpert}
