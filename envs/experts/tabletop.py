"""Scripted experts for the tabletop tasks: state machines over privileged scene state.

Each expert walks through *phases*; a phase has a target for the grip site (recomputed every step
from the current scene, so it follows objects that move), a gripper command, a tolerance for the
actual grip site and a minimum number of steps. The action moves the env's end-effector target
towards the phase target by at most the action bound per step.

Noise for diverse demonstrations: ``noise_std`` (m) adds Gaussian noise to every position delta
and offsets each episode's waypoints (grasp points, travel height) by a few millimetres.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from envs.builtin.scene import BLOCK_HALF_SIZE
from envs.builtin.tabletop import MAX_POSITION_DELTA, TabletopEnv
from envs.experts.base import ScriptedExpert
from envs.experts.phases import Phase, PhaseSequence

OPEN, CLOSED = -1.0, 1.0
TRAVEL_HEIGHT = 0.14
PHASE_TIMEOUT = 20  # steps; a phase that cannot reach its tolerance moves on


class TabletopExpert(ScriptedExpert):
    """Base class: subclasses implement ``phases()``."""

    env: TabletopEnv

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (call after ``env.reset``); ``seed`` re-seeds the noise of this episode."""
        super().reset(seed)
        self.sequence = PhaseSequence(PHASE_TIMEOUT)
        scale = min(self.noise_std, 0.01)
        self.offset = (
            np.clip(self.rng.normal(0.0, scale, size=3), -0.008, 0.008) if scale > 0 else np.zeros(3)
        )
        self.offset[2] = 0.0
        self.travel_height = TRAVEL_HEIGHT + (self.rng.uniform(-0.02, 0.02) if scale > 0 else 0.0)

    def phases(self) -> list[Phase]:
        raise NotImplementedError

    def act(self, obs: object = None) -> np.ndarray:
        """Next action (A,) for the env (position delta, optional zero yaw delta, gripper)."""
        phase, target = self.sequence.advance(self.phases, lambda: self.env.ee_position)
        delta = np.clip(target - self.env.ee_target, -MAX_POSITION_DELTA, MAX_POSITION_DELTA)
        if self.noise_std > 0:
            delta = delta + self.rng.normal(0.0, self.noise_std, size=3)
        delta = np.clip(delta, -MAX_POSITION_DELTA, MAX_POSITION_DELTA)
        yaw = [0.0] if self.env.control_yaw else []
        return np.array([*delta, *yaw, phase.gripper], dtype=np.float32)

    # ----------------------------------------------------------------- shared building blocks
    def block(self, color: str) -> np.ndarray:
        return self.env.scene.block_position(color)

    def above(
        self, point_fn: Callable[[], np.ndarray], height: float | None = None
    ) -> Callable[[], np.ndarray]:
        def target() -> np.ndarray:
            point = point_fn().copy()
            point[2] = self.travel_height if height is None else height
            return point

        return target

    def pick_phases(self, color: str) -> list[Phase]:
        """Move above the block, descend open, close, lift to travel height."""
        grasp = lambda: self.block(color) + self.offset  # noqa: E731
        held_at = {}

        def lift_target() -> np.ndarray:
            start = held_at.setdefault("xy", self.env.ee_position[:2].copy())
            return np.array([start[0], start[1], self.travel_height])

        return [
            Phase(self.above(grasp), OPEN, tolerance=0.02),
            Phase(grasp, OPEN, tolerance=0.01, min_steps=1),
            Phase(lambda: self.env.ee_target, CLOSED, tolerance=None, min_steps=3),
            Phase(lift_target, CLOSED, tolerance=0.03),
        ]

    def place_phases(self, release_point: Callable[[], np.ndarray]) -> list[Phase]:
        """Carry at travel height above the release point, descend, open, move up."""
        return [
            Phase(self.above(release_point), CLOSED, tolerance=0.015),
            Phase(release_point, CLOSED, tolerance=0.01),
            Phase(lambda: self.env.ee_target, OPEN, tolerance=None, min_steps=3),
            Phase(self.above(release_point), OPEN, tolerance=0.02),
        ]


class ReachExpert(TabletopExpert):
    def phases(self) -> list[Phase]:
        color = self.env.task_target["block"]
        return [Phase(lambda: self.block(color) + np.array([0.0, 0.0, 0.05]) + self.offset / 2, OPEN, 0.005)]


class LiftExpert(TabletopExpert):
    def phases(self) -> list[Phase]:
        return self.pick_phases(self.env.task_target["block"])


class PlaceInBowlExpert(TabletopExpert):
    def phases(self) -> list[Phase]:
        release = lambda: self.env.scene.bowl_position + np.array([0.0, 0.0, 0.075]) + self.offset / 2  # noqa: E731
        return self.pick_phases(self.env.task_target["block"]) + self.place_phases(release)


class StackExpert(TabletopExpert):
    def phases(self) -> list[Phase]:
        target = self.env.task_target
        release = lambda: self.block(target["base"]) + np.array([0.0, 0.0, 2 * BLOCK_HALF_SIZE + 0.006])  # noqa: E731
        return self.pick_phases(target["block"]) + self.place_phases(release)


class PushExpert(TabletopExpert):
    """Closed gripper behind the block, pushing it along the block -> zone line; backs off and
    re-approaches when the block slips sideways."""

    CONTACT_BACKOFF = 0.036  # grip site behind the block centre when touching it
    APPROACH_BACKOFF = 0.06
    PUSH_HEIGHT = 0.022
    PUSH_LEAD = 0.02  # target this far past the contact point: pushes at about 0.2 m/s

    def direction(self) -> np.ndarray:
        target = self.env.task_target
        to_zone = self.env.scene.zone_position(target["zone"])[:2] - self.block(target["block"])[:2]
        return np.append(to_zone / max(np.linalg.norm(to_zone), 1e-6), 0.0)

    def point_behind(self, backoff: float) -> np.ndarray:
        point = self.block(self.env.task_target["block"]) - backoff * self.direction()
        point[2] = self.PUSH_HEIGHT
        return point

    def push_target(self) -> np.ndarray:
        ee = self.env.ee_position
        contact = self.point_behind(self.CONTACT_BACKOFF)
        lateral = (ee - contact)[:2] - np.dot((ee - contact)[:2], self.direction()[:2]) * self.direction()[:2]
        if np.linalg.norm(lateral) > 0.012:  # slipped off the line: start the approach again
            self.sequence.index, self.sequence.steps_in_phase = 0, 0
            return self.above(lambda: self.point_behind(self.APPROACH_BACKOFF))()
        return contact + self.PUSH_LEAD * self.direction()

    def phases(self) -> list[Phase]:
        behind = lambda: self.point_behind(self.APPROACH_BACKOFF)  # noqa: E731
        return [
            Phase(self.above(behind, 0.08), CLOSED, tolerance=0.015),
            Phase(behind, CLOSED, tolerance=0.01),
            Phase(self.push_target, CLOSED, tolerance=None, min_steps=10**6),
        ]


class OpenDrawerExpert(TabletopExpert):
    """Hooks the closed fingers between the handle bar and the drawer front, then pulls."""

    HOOK_OFFSET = np.array([0.0275, 0.0, -0.005])

    def hook(self) -> np.ndarray:
        return self.env.scene.handle_position + self.HOOK_OFFSET + self.offset * [0.2, 1.0, 0.0]

    def phases(self) -> list[Phase]:
        pull_from = {}

        def pull_target() -> np.ndarray:  # straight back towards the robot, at full speed
            start = pull_from.setdefault("hook", self.hook())
            return start - np.array([0.25, 0.0, 0.0])

        return [
            Phase(self.above(self.hook, 0.16), CLOSED, tolerance=0.01),
            Phase(self.hook, CLOSED, tolerance=0.008),
            Phase(pull_target, CLOSED, tolerance=None, min_steps=10**6),
        ]


class CloseDrawerExpert(TabletopExpert):
    """Lowers the closed fingers in front of the handle and pushes the drawer in."""

    def in_front(self) -> np.ndarray:
        return self.env.scene.handle_position + np.array([-0.04, 0.0, 0.0]) + self.offset * [0.2, 1.0, 0.0]

    def phases(self) -> list[Phase]:
        return [
            Phase(self.above(self.in_front, 0.16), CLOSED, tolerance=0.015),
            Phase(self.in_front, CLOSED, tolerance=0.01),
            Phase(
                lambda: self.in_front() + np.array([0.06, 0.0, 0.0]), CLOSED, tolerance=None, min_steps=10**6
            ),
        ]


TABLETOP_EXPERTS: dict[str, type[TabletopExpert]] = {
    "reach": ReachExpert,
    "push": PushExpert,
    "lift": LiftExpert,
    "place_in_bowl": PlaceInBowlExpert,
    "stack": StackExpert,
    "open_drawer": OpenDrawerExpert,
    "close_drawer": CloseDrawerExpert,
}


def make_expert(env: TabletopEnv, noise_std: float = 0.0, seed: int | None = None) -> TabletopExpert:
    """The expert of the env's current task (call after ``env.reset``; call ``reset()`` per episode)."""
    task = env.unwrapped.task.name
    if task not in TABLETOP_EXPERTS:
        raise ValueError(
            f"no tabletop expert for task {task!r}; experts exist for {', '.join(TABLETOP_EXPERTS)}"
        )
    return TABLETOP_EXPERTS[task](env, noise_std=noise_std, seed=seed)
