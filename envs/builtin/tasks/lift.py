"""Lift: pick the named block up off the table."""

from __future__ import annotations

from typing import ClassVar

from envs.builtin.scene import BLOCK_HALF_SIZE, TabletopScene
from envs.builtin.tasks.base import TabletopTask, reach_progress

LIFT_HEIGHT = 0.10  # block centre height (m) that counts as lifted (it rests at 0.02)


def grasp_progress(scene: TabletopScene, color: str) -> float:
    """0..0.5 for approaching, +0.5 once a finger touches the block."""
    near = 0.5 * reach_progress(scene, scene.block_position(color))
    return near + (0.5 if scene.fingers_touch_block(color) else 0.0)


class LiftTask(TabletopTask):
    """Success: the block centre is at least 10 cm above the table, held by the gripper."""

    name: ClassVar[str] = "lift"
    max_episode_steps: ClassVar[int] = 40
    phrasings: ClassVar[tuple[str, ...]] = (
        "pick up the {block} block",
        "lift the {block} cube",
        "grasp the {block} block and lift it",
        "raise the {block} block off the table",
    )

    def is_success(self, scene: TabletopScene, target: dict[str, str]) -> bool:
        color = target["block"]
        return bool(scene.block_position(color)[2] > LIFT_HEIGHT and scene.fingers_touch_block(color))

    def progress(self, scene: TabletopScene, target: dict[str, str]) -> float:
        color = target["block"]
        height = (scene.block_position(color)[2] - BLOCK_HALF_SIZE) / (LIFT_HEIGHT - BLOCK_HALF_SIZE)
        return 0.5 * grasp_progress(scene, color) + 0.5 * min(max(height, 0.0), 1.0)
