"""Place in bowl: put the named block into the bowl."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from envs.builtin.scene import BOWL_WALL_HEIGHT, TabletopScene
from envs.builtin.tasks.base import TabletopTask, vector_norm
from envs.builtin.tasks.lift import grasp_progress

IN_BOWL_RADIUS = 0.045  # block centre this close to the bowl axis (inner radius 0.055)


class PlaceInBowlTask(TabletopTask):
    """Success: the block rests inside the bowl (centre within 4.5 cm of its axis, below the rim)
    and the fingers have let go of it."""

    name: ClassVar[str] = "place_in_bowl"
    max_episode_steps: ClassVar[int] = 60
    phrasings: ClassVar[tuple[str, ...]] = (
        "put the {block} block in the bowl",
        "place the {block} cube into the bowl",
        "drop the {block} block into the bowl",
        "pick up the {block} block and put it in the bowl",
    )

    def is_success(self, scene: TabletopScene, target: dict[str, str]) -> bool:
        block = scene.block_position(target["block"])
        offset = vector_norm(block[:2] - scene.bowl_position[:2])
        return bool(
            offset < IN_BOWL_RADIUS
            and block[2] < BOWL_WALL_HEIGHT
            and not scene.fingers_touch_block(target["block"])
        )

    def progress(self, scene: TabletopScene, target: dict[str, str]) -> float:
        block = scene.block_position(target["block"])
        above_bowl = scene.bowl_position + np.array([0.0, 0.0, 0.08])
        carried = float(1.0 - np.tanh(5.0 * vector_norm(block - above_bowl)))
        return 0.4 * grasp_progress(scene, target["block"]) + 0.6 * carried
