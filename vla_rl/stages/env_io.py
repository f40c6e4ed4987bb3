"""What a policy is built for: an env's io spec, read from the env itself (SFT and RL build from it)."""

from __future__ import annotations

from typing import Any

from envs.registry import make


def env_io_spec(env_id: str, task: str | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The spec of env ``env_id`` (its ``task``, or its default task for None) as plain data.

    Keys: ``camera_names``, ``image_size`` ([H, W]), ``state_dim``, ``action_low`` / ``action_high`` (A
    floats each), ``max_episode_steps`` and ``control_hz``.
    """
    env = make(env_id if task is None else f"{env_id}/{task}", **kwargs)
    try:
        spec = env.unwrapped.env_spec
        return {
            "camera_names": list(spec.camera_names),
            "image_size": list(spec.image_size),
            "state_dim": spec.state_dim,
            "action_low": list(spec.action_low),
            "action_high": list(spec.action_high),
            "max_episode_steps": spec.max_episode_steps,
            "control_hz": spec.control_hz,
        }
    finally:
        env.close()
