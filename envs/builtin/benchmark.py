"""Speed of the tabletop env on one core (see :mod:`envs.benchmark`).

Run: ``vla-rl bench env --task reach [--repeats 5]``.
"""

from __future__ import annotations

from typing import Any

from envs.benchmark import measure_mujoco_env_speed
from envs.builtin.tabletop import make_tabletop_env


def measure_env_speed(
    task: str = "reach", num_steps: int = 2000, seed: int = 0, repeats: int = 3
) -> dict[str, Any]:
    """Random-action throughput of one tabletop env (front + wrist cameras at 64x64 for the camera
    figures): medians and ranges over ``repeats`` rounds."""
    return measure_mujoco_env_speed(
        lambda cameras: make_tabletop_env(task=task, image_size=64, cameras=cameras),
        lambda env: (env.model, env.data, env.substeps),
        ("front", "wrist"), num_steps, seed, repeats,
    )  # fmt: skip
