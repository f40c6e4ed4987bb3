"""Open drawer / close drawer: the articulated cabinet drawer."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from envs.builtin.scene import DRAWER_RANGE, TabletopScene
from envs.builtin.tasks.base import TabletopTask, reach_progress

OPEN_THRESHOLD = 0.10  # m pulled out (of 0.16)
CLOSED_THRESHOLD = 0.015


class OpenDrawerTask(TabletopTask):
    """Success: the drawer is pulled out at least 10 cm."""

    name: ClassVar[str] = "open_drawer"
    max_episode_steps: ClassVar[int] = 40
    phrasings: ClassVar[tuple[str, ...]] = (
        "open the {drawer} drawer",
        "pull the {drawer} drawer open",
        "slide the {drawer} drawer out",
    )

    def sample_target(self, rng: np.random.Generator, layout: dict[str, Any]) -> dict[str, str]:
        return {"drawer": layout["drawer_color"]}

    def is_success(self, scene: TabletopScene, target: dict[str, str]) -> bool:
        return scene.drawer_opening >= OPEN_THRESHOLD

    def progress(self, scene: TabletopScene, target: dict[str, str]) -> float:
        return 0.3 * reach_progress(scene, scene.handle_position) + 0.7 * scene.drawer_opening / DRAWER_RANGE


class CloseDrawerTask(OpenDrawerTask):
    """The drawer starts 10-16 cm open. Success: it is closed to within 1.5 cm."""

    name: ClassVar[str] = "close_drawer"
    max_episode_steps: ClassVar[int] = 30
    drawer_opening_range: ClassVar[tuple[float, float]] = (0.10, DRAWER_RANGE)
    phrasings: ClassVar[tuple[str, ...]] = (
        "close the {drawer} drawer",
        "push the {drawer} drawer shut",
        "slide the {drawer} drawer closed",
    )

    def is_success(self, scene: TabletopScene, target: dict[str, str]) -> bool:
        return scene.drawer_opening <= CLOSED_THRESHOLD

    def progress(self, scene: TabletopScene, target: dict[str, str]) -> float:
        return 0.3 * reach_progress(scene, scene.handle_position) + 0.7 * (
            1.0 - scene.drawer_opening / DRAWER_RANGE
        )
