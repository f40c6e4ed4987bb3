"""The point env of ``point_env`` with a deliberately slow ``step`` (``delay_s`` seconds): a remote simulator
whose own speed, not the rate limit, can set the pace (tests of the env server)."""

from __future__ import annotations

import time

from point_env import TASKS, PointEnv


class SlowPointEnv(PointEnv):
    def __init__(self, task: str = "reach_red", delay_s: float = 0.0, **kwargs):
        super().__init__(task, **kwargs)
        self.delay_s = delay_s

    def step(self, action):
        time.sleep(self.delay_s)
        return super().step(action)


def make(task: str = "reach_red", delay_s: float = 0.0, image_size: int = 8) -> SlowPointEnv:
    return SlowPointEnv(task, delay_s=delay_s, image_size=image_size)


make.tasks = TASKS
