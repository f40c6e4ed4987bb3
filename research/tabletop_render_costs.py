"""Where a step of the built-in tabletop env goes on one core: physics, the env's Python, resets, and each
camera image split into MuJoCo's scene update, its draw (``mjr_render``) and the read-back
(``mjr_readPixels``, where llvmpipe finishes rasterising), rendered where a chunk ends as a rollout does
(between physics steps, whose work leaves the renderer's caches cold: the same images cost about half as
much back to back).

Everything is timed inside one rollout of random actions, as ``vla-rl bench env`` steps the env: the physics
is the env's own ``mj_step`` calls while the arm moves (an arm at rest costs about 6% less, so physics timed
apart from the rollout would leave part of the physics in "the env's Python"), and resets, which render their
observation, are counted per step, as the bench counts them.

Run: ``python research/tabletop_render_costs.py [TASK] [ROUNDS]``. Prints JSON: microseconds per control
step of physics and of the env's Python (``env.step`` without images, less its physics), microseconds per
64 px image for each phase and per reset, the steps per second at chunk ends that these imply (two cameras
every ``chunk_size`` steps, resets included) and the ceiling with no Python and no resets (physics and
images alone); median and [min, max] over rounds. The env's own images, with its renderer's settings
(``render_quality=fast``).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import mujoco
import numpy as np

from envs.builtin.tabletop import make_tabletop_env

STEPS = 3000  # per round, for the physics and the env step
CHUNK_SIZE = 4  # the default policy's: images at every 4th step


def spread(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 1),
        "range": [round(min(values), 1), round(max(values), 1)],
    }


def time_chunked_steps(env, steps: int, rng: np.random.Generator) -> dict[str, float]:
    """As a chunked rollout steps the env: ``CHUNK_SIZE - 1`` steps without images, then one step whose
    images are rendered, each camera's phases timed on their own; episodes that end are reset (with their
    images). Microseconds per step (``physics``, the env's Python), per image (its phases) and per reset."""
    renderer, model, data = env._renderer, env.model, env.data
    pixels = np.empty((*renderer.image_shape, 3), np.uint8)
    actions = rng.uniform(env.action_space.low, env.action_space.high, (steps, *env.action_space.shape))
    totals = {
        "env_step": 0.0,
        "physics": 0.0,
        "reset": 0.0,
        "scene_update": 0.0,
        "draw": 0.0,
        "read_back": 0.0,
    }
    advance_physics = env._advance_physics

    def timed_physics() -> None:
        started = time.perf_counter()
        advance_physics()
        totals["physics"] += time.perf_counter() - started

    env._advance_physics = timed_physics
    images = resets = 0
    try:
        for index, action in enumerate(actions):
            started = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            totals["env_step"] += time.perf_counter() - started
            if (index + 1) % CHUNK_SIZE == 0:
                for name in env._cameras:
                    camera = renderer._camera(name)
                    t0 = time.perf_counter()
                    mujoco.mjv_updateScene(model, data, renderer._option, None, camera,
                                           mujoco.mjtCatBit.mjCAT_ALL.value, renderer._scene)  # fmt: skip
                    t1 = time.perf_counter()
                    renderer._gl_context.make_current()
                    mujoco.mjr_render(renderer._rect, renderer._scene, renderer._mjr_context)
                    t2 = time.perf_counter()
                    mujoco.mjr_readPixels(pixels, None, renderer._rect, renderer._mjr_context)
                    t3 = time.perf_counter()
                    totals["scene_update"] += t1 - t0
                    totals["draw"] += t2 - t1
                    totals["read_back"] += t3 - t2
                    images += 1
            if terminated or truncated:
                started = time.perf_counter()
                env.reset(seed=int(rng.integers(1 << 30)))
                totals["reset"] += time.perf_counter() - started
                resets += 1
    finally:
        del env._advance_physics  # the method again
    return {
        "physics_us_per_step": totals["physics"] / steps * 1e6,
        "env_python_us_per_step": (totals["env_step"] - totals["physics"]) / steps * 1e6,
        "reset_us": totals["reset"] / max(resets, 1) * 1e6,
        "steps_per_reset": steps / max(resets, 1),
        **{
            f"image_{phase}_us": totals[phase] / images * 1e6
            for phase in ("scene_update", "draw", "read_back")
        },
    }


def main(task: str = "reach", rounds: int = 5, steps: int = STEPS) -> dict:
    env = make_tabletop_env(task=task, image_size=64, cameras=["front", "wrist"])
    env.skip_images = True  # env.step without images; the images are timed on their own
    env.reset(seed=0)
    env._renderer.render(env.data, "front")  # the GL context, first draw
    rng = np.random.default_rng(0)
    per_round: dict[str, list[float]] = {}
    cameras = len(env._cameras)
    for _ in range(rounds):
        figures = time_chunked_steps(env, steps, rng)
        figures["image_us"] = sum(value for key, value in figures.items() if key.startswith("image_"))
        images_per_step = cameras * figures["image_us"] / CHUNK_SIZE
        per_step = (figures["physics_us_per_step"] + figures["env_python_us_per_step"] + images_per_step
                    + figures["reset_us"] / figures["steps_per_reset"])  # fmt: skip
        figures["implied_steps_per_s_at_chunk_ends"] = 1e6 / per_step
        figures["ceiling_steps_per_s_physics_and_images"] = 1e6 / (
            figures["physics_us_per_step"] + images_per_step
        )
        for key, value in figures.items():
            per_round.setdefault(key, []).append(value)
    geoms_drawn = int(env._renderer._scene.ngeom)
    env.close()
    return {"task": task, "rounds": rounds, "chunk_size": CHUNK_SIZE, "cameras": len(env._cameras),
            "geoms_drawn": geoms_drawn,
            **{key: spread(values) for key, values in per_round.items()}}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(*(sys.argv[1:2] or ["reach"]), *(int(a) for a in sys.argv[2:3])), indent=1))
