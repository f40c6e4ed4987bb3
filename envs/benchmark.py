"""Speed of a MuJoCo-based protocol env on one core: env steps/s with and without cameras, with cameras
rendered only where a 4-action chunk ends (envs that support skipping images, as a chunked rollout
steps them), and the raw physics limit (``mj_step`` for the substeps of one control step).

An env's own benchmark module (registered as ``benchmark`` in :mod:`envs.registry`) calls
:func:`measure_mujoco_env_speed` with its factory and how it finds model, data and substeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np

MakeEnv = Callable[[tuple[str, ...]], Any]  # cameras -> env (64x64 images)
CHUNK_SIZE = 4  # the default policy's action chunk
Physics = Callable[[Any], tuple[Any, Any, int]]  # env -> (MjModel, MjData, substeps per control step)


def env_steps_per_second(
    make_env: MakeEnv, cameras: tuple[str, ...], num_steps: int, seed: int, images_every: int = 1
) -> float | None:
    """Random actions in the bounds; episodes that end are reset (resets included in the time).

    ``images_every`` > 1: images only at every ``images_every``-th step (``skip_images`` otherwise);
    None for an env that does not support skipping images.
    """
    env = make_env(cameras)
    if images_every > 1 and not getattr(env.unwrapped, "supports_skipping_images", False):
        env.close()
        return None
    rng = np.random.default_rng(seed)
    actions = rng.uniform(env.action_space.low, env.action_space.high, size=(num_steps, env.action_space.shape[0]))
    env.reset(seed=seed)
    env.step(actions[0])  # the first step may create the renderer: not part of the measurement
    episode = 0
    start = time.perf_counter()
    for index, action in enumerate(actions):
        if images_every > 1:
            env.unwrapped.skip_images = (index + 1) % images_every != 0
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            episode += 1
            env.reset(seed=seed + episode)
    elapsed = time.perf_counter() - start
    env.close()
    return num_steps / elapsed


def physics_steps_per_second(make_env: MakeEnv, physics: Physics, num_steps: int, seed: int) -> float:
    """Control steps per second of bare ``mj_step`` on the same model: the ceiling."""
    env = make_env(())
    env.reset(seed=seed)
    model, data, substeps = physics(env)
    start = time.perf_counter()
    for _ in range(num_steps):
        mujoco.mj_step(model, data, nstep=substeps)
    elapsed = time.perf_counter() - start
    env.close()
    return num_steps / elapsed


def measure_mujoco_env_speed(
    make_env: MakeEnv, physics: Physics, cameras: tuple[str, ...], num_steps: int, seed: int
) -> dict[str, float]:
    """``steps_per_s_no_camera``, ``steps_per_s_camera`` (``cameras`` at 64x64), ``physics_steps_per_s``
    and ``camera_ratio`` (camera / no camera), all measured in this process; for envs that support
    skipping images also ``steps_per_s_camera_at_chunk_ends`` and ``chunk_ends_ratio`` (to camera)."""
    no_camera = env_steps_per_second(make_env, (), num_steps, seed)
    camera = env_steps_per_second(make_env, cameras, num_steps, seed)
    physics_rate = physics_steps_per_second(make_env, physics, num_steps, seed)
    result = {
        "steps_per_s_no_camera": no_camera,
        "steps_per_s_camera": camera,
        "physics_steps_per_s": physics_rate,
        "camera_ratio": camera / no_camera,
    }
    at_chunk_ends = env_steps_per_second(make_env, cameras, num_steps, seed, images_every=CHUNK_SIZE)
    if at_chunk_ends is not None:
        result["steps_per_s_camera_at_chunk_ends"] = at_chunk_ends
        result["chunk_ends_ratio"] = at_chunk_ends / camera
    return result
