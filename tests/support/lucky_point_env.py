"""The point env of :mod:`point_env` with luck: each step succeeds with a task's own probability, drawn from the
env's seeded generator whatever the action, so that an untrained policy's rollouts hold successes and failures
of every task (the task pools and the success replay need both), reproducibly from the reset seeds."""

from __future__ import annotations

from point_env import TASKS, PointEnv

#: The chance that one step of a task succeeds (and ends the episode).
SUCCESS_PER_STEP = {"reach_red": 0.25, "reach_blue": 0.1}


class LuckyPointEnv(PointEnv):
    def step(self, action):
        observation, _, _, truncated, info = super().step(action)
        success = bool(self.np_random.random() < SUCCESS_PER_STEP[self.task])
        return observation, float(success), success, truncated and not success, {**info, "is_success": success}


def make(task: str = "reach_red", **kwargs) -> LuckyPointEnv:
    return LuckyPointEnv(task=task, **kwargs)


make.tasks = TASKS
