"""MetaWorld's own scripted policies (``metaworld.policies``) as vla-rl experts, for ``vla-rl collect``.

Each policy reads MetaWorld's privileged (39,) observation (hand, objects, goal) and returns an
action in MetaWorld's normalised units; the expert clips it to [-1, 1] and sends it in the env's robot
units (metres per step and gripper effort). Noise for diverse demonstrations: ``noise_std`` (m) adds
Gaussian noise to every translation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.experts.base import ScriptedExpert
from envs.metaworld.env import INSTALL_HINT


def scripted_policies() -> dict[str, type]:
    """MetaWorld's task name -> scripted policy class (``metaworld.policies.ENV_POLICY_MAP``)."""
    try:
        from metaworld.policies import ENV_POLICY_MAP
    except ImportError as error:
        raise ImportError(f"the metaworld experts need the metaworld package: {INSTALL_HINT} ({error})") from None
    return ENV_POLICY_MAP


class MetaWorldExpert(ScriptedExpert):
    """Drives a :class:`envs.metaworld.env.MetaWorldEnv` with MetaWorld's scripted policy of its task."""

    def __init__(self, env: Any, task: str, noise_std: float = 0.0, seed: int | None = None) -> None:
        policies = scripted_policies()
        if task not in policies:
            raise KeyError(f"metaworld has no scripted policy for task {task!r}; it has: {', '.join(sorted(policies))}")
        self.task = task
        self.policy = policies[task]()
        super().__init__(env, noise_std, seed)
        low, high = self.env.action_space.low, self.env.action_space.high
        self._scale = (high - low) / 2.0

    def act(self, obs: object = None) -> np.ndarray:
        """(4,) action in robot units for the env's current state (``obs`` is not read)."""
        native = np.clip(self.policy.get_action(self.env.metaworld_observation), -1.0, 1.0)
        action = native * self._scale
        if self.noise_std > 0:
            action[:3] += self.rng.normal(0.0, self.noise_std, size=3)
        return np.clip(action, self.env.action_space.low, self.env.action_space.high).astype(np.float32)


def make_expert(env: Any, task: str, noise_std: float = 0.0, seed: int | None = None) -> MetaWorldExpert:
    """The expert of ``task`` (the ``expert`` attribute of :class:`envs.metaworld.env.MetaWorldEnv`)."""
    return MetaWorldExpert(env, task, noise_std=noise_std, seed=seed)
