"""Envs that go numerically wrong after a few steps, for the tests that non-finite env outputs stop collect and
RL with an error naming the env (not the policy). Used by import path: ``env.id=nan_state:make``."""

from __future__ import annotations

import numpy as np
from point_env import TASKS, PointEnv, PointExpert

#: Env steps after which the state (or the reward) turns NaN.
STEPS_BEFORE_NAN = 3


class NaNStatePointEnv(PointEnv):
    """The point's position (its state) becomes NaN at the STEPS_BEFORE_NAN-th step of an episode."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        if self.steps >= STEPS_BEFORE_NAN:
            self.position = np.full(2, np.nan)
            observation["state"] = self.position.astype(np.float32)
        return observation, reward, terminated, truncated, info


class NaNRewardPointEnv(PointEnv):
    """A finite state, but the reward turns NaN at the STEPS_BEFORE_NAN-th step."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, float("nan") if self.steps >= STEPS_BEFORE_NAN else reward, terminated, truncated, info


def make(task: str = "reach_red", **kwargs) -> NaNStatePointEnv:
    return NaNStatePointEnv(task=task, max_episode_steps=kwargs.pop("max_episode_steps", 8), **kwargs)


def make_nan_reward(task: str = "reach_red", **kwargs) -> NaNRewardPointEnv:
    return NaNRewardPointEnv(task=task, max_episode_steps=kwargs.pop("max_episode_steps", 8), **kwargs)


for _factory in (make, make_nan_reward):
    _factory.tasks = TASKS
    _factory.expert = lambda env, task, **kwargs: PointExpert(env, task, **kwargs)
