"""Where a MetaWorld camera image's time goes on CPU: ms per 64 px image for each renderer setting.

Run: ``python scripts/metaworld_render_costs.py [TASK] [ROUNDS]``. Each round times every setting in
turn on the same state (a busy machine slows them alike); prints the median ms per image as JSON.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from envs.builtin.rendering import CameraRenderer
from envs.metaworld.env import make_metaworld_env

IMAGES = 40  # per setting and round, alternating the two default cameras


def main(task: str = "pick-place-v3", rounds: int = 3) -> dict:
    env = make_metaworld_env(task=task, cameras=())
    env.reset(seed=0)
    settings = {  # name -> (quality, mesh_cell, geom groups drawn)
        "metaworld_default_shadows_reflections_4x_msaa": ("high", None, None),
        "fast_no_shadows_reflections_msaa": ("fast", None, None),
        "fast_meshes_1cm": ("fast", 0.01, None),
        "fast_meshes_2cm": ("fast", 0.02, None),
        "fast_without_arm_meshes": ("fast", None, (0, 2, 3, 4, 5)),
    }
    renderers = {}
    for name, (quality, cell, groups) in settings.items():
        renderer = CameraRenderer(env.model, (64, 64), quality, cell)
        renderer.render(env.data, "corner")
        if groups is not None:
            renderer._option.geomgroup[:] = [int(g in groups) for g in range(6)]
        renderers[name] = renderer
    times: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(rounds):
        for name, renderer in renderers.items():
            start = time.perf_counter()
            for index in range(IMAGES):
                renderer.render(env.data, ("corner", "gripperPOV")[index % 2])
            times[name].append((time.perf_counter() - start) / IMAGES * 1e3)
    for renderer in renderers.values():
        renderer.close()
    faces = int(env.model.mesh_facenum.sum())
    env.close()
    return {"task": task, "mesh_triangles": faces, "ms_per_image": {k: round(statistics.median(v), 2) for k, v in times.items()},
            "range": {k: [round(min(v), 2), round(max(v), 2)] for k, v in times.items()}}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "pick-place-v3", int(sys.argv[2]) if len(sys.argv) > 2 else 3)))
