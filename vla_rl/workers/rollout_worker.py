"""Rollout workers: inference copies of the policy that act for the env workers.

A :class:`RolloutWorker` builds the policy once and receives the actor's weights each
iteration (:meth:`set_weights` skips the copy when the version has not changed). Its
sampling is seeded per iteration (:meth:`set_seed`), so that rollouts are reproducible
and a resumed run samples exactly what an uninterrupted one would have.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from vla_rl.runtime.device import resolve_device
from vla_rl.runtime.profiling import PhaseTimer, time_module_forwards
from vla_rl.workers.policy_factory import PolicySpec


def to_numpy_tree(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {key: to_numpy_tree(item) for key, item in value.items()}
    return value


class RolloutWorker:
    """The inference process; wrapped by ``ray.remote`` by the trainer."""

    def __init__(self, policy_spec: PolicySpec, device: str | None = None, num_threads: int | None = None):
        from vla_rl.runtime.process_env import apply_runtime_defaults

        apply_runtime_defaults()
        if num_threads:
            torch.set_num_threads(num_threads)
        self.device = resolve_device(device)
        self.policy = policy_spec.build(self.device).eval()
        self.weights_version = -1
        self.generator = torch.Generator(device=self.device).manual_seed(policy_spec.seed)
        self._profiler = None
        self.timer = PhaseTimer()
        self._forward_hooks: list = []

    def set_weights(self, state_dict: dict[str, torch.Tensor], version: int, changing_only: bool = False) -> bool:
        """Load the actor's weights (all of them, or with ``changing_only`` those training changes, over a full
        set loaded before); returns False (and copies nothing) if ``version`` is current."""
        if version == self.weights_version:
            return False
        if changing_only:
            from vla_rl.workers.weight_sync import load_changing

            if self.weights_version < 0:
                raise RuntimeError("the first weights a rollout worker receives must be complete (changing_only=False)")
            load_changing(self.policy, state_dict)
        else:
            self.policy.load_state_dict(state_dict, strict=True)
        self.weights_version = version
        return True

    def set_seed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    @torch.no_grad()
    def act(self, observation: dict[str, Any], deterministic: bool = False) -> tuple[np.ndarray, dict[str, Any]]:
        """Action chunks ``(B, H, A)`` (env units) and the extras as numpy arrays."""
        with self.timer.phase("act_call"):
            actions, extras = self.policy.act(observation, deterministic=deterministic, generator=self.generator)
            return to_numpy_tree(actions), to_numpy_tree(extras)

    @torch.no_grad()
    def value(self, observation: dict[str, Any]) -> np.ndarray:
        """Critic values ``(B,)`` (for bootstrapping truncated episodes)."""
        with self.timer.phase("value_call"):
            return self.policy.value(observation).cpu().numpy()

    def timings(self, forward_details: bool = False) -> dict[str, dict[str, float]]:
        """Seconds and calls per phase since the last call (``act_call``, ``value_call`` and, once
        ``forward_details`` was asked for, ``forward/<module>`` for the policy's modules); starts again."""
        if forward_details and not self._forward_hooks:
            self._forward_hooks = time_module_forwards(self.policy, self.timer)
        return self.timer.pop()

    def start_profile(self, path: str) -> None:
        from vla_rl.runtime.profiling import start_torch_profiler

        self._profiler = start_torch_profiler(path)

    def stop_profile(self) -> str | None:
        from vla_rl.runtime.profiling import stop_torch_profiler

        path, self._profiler = stop_torch_profiler(self._profiler), None
        return path
