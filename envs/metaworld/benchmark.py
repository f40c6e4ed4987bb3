"""Speed of a MetaWorld task env on one core (see :mod:`envs.benchmark`).

Run: ``vla-rl bench env --env metaworld --task pick-place-v3``.
"""

from __future__ import annotations

from envs.benchmark import measure_mujoco_env_speed
from envs.metaworld.env import DEFAULT_CAMERAS, make_metaworld_env


def _physics(env):
    inner = env.unwrapped.metaworld_env
    return env.unwrapped.model, env.unwrapped.data, int(inner.frame_skip)


def measure_env_speed(task: str = "reach-v3", num_steps: int = 500, seed: int = 0, repeats: int = 1) -> dict:
    """Random-action throughput of one MetaWorld env (two 64x64 cameras for the camera figures)."""
    return measure_mujoco_env_speed(
        lambda cameras: make_metaworld_env(task=task, image_size=64, cameras=cameras),
        _physics, DEFAULT_CAMERAS, num_steps, seed, repeats,
    )  # fmt: skip
