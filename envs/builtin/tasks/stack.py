"""Stack: put the named block on top of another named block."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from envs.builtin.scene import BLOCK_HALF_SIZE, TabletopScene
from envs.builtin.tasks.base import TabletopTask, vector_norm
from envs.builtin.tasks.lift import grasp_progress

STACK_XY_TOLERANCE = 0.02


class StackTask(TabletopTask):
    """Success: the top block rests on the base block (centres within 2 cm horizontally, one block
    height apart vertically), the base block is on the table and the fingers have let go."""

    name: ClassVar[str] = "stack"
    max_episode_steps: ClassVar[int] = 60
    phrasings: ClassVar[tuple[str, ...]] = (
        "stack the {block} block on the {base} block",
        "put the {block} cube on top of the {base} cube",
        "place the {block} block onto the {base} block",
    )

    def sample_target(self, rng: np.random.Generator, layout: dict[str, Any]) -> dict[str, str]:
        top, base = rng.choice(len(layout["block_colors"]), size=2, replace=False)
        return {"block": layout["block_colors"][top], "base": layout["block_colors"][base]}

    def is_success(self, scene: TabletopScene, target: dict[str, str]) -> bool:
        top = scene.block_position(target["block"])
        base = scene.block_position(target["base"])
        height = top[2] - base[2]
        return bool(
            vector_norm(top[:2] - base[:2]) < STACK_XY_TOLERANCE
            and abs(height - 2 * BLOCK_HALF_SIZE) < 0.01
            and base[2] < BLOCK_HALF_SIZE + 0.01
            and not scene.fingers_touch_block(target["block"])
        )

    def progress(self, scene: TabletopScene, target: dict[str, str]) -> float:
        top = scene.block_position(target["block"])
        above_base = scene.block_position(target["base"]) + np.array([0.0, 0.0, 2 * BLOCK_HALF_SIZE])
        placed = float(1.0 - np.tanh(5.0 * vector_norm(top - above_base)))
        return 0.4 * grasp_progress(scene, target["block"]) + 0.6 * placed
