"""Speed of a MuJoCo-based protocol env on one core: env steps/s with and without cameras, with cameras
rendered only where a 4-action chunk ends (envs that support skipping images, as a chunked rollout
steps them), and the raw physics limit (``mj_step`` for the substeps of one control step).

Machines are shared and noisy, so every figure is the median over ``repeats`` rounds, and each round
runs every variant once, in turn, on the same seeded actions (a slow spell hits all variants alike);
``range`` gives [min, max] over the rounds. Each rate is also given per CPU-second of the process
(``steps_per_cpu_s``: ``time.process_time``, which counts every thread of the process, the renderer's
included): on a machine that other jobs share this is the per-core figure, which wall-clock rates
understate by the share of the cores the process did not get.

An env's own benchmark module (registered as ``benchmark`` in :mod:`envs.registry`) calls
:func:`measure_mujoco_env_speed` with its factory and how it finds model, data and substeps.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import mujoco
import numpy as np

MakeEnv = Callable[[tuple[str, ...]], Any]  # cameras -> env (64x64 images)
CHUNK_SIZE = 4  # the default policy's action chunk
Physics = Callable[[Any], tuple[Any, Any, int]]  # env -> (MjModel, MjData, substeps per control step)


def random_actions(env: Any, num_steps: int, seed: int) -> np.ndarray:
    """(num_steps, A) uniform actions in the env's bounds."""
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    return rng.uniform(low, high, size=(num_steps, env.action_space.shape[0]))


def timed_env_steps(env: Any, actions: np.ndarray, seed: int, images_every: int = 1) -> tuple[float, float]:
    """Wall-clock and CPU seconds (``time.process_time``) for ``env`` to step through ``actions`` from
    ``reset(seed)``; episodes that end are reset (resets included in the time). ``images_every`` > 1:
    images only at every ``images_every``-th step (``skip_images`` otherwise; the env must support
    skipping images)."""
    env.reset(seed=seed)
    episode = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for index, action in enumerate(actions):
        if images_every > 1:
            env.unwrapped.skip_images = (index + 1) % images_every != 0
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            episode += 1
            env.reset(seed=seed + episode)
    elapsed = time.perf_counter() - start, time.process_time() - cpu_start
    env.unwrapped.skip_images = False
    return elapsed


def timed_physics_steps(env: Any, physics: Physics, num_steps: int, seed: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds of bare ``mj_step`` for ``num_steps`` control steps from ``reset(seed)``:
    the ceiling."""
    env.reset(seed=seed)
    model, data, substeps = physics(env)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(num_steps):
        mujoco.mj_step(model, data, nstep=substeps)
    return time.perf_counter() - start, time.process_time() - cpu_start


def env_steps_per_second(
    make_env: MakeEnv, cameras: tuple[str, ...], num_steps: int, seed: int, images_every: int = 1
) -> float | None:
    """One measurement of random actions in the bounds (see :func:`timed_env_steps`); None where
    ``images_every`` > 1 and the env does not support skipping images."""
    env = make_env(cameras)
    try:
        if images_every > 1 and not getattr(env.unwrapped, "supports_skipping_images", False):
            return None
        actions = random_actions(env, num_steps, seed)
        env.reset(seed=seed)
        env.step(actions[0])  # the first step may create the renderer: not part of the measurement
        return num_steps / timed_env_steps(env, actions, seed, images_every)[0]
    finally:
        env.close()


def measure_mujoco_env_speed(
    make_env: MakeEnv,
    physics: Physics,
    cameras: tuple[str, ...],
    num_steps: int,
    seed: int,
    repeats: int = 1,
) -> dict[str, Any]:
    """``steps_per_s_no_camera``, ``steps_per_s_camera`` (``cameras`` at 64x64), ``physics_steps_per_s``
    and ``camera_ratio`` (camera / no camera); for envs that support skipping images also
    ``steps_per_s_camera_at_chunk_ends`` and ``chunk_ends_ratio`` (to camera). Rates are medians over
    ``repeats`` rounds and ratios are ratios of those medians; ``range`` maps each rate to [min, max].
    ``steps_per_cpu_s`` maps each rate's key to the same rate per CPU-second of this process (the
    per-core figure), ``cpu_range`` to its [min, max]."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: measure at least one round")
    plain, filmed = make_env(()), make_env(cameras)
    try:
        actions = random_actions(plain, num_steps, seed)
        for env in (plain, filmed):  # the first step may create the renderer: not part of the measurement
            env.reset(seed=seed)
            env.step(actions[0])
        chunked = getattr(filmed.unwrapped, "supports_skipping_images", False)
        seconds: dict[str, list[tuple[float, float]]] = {}
        for _ in range(repeats):
            rounds = {
                "steps_per_s_no_camera": lambda: timed_env_steps(plain, actions, seed),
                "steps_per_s_camera": lambda: timed_env_steps(filmed, actions, seed),
                "physics_steps_per_s": lambda: timed_physics_steps(plain, physics, num_steps, seed),
            }
            if chunked:
                rounds["steps_per_s_camera_at_chunk_ends"] = lambda: timed_env_steps(
                    filmed, actions, seed, images_every=CHUNK_SIZE
                )
            for key, run in rounds.items():
                seconds.setdefault(key, []).append(run())
    finally:
        plain.close()
        filmed.close()
    rates = {key: [num_steps / wall for wall, _ in values] for key, values in seconds.items()}
    cpu_rates = {key: [num_steps / max(cpu, 1e-9) for _, cpu in values] for key, values in seconds.items()}
    result: dict[str, Any] = {key: statistics.median(values) for key, values in rates.items()}
    result["camera_ratio"] = result["steps_per_s_camera"] / result["steps_per_s_no_camera"]
    if chunked:
        result["chunk_ends_ratio"] = result["steps_per_s_camera_at_chunk_ends"] / result["steps_per_s_camera"]
    result["repeats"] = repeats
    result["range"] = {key: [min(values), max(values)] for key, values in rates.items()}
    result["steps_per_cpu_s"] = {key: statistics.median(values) for key, values in cpu_rates.items()}
    result["cpu_range"] = {key: [min(values), max(values)] for key, values in cpu_rates.items()}
    return result
