"""Scripted expert of the planar pusher (reached by vla-rl through ``make.expert``).

``push``: get behind the puck on the line from the goal through the puck (going around the puck
when the fingertip is on the wrong side), then push towards the goal while steering back onto
that line. ``reach``: move straight to the puck's near edge.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planar_pusher.env import MAX_DELTA, PUCK_RADIUS, TIP_RADIUS, PlanarPusherEnv

CONTACT = PUCK_RADIUS + TIP_RADIUS
GAIN = 1.0


class PusherExpert:
    """``reset(seed=None)`` after each ``env.reset``; ``act(obs) -> action`` (2,)."""

    def __init__(self, env: PlanarPusherEnv, task: str, noise_std: float = 0.0, seed: int | None = None) -> None:
        self.env = env.unwrapped
        self.task = task
        self.noise_std = float(noise_std)
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, obs: Any = None) -> np.ndarray:
        waypoint = self._push_waypoint() if self.task == "push" else self._reach_waypoint()
        delta = GAIN * (waypoint - self.env.tip_target)
        if self.noise_std > 0:
            delta = delta + self.rng.normal(0.0, self.noise_std, size=2)
        return np.clip(delta, -MAX_DELTA, MAX_DELTA).astype(np.float32)

    def _reach_waypoint(self) -> np.ndarray:
        tip, puck = self.env.tip_position, self.env.puck_position
        direction = (tip - puck) / max(np.linalg.norm(tip - puck), 1e-9)
        return puck + direction * (CONTACT - 0.004)

    def _push_waypoint(self) -> np.ndarray:
        tip, puck, goal = self.env.tip_position, self.env.puck_position, self.env.goal_position
        push_direction = (goal - puck) / max(np.linalg.norm(goal - puck), 1e-9)
        behind = puck - push_direction * (CONTACT + 0.01)
        relative = tip - puck
        along = float(relative @ push_direction)  # > 0: the tip is on the goal side of the puck
        lateral = relative - along * push_direction
        if along > -CONTACT * 0.5:  # wrong side or level with the puck: go around it
            side = lateral / np.linalg.norm(lateral) if np.linalg.norm(lateral) > 1e-6 else np.array(
                [-push_direction[1], push_direction[0]]
            )
            return puck + side * (CONTACT + 0.02) - push_direction * CONTACT
        if np.linalg.norm(tip - behind) > 0.012 and np.linalg.norm(lateral) > 0.008:
            return behind  # line up first
        return puck + push_direction * 0.03  # push through the puck's centre


def make_expert(env: PlanarPusherEnv, task: str, **kwargs: Any) -> PusherExpert:
    """What vla-rl calls to build the expert of ``task`` (``make.expert`` in ``planar_pusher.env``)."""
    if task not in ("push", "reach"):
        raise KeyError(f"no scripted expert for planar_pusher task {task!r}; experts exist for: push, reach")
    return PusherExpert(env, task, **kwargs)
