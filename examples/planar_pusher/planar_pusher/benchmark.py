"""``vla-rl bench env --task planar_pusher.env:make/push``: env steps/s with and without a camera."""

from __future__ import annotations

import time

import numpy as np

from planar_pusher.env import make


def _steps_per_second(task: str, cameras: tuple[str, ...], num_steps: int, seed: int) -> float:
    env = make(task=task, cameras=cameras)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(env.action_space.low, env.action_space.high, size=(num_steps, 2))
    env.reset(seed=seed)
    env.step(actions[0])  # creates the renderer
    start = time.perf_counter()
    for episode, action in enumerate(actions):
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset(seed=seed + episode + 1)
    elapsed = time.perf_counter() - start
    env.close()
    return num_steps / elapsed


def measure_env_speed(task: str = "push", num_steps: int = 2000, seed: int = 0) -> dict[str, float]:
    no_camera = _steps_per_second(task, (), num_steps, seed)
    camera = _steps_per_second(task, ("top",), num_steps, seed)
    return {"steps_per_s_no_camera": no_camera, "steps_per_s_camera": camera, "camera_ratio": camera / no_camera}
