"""Where a MetaWorld camera image's time goes on CPU: ms per 64 px image for each renderer setting.

Run: ``python research/metaworld_render_costs.py [TASK] [ROUNDS]``. Each round times every setting in
turn on the same state (a busy machine slows them alike; every other round in reverse order), each
camera on its own; prints, as JSON, the
median and [min, max] over rounds of the wall-clock ms and of the CPU ms (``time.process_time``, which
counts llvmpipe's threads: the per-core figure) per image, and the fraction of pixels each setting
changes against the env's default rendering.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

from envs.builtin.rendering import CameraRenderer
from envs.metaworld.env import DEFAULT_CAMERAS, make_metaworld_env

IMAGES = 20  # per setting, camera and round (4 for the slow "high" quality)
#: name -> (quality, mesh_cell, geom groups drawn (None: MuJoCo's default 0-2), skip_unseen, plane_grid)
SETTINGS = {
    "metaworld_default_shadows_reflections_4x_msaa": ("high", None, None, False, None),
    "fast_no_shadows_reflections_msaa": ("fast", None, None, False, None),
    "fast_meshes_1cm (the default before issue 24's culling)": ("fast", 0.01, None, False, None),
    "fast_meshes_1cm_skip_unseen": ("fast", 0.01, None, True, None),
    "fast_meshes_1cm_floor_1m": ("fast", 0.01, None, False, 1.0),
    "fast_meshes_1cm_skip_unseen_floor_1m (default)": ("fast", 0.01, None, True, 1.0),
    "fast_meshes_2cm_skip_unseen_floor_1m": ("fast", 0.02, None, True, 1.0),
    "fast_without_arm_meshes": ("fast", None, (0, 2, 3, 4, 5), False, None),
}
DEFAULT = "fast_meshes_1cm_skip_unseen_floor_1m (default)"


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "range": [round(min(values), 3), round(max(values), 3)]}


def main(task: str = "pick-place-v3", rounds: int = 3) -> dict:
    env = make_metaworld_env(task=task, cameras=())
    env.reset(seed=0)
    for step in range(20):  # the arm away from its start, the object in view
        env.step(np.array([0.005, 0.005, -0.005, 1.0 if step > 10 else -1.0], dtype=np.float32))
    renderers = {}
    for name, (quality, cell, groups, skip, grid) in SETTINGS.items():
        renderer = CameraRenderer(env.model, (64, 64), quality, cell, skip_unseen=skip, plane_grid=grid)
        renderer.render(env.data, DEFAULT_CAMERAS[0])
        if groups is not None:
            renderer._option.geomgroup[:] = [int(g in groups) for g in range(6)]
        renderers[name] = renderer
    reference = {camera: renderers[DEFAULT].render(env.data, camera) for camera in DEFAULT_CAMERAS}
    changed = {
        name: {camera: round(float(np.any(r.render(env.data, camera) != reference[camera], axis=-1).mean()), 4)
               for camera in DEFAULT_CAMERAS}
        for name, r in renderers.items()
    }  # fmt: skip
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for round_index in range(rounds):
        order = list(renderers.items())
        for name, renderer in order if round_index % 2 == 0 else order[::-1]:  # drift hits both ends alike
            images = 4 if renderer.quality == "high" else IMAGES
            for camera in DEFAULT_CAMERAS:
                start, cpu_start = time.perf_counter(), time.process_time()
                for _ in range(images):
                    renderer.render(env.data, camera)
                wall.setdefault(f"{name}/{camera}", []).append((time.perf_counter() - start) / images * 1e3)
                cpu.setdefault(f"{name}/{camera}", []).append((time.process_time() - cpu_start) / images * 1e3)
    for renderer in renderers.values():
        renderer.close()
    faces = int(env.model.mesh_facenum.sum())
    env.close()
    return {
        "task": task, "mesh_triangles": faces, "rounds": rounds, "load_average": os.getloadavg(),
        "cpu_ms_per_image": {key: spread(values) for key, values in cpu.items()},
        "wall_ms_per_image": {key: spread(values) for key, values in wall.items()},
        "pixels_changed_vs_default": changed,
    }  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "pick-place-v3", int(sys.argv[2]) if len(sys.argv) > 2 else 3)))
