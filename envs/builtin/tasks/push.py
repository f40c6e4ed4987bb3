"""Push: slide the named block into the named flat target zone."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from envs.builtin.scene import TabletopScene
from envs.builtin.tasks.base import OBJECT_REGION, TabletopTask, reach_progress, vector_norm

IN_ZONE_RADIUS = 0.04  # block centre this close to the zone centre (zone radius 0.05)
PUSH_DISTANCE = (0.08, 0.16)
PUSHER_BACKOFF = 0.07  # free space needed behind the block for the gripper
CLEARANCE = {"block": 0.08, "bowl": 0.13}


def _segment_distance(point: np.ndarray, start: np.ndarray, end: np.ndarray) -> float:
    direction = end - start
    t = min(max((point - start).dot(direction) / direction.dot(direction), 0.0), 1.0)
    return vector_norm(point - (start + t * direction))


class PushTask(TabletopTask):
    """Success: the block centre lies within 4 cm of the zone centre. The target zone is placed
    8-16 cm from the block with a clear straight path (the other zone stays where it was sampled)."""

    name: ClassVar[str] = "push"
    max_episode_steps: ClassVar[int] = 50
    phrasings: ClassVar[tuple[str, ...]] = (
        "push the {block} block to the {zone} zone",
        "slide the {block} cube onto the {zone} target",
        "push the {block} block into the {zone} circle",
    )

    def sample_target(self, rng: np.random.Generator, layout: dict[str, Any]) -> dict[str, str]:
        block = str(rng.choice(layout["block_colors"]))
        return {"block": block, "zone": str(rng.choice(layout["zone_colors"]))}

    def adjust_layout(self, rng: np.random.Generator, layout: dict[str, Any], target: dict[str, str]) -> bool:
        index = layout["block_colors"].index(target["block"])
        block = np.array(layout["block_poses"][index][:2])
        obstacles = [("bowl", np.array(layout["bowl_position"]))] + [
            ("block", np.array(pose[:2])) for i, pose in enumerate(layout["block_poses"]) if i != index
        ]
        (x_low, x_high), (y_low, y_high) = OBJECT_REGION
        block_x, block_y = block.tolist()
        for _ in range(2000):
            # plain floats for the cheap rejections: the same arithmetic as on arrays, a third of the time
            angle = rng.uniform(-np.pi, np.pi)
            cos, sin = float(np.cos(angle)), float(np.sin(angle))  # numpy's, not math's: as before
            distance = rng.uniform(*PUSH_DISTANCE)
            zone_x, zone_y = block_x + distance * cos, block_y + distance * sin
            pusher_x, pusher_y = block_x - PUSHER_BACKOFF * cos, block_y - PUSHER_BACKOFF * sin
            if not (x_low <= zone_x <= x_high and y_low <= zone_y <= y_high):
                continue
            if not (0.22 <= pusher_x <= 0.6 and -0.3 <= pusher_y <= 0.3):
                continue
            zone, pusher = np.array([zone_x, zone_y]), np.array([pusher_x, pusher_y])
            if all(_segment_distance(p, pusher, zone) > CLEARANCE[kind] for kind, p in obstacles):
                layout["zone_positions"][layout["zone_colors"].index(target["zone"])] = zone.round(5).tolist()
                return True
        return False  # boxed in: the layout is sampled again

    def is_success(self, scene: TabletopScene, target: dict[str, str]) -> bool:
        block = scene.block_position(target["block"])
        return bool(vector_norm(block[:2] - scene.zone_position(target["zone"])[:2]) < IN_ZONE_RADIUS)

    def progress(self, scene: TabletopScene, target: dict[str, str]) -> float:
        block = scene.block_position(target["block"])
        to_zone = float(1.0 - np.tanh(5.0 * vector_norm(block[:2] - scene.zone_position(target["zone"])[:2])))
        return 0.3 * reach_progress(scene, block) + 0.7 * to_zone
