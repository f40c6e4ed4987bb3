"""Scripted expert of the rover (reached by vla-rl through ``make.expert``): turn towards the pad, drive
when facing it, slow down on arrival. It reads the pad's position from the simulator (privileged state)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rover_nav.env import ACTION_HIGH, ACTION_LOW, RoverNavEnv

TURN_GAIN = 4.0
SPEED_GAIN = 1.5


class RoverExpert:
    """``reset(seed=None)`` after each ``env.reset``; ``act(obs) -> action`` (2,)."""

    def __init__(self, env: RoverNavEnv, task: str, noise_std: float = 0.0, seed: int | None = None) -> None:
        self.env = env.unwrapped
        self.noise_std = float(noise_std)
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng(seed)

    def act(self, obs: Any = None) -> np.ndarray:
        x, y, yaw = self.env.pose
        dx, dy = self.env.target - (x, y)
        heading_error = math.remainder(math.atan2(dy, dx) - yaw, 2 * math.pi)
        facing = max(0.0, math.cos(heading_error)) ** 4  # drive only when roughly facing the pad
        action = np.array([SPEED_GAIN * math.hypot(dx, dy) * facing, TURN_GAIN * heading_error])
        if self.noise_std > 0:
            action = action + self.rng.normal(0.0, self.noise_std, size=2)
        return np.clip(action, ACTION_LOW, ACTION_HIGH).astype(np.float32)


def make_expert(env: RoverNavEnv, task: str, **kwargs: Any) -> RoverExpert:
    """What vla-rl calls to build the expert of ``task`` (``make.expert`` in ``rover_nav.env``)."""
    if task not in ("go_to_red", "go_to_blue"):
        raise KeyError(f"no scripted expert for rover_nav task {task!r}; experts exist for: go_to_red, go_to_blue")
    return RoverExpert(env, task, **kwargs)
