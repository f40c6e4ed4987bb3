"""``vla-rl bench env --task planar_pusher.env:make/push``: env steps/s with and without a camera."""

from __future__ import annotations

from envs.benchmark import env_steps_per_second
from planar_pusher.env import make


def measure_env_speed(task: str = "push", num_steps: int = 2000, seed: int = 0) -> dict[str, float]:
    def make_env(cameras: tuple[str, ...]):
        return make(task=task, cameras=cameras)

    no_camera = env_steps_per_second(make_env, (), num_steps, seed)
    camera = env_steps_per_second(make_env, ("top",), num_steps, seed)
    return {"steps_per_s_no_camera": no_camera, "steps_per_s_camera": camera, "camera_ratio": camera / no_camera}
