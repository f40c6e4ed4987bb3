"""Fixed scenes: one nominal layout per task, perturbed a little at every reset (as LIBERO does).

LIBERO (Liu et al. 2023, arXiv 2306.03310) gives every task one scene: the same objects, the same
instruction, and initial object poses drawn from small regions around fixed places. piRL's few-shot
results (arXiv 2510.25889) are measured on it. ``fixed_scenes=True`` of the tabletop env makes the
built-in suite work the same way: the nominal layout of a task is ``sample_layout`` under a fixed
seed (``scene_seed`` and the task's name) with the gripper starting at its home position (the
middle of the start box, as LIBERO's robot starts from one joint configuration), and every reset moves the blocks, bowl, zones and the
gripper's start by up to ``scene_jitter`` metres in x and y (uniformly; the gripper also in z) and turns
the blocks by up to ``BLOCK_YAW_PER_JITTER * scene_jitter`` (0.15 rad at the default 3 cm). Colours, target and instruction stay those of the nominal
scene.
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from envs.builtin.tasks.base import (
    EE_START_HIGH,
    EE_START_LOW,
    OBJECT_REGION,
    TabletopTask,
    far_enough,
    sample_layout,
)

BLOCK_YAW_PER_JITTER = 5.0  # rad of block yaw jitter per metre of position jitter
MAX_SCENE_JITTER = 0.1  # m: beyond this the scene is no longer "fixed"; use the random layouts
EE_HOME = (np.asarray(EE_START_LOW) + np.asarray(EE_START_HIGH)) / 2.0
NOMINAL_MARGIN = 1.0  # the nominal scene keeps objects this many jitters further apart than required


def check_scene_jitter(scene_jitter: float) -> float:
    jitter = float(scene_jitter)
    if not 0.0 <= jitter <= MAX_SCENE_JITTER:
        raise ValueError(
            f"scene_jitter={scene_jitter!r} must lie in [0, {MAX_SCENE_JITTER}] metres "
            "(for scenes that vary more, set fixed_scenes=false)"
        )
    return jitter


def nominal_layout(
    task: TabletopTask, scene_seed: int, block_colors: Sequence[str] | None, scene_jitter: float
) -> dict[str, Any]:
    """The task's fixed scene: the first layout under the seed whose objects stay apart under jitter."""
    seed = [int(scene_seed), zlib.crc32(task.name.encode())]
    rng = np.random.default_rng(seed)
    for _ in range(1000):
        layout = sample_layout(rng, task, block_colors)
        if _objects_apart(_object_points(layout), extra=NOMINAL_MARGIN * scene_jitter):
            layout["ee_start"] = EE_HOME.tolist()
            return layout
    raise RuntimeError(
        f"no nominal {task.name!r} scene keeps its objects apart under scene_jitter={scene_jitter}; "
        "use a smaller jitter"
    )


def jitter_layout(rng: np.random.Generator, nominal: dict[str, Any], scene_jitter: float) -> dict[str, Any]:
    """A copy of ``nominal`` with objects and the gripper start moved by up to ``scene_jitter`` (m).

    Objects are moved again (rejection sampling) until they keep the spacing of the random layouts.
    """
    layout = copy.deepcopy(nominal)
    points = _object_points(nominal)
    for _ in range(1000):
        moved = [(kind, point + rng.uniform(-scene_jitter, scene_jitter, size=2)) for kind, point in points]
        if _objects_apart(moved, extra=0.0) and _inside_region(moved, scene_jitter):
            break
    else:  # unreachable for the margins of nominal_layout; kept so a bad nominal scene fails loudly
        raise RuntimeError(f"could not jitter the {nominal['task']!r} scene without overlap")
    xy = [point.round(5).tolist() for _, point in moved]
    layout["bowl_position"] = xy[0]
    blocks = len(nominal["block_poses"])
    for index, pose in enumerate(layout["block_poses"]):
        yaw_jitter = BLOCK_YAW_PER_JITTER * scene_jitter
        yaw = pose[2] + rng.uniform(-yaw_jitter, yaw_jitter)
        layout["block_poses"][index] = [*xy[1 + index], round(float(yaw), 5)]
    layout["zone_positions"] = xy[1 + blocks :]
    ee_start = np.asarray(nominal["ee_start"]) + rng.uniform(-scene_jitter, scene_jitter, size=3)
    layout["ee_start"] = np.clip(ee_start, EE_START_LOW, EE_START_HIGH).round(5).tolist()
    return layout


def _object_points(layout: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """(kind, xy) of the bowl, the blocks and the zones, in that order."""
    points = [("bowl", np.asarray(layout["bowl_position"], dtype=float))]
    points += [("block", np.asarray(pose[:2], dtype=float)) for pose in layout["block_poses"]]
    points += [("zone", np.asarray(xy, dtype=float)) for xy in layout["zone_positions"]]
    return points


def _objects_apart(points: list[tuple[str, np.ndarray]], extra: float) -> bool:
    return all(far_enough(point, points[:index], kind, extra) for index, (kind, point) in enumerate(points))


def _inside_region(points: list[tuple[str, np.ndarray]], scene_jitter: float) -> bool:
    """Objects stay on the table region, widened by the jitter (a nominal object may sit on its edge)."""
    (x_low, x_high), (y_low, y_high) = OBJECT_REGION
    return all(
        x_low - scene_jitter <= x <= x_high + scene_jitter and y_low - scene_jitter <= y <= y_high + scene_jitter
        for _, (x, y) in points
    )
