"""envs/benchmark.py counts CPU time as well as wall-clock time: a step that waits costs wall time only."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

from envs.benchmark import timed_env_steps


class WaitingEnv:
    """Each step sleeps (wall-clock time, no CPU) or spins (CPU) for ``seconds``."""

    def __init__(self, seconds: float, spin: bool) -> None:
        self.seconds, self.spin = seconds, spin
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,))
        self.unwrapped = self
        self.skip_images = False

    def reset(self, seed=None):
        return {}, {}

    def step(self, action):
        if self.spin:
            end = time.process_time() + self.seconds
            while time.process_time() < end:
                pass
        else:
            time.sleep(self.seconds)
        return {}, 0.0, False, False, {}


def test_timed_env_steps_returns_wall_and_cpu_seconds():
    actions = np.zeros((20, 1))
    wall, cpu = timed_env_steps(WaitingEnv(0.005, spin=False), actions, seed=0)
    assert wall >= 20 * 0.005 and cpu < wall / 2  # sleeping takes no CPU
    wall, cpu = timed_env_steps(WaitingEnv(0.002, spin=True), actions, seed=0)
    assert cpu >= 20 * 0.002 and wall >= cpu * 0.9  # spinning does (one thread: CPU <= wall, up to clock steps)
