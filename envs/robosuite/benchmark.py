"""Speed of a robosuite task env on one core (see :mod:`envs.benchmark`).

Run: ``vla-rl bench env --env robosuite --task Lift``.
"""

from __future__ import annotations

from envs.benchmark import measure_mujoco_env_speed
from envs.robosuite.env import DEFAULT_CAMERAS, make_robosuite_env


def _physics(env):
    inner = env.robosuite_env
    return env.model, env.data, int(round(inner.control_timestep / inner.model_timestep))


def measure_env_speed(task: str = "Lift", num_steps: int = 500, seed: int = 0) -> dict[str, float]:
    """Random-action throughput of one robosuite env (agentview + wrist at 64x64 for the camera figure)."""
    return measure_mujoco_env_speed(
        lambda cameras: make_robosuite_env(task=task, image_size=64, cameras=cameras),
        _physics, DEFAULT_CAMERAS, num_steps, seed,
    )  # fmt: skip
