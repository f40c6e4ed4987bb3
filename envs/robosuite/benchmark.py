"""Speed of a robosuite task env on one core: env steps/s with and without cameras, and the raw
physics limit (``mj_step`` for the substeps of one control step).

Run: ``vla-rl bench env --env robosuite --task Lift``.
"""

from __future__ import annotations

import time

import mujoco
import numpy as np

from envs.robosuite.env import DEFAULT_CAMERAS, make_robosuite_env


def _env_steps_per_second(task: str, cameras: tuple[str, ...], num_steps: int, seed: int) -> float:
    env = make_robosuite_env(task=task, image_size=64, cameras=cameras)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(
        env.action_space.low, env.action_space.high, size=(num_steps, env.action_space.shape[0])
    )
    env.reset(seed=seed)
    env.step(actions[0])  # the first step creates the renderer: not part of the measurement
    episode = 0
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            episode += 1
            env.reset(seed=seed + episode)
    elapsed = time.perf_counter() - start
    env.close()
    return num_steps / elapsed


def _physics_steps_per_second(task: str, num_steps: int, seed: int) -> float:
    env = make_robosuite_env(task=task, cameras=())
    env.reset(seed=seed)
    inner = env.robosuite_env
    substeps = int(round(inner.control_timestep / inner.model_timestep))
    start = time.perf_counter()
    for _ in range(num_steps):
        mujoco.mj_step(env.model, env.data, nstep=substeps)
    elapsed = time.perf_counter() - start
    env.close()
    return num_steps / elapsed


def measure_env_speed(task: str = "Lift", num_steps: int = 500, seed: int = 0) -> dict[str, float]:
    """Random-action throughput of one robosuite env in this process (one core).

    Returns:
        ``steps_per_s_no_camera``, ``steps_per_s_camera`` (agentview + wrist at 64x64),
        ``physics_steps_per_s`` (control steps/s of bare ``mj_step``: the ceiling) and
        ``camera_ratio`` (camera / no camera). Episodes that end are reset (resets included).
    """
    no_camera = _env_steps_per_second(task, (), num_steps, seed)
    camera = _env_steps_per_second(task, DEFAULT_CAMERAS, num_steps, seed)
    physics = _physics_steps_per_second(task, num_steps, seed)
    return {
        "steps_per_s_no_camera": no_camera,
        "steps_per_s_camera": camera,
        "physics_steps_per_s": physics,
        "camera_ratio": camera / no_camera,
    }
