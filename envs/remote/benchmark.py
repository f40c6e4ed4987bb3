"""The cost of a remote env per step: the same env stepped in this process and through an env server.

Run: ``vla-rl env-server --env tabletop --port 50051 &`` then
``vla-rl bench env --task tabletop/reach --remote 127.0.0.1:50051``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from envs.registry import make
from envs.remote.client import RemoteEnvConfig, connection_to, make_remote_env
from envs.remote.wire import encode


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def _seconds_per_step(env: Any, num_steps: int, seed: int) -> tuple[float, float]:
    """Wall seconds per step over ``num_steps`` random actions (resets at episode ends included), and for a remote
    env the server's seconds inside the env per step over the same span (0 in this process)."""
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    actions = rng.uniform(low, high, size=(num_steps, *low.shape)).astype(low.dtype)
    env.reset(seed=seed)
    connection = getattr(env, "connection", None)
    server_before = connection.server_seconds if connection is not None else 0.0
    started = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - started
    server = (connection.server_seconds - server_before) if connection is not None else 0.0
    return elapsed / num_steps, server / num_steps


def measure_remote_overhead(env_id: str, address: str, num_steps: int = 500, seed: int = 0, repeats: int = 3,
                            kwargs: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """Milliseconds per step of ``env_id`` in this process and through the server at ``address`` (no rate
    limit), alternating rounds; medians and ranges over ``repeats`` rounds, and the reply size of one step.

    ``overhead_ms_per_step`` is what the remote path adds to the simulation itself: the client's time per step
    minus the server's time inside the env (both of the same round), so that it does not depend on how fast
    the two processes happen to simulate on a shared machine. ``local_step_ms`` is the in-process reference."""
    kwargs = dict(kwargs or {})
    local = make(env_id, **kwargs)
    remote = make_remote_env(env_id, RemoteEnvConfig(address), **kwargs)
    try:
        sides: dict[str, tuple[Any, list[float]]] = {"local": (local, []), "remote": (remote, [])}
        in_env_ms = []  # per step, the server's time inside the env of the same remote round
        for round_ in range(repeats):
            for name, (env, times) in sides.items():
                wall, in_env = _seconds_per_step(env, num_steps, seed + round_)
                times.append(wall * 1e3)
                if name == "remote":
                    in_env_ms.append(in_env * 1e3)
        observation, _ = local.reset(seed=seed)
        reply = {"observation": observation, "reward": 0.0, "terminated": False, "truncated": False,
                 "info": {"is_success": False}}  # fmt: skip
        local_ms, remote_ms = sides["local"][1], sides["remote"][1]
        overhead = [r - s for r, s in zip(remote_ms, in_env_ms, strict=True)]
        return {"address": address, "num_steps": num_steps, "repeats": repeats, "kwargs": kwargs,
                "local_step_ms": _summary(local_ms), "remote_step_ms": _summary(remote_ms),
                "server_in_env_ms": _summary(in_env_ms), "overhead_ms_per_step": _summary(overhead),
                "step_reply_bytes": len(encode(reply)),
                "requests": connection_to(RemoteEnvConfig(address)).requests}  # fmt: skip
    finally:
        remote.close()
        local.close()
