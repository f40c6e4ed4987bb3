"""Reach: bring the gripper just above the named block."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from envs.builtin.scene import TabletopScene
from envs.builtin.tasks.base import TabletopTask, reach_progress, vector_norm

REACH_HEIGHT = 0.05  # target point: this far above the block centre
REACH_TOLERANCE = 0.03
_ABOVE = np.array([0.0, 0.0, REACH_HEIGHT])


def reach_point(scene: TabletopScene, color: str) -> np.ndarray:
    return scene.block_position(color) + _ABOVE


class ReachTask(TabletopTask):
    """Success: grip site within 3 cm of the point 5 cm above the block centre."""

    name: ClassVar[str] = "reach"
    max_episode_steps: ClassVar[int] = 30
    phrasings: ClassVar[tuple[str, ...]] = (
        "reach the {block} block",
        "move the gripper to the {block} block",
        "go to the {block} cube",
        "put the gripper right above the {block} block",
    )

    def is_success(self, scene: TabletopScene, target: dict[str, str]) -> bool:
        return bool(vector_norm(scene.ee_position - reach_point(scene, target["block"])) < REACH_TOLERANCE)

    def progress(self, scene: TabletopScene, target: dict[str, str]) -> float:
        return reach_progress(scene, reach_point(scene, target["block"]))
