"""Capturing and restoring the initial state of a robosuite episode (``info["init_state"]``).

With soft resets the compiled model stays the same, but robosuite places some fixtures by moving
bodies in the *model* (the Door task moves the door's body), and the objects and robot through
the *data* (free joints, joint angles). The init state therefore holds the full MuJoCo
integration state (``mj_getState(mjSTATE_INTEGRATION)``: time, qpos, qvel, act, warm start,
controls, mocap) plus every body's ``body_pos``/``body_quat``, as JSON-able lists of floats
(a float64 survives a JSON round trip exactly).
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
_KEYS = ("task", "instruction", "physics", "body_pos", "body_quat")


def capture_init_state(model: mujoco.MjModel, data: mujoco.MjData, task: str, instruction: str) -> dict:
    """The init state of the current episode (call right after reset)."""
    physics = np.empty(mujoco.mj_stateSize(model, STATE_SPEC))
    mujoco.mj_getState(model, data, physics, STATE_SPEC)
    return {
        "task": task,
        "instruction": instruction,
        "physics": physics.tolist(),
        "body_pos": model.body_pos.ravel().tolist(),
        "body_quat": model.body_quat.ravel().tolist(),
    }


def check_init_state(init_state: Any, model: mujoco.MjModel, tasks: tuple[str, ...]) -> dict:
    """Validate an init state against ``model``; return it.

    Raises:
        ValueError: not a dict with the keys of :func:`capture_init_state`, an unknown task, or
            arrays whose sizes do not fit the model (an init state of another task or robot).
    """
    if not isinstance(init_state, dict) or any(key not in init_state for key in _KEYS):
        raise ValueError(
            f"init_state must be a dict with keys {list(_KEYS)} as returned in info['init_state'] by reset; "
            f"got {type(init_state).__name__} with keys {sorted(init_state) if isinstance(init_state, dict) else '-'}"
        )
    if init_state["task"] not in tasks:
        raise ValueError(f"init_state['task']={init_state['task']!r} is not one of {', '.join(tasks)}")
    return init_state


def restore_init_state(model: mujoco.MjModel, data: mujoco.MjData, init_state: dict) -> None:
    """Put ``model`` and ``data`` back into the captured state and recompute derived quantities."""
    expected = {
        "physics": mujoco.mj_stateSize(model, STATE_SPEC),
        "body_pos": model.body_pos.size,
        "body_quat": model.body_quat.size,
    }
    for key, size in expected.items():
        if len(init_state[key]) != size:
            raise ValueError(
                f"init_state[{key!r}] has {len(init_state[key])} values but this model needs {size}: "
                f"it was captured with another task, robot or robosuite version (task {init_state['task']!r})"
            )
    model.body_pos[:] = np.asarray(init_state["body_pos"]).reshape(model.body_pos.shape)
    model.body_quat[:] = np.asarray(init_state["body_quat"]).reshape(model.body_quat.shape)
    mujoco.mj_setState(model, data, np.asarray(init_state["physics"], dtype=float), STATE_SPEC)
    mujoco.mj_forward(model, data)
