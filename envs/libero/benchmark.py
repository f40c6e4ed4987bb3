"""Speed of a LIBERO task env on one core (see :mod:`envs.benchmark`).

Run: ``vla-rl bench env --env libero --task libero_spatial/0``.
"""

from __future__ import annotations

from envs.benchmark import measure_mujoco_env_speed
from envs.libero.env import DEFAULT_CAMERAS, DEFAULT_MESH_CELL, make_libero_env

#: The images of the benchmark: both cameras at 128 px, LIBERO's own size.
IMAGE_SIZE = 128


def _physics(env):
    inner = env.unwrapped.libero_env
    return env.unwrapped.model, env.unwrapped.data, int(round(inner.control_timestep / inner.model_timestep))


def measure_env_speed(
    task: str = "libero_spatial/0", num_steps: int = 300, seed: int = 0, repeats: int = 1,
    mesh_cell: float | None = DEFAULT_MESH_CELL,
) -> dict[str, float]:
    """Random-action throughput of one LIBERO env (agentview + wrist at 128 px for the camera figures)."""
    return measure_mujoco_env_speed(
        lambda cameras: make_libero_env(task=task, image_size=IMAGE_SIZE, cameras=cameras, mesh_cell=mesh_cell),
        _physics, DEFAULT_CAMERAS, num_steps, seed, repeats,
    )  # fmt: skip
