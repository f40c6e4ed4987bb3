"""The env protocol: what every robot environment of vla-rl provides.

An env is a :class:`gymnasium.Env` whose observation is a dict::

    {
        "images": {camera_name: uint8 array (H, W, 3)},   # upright, RGB
        "state": float32 array (state_dim,),              # proprioception only
        "instruction": str,                               # the language instruction
    }

and whose action space is a ``Box`` in the robot's own units. ``step`` reports
``info["is_success"]`` (bool) every step. ``reset`` accepts::

    options = {"task": "lift", "init_state": <a value from info["init_state"]>}

``info["init_state"]`` (returned by ``reset``) restores the very same initial
state when passed back, so that the envs of a GRPO group can start alike.

Rendering is most of a simulated step's cost, and a chunked policy reads the images only where its
chunk ends. An env may therefore offer to skip them (:attr:`RobotEnv.supports_skipping_images`): while
``skip_images`` is True its ``step`` returns ``images == {}``, and ``observe()`` returns the complete
observation of the current state, the one ``step`` would have returned.

Besides the gymnasium API an env describes itself through :class:`EnvSpec`
(control frequency, cameras, state size, default episode length, tasks), which
the trainer hands to the policy; envs and policies never import each other.
"""

from __future__ import annotations

import operator
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

#: Characters an instruction may contain (gymnasium's Text space needs a charset).
INSTRUCTION_CHARSET = frozenset(string.ascii_letters + string.digits + " ,.'-!?")
INSTRUCTION_MAX_LENGTH = 256


class InvalidActionError(ValueError):
    """Raised by ``step`` for an action that is NaN/inf or has the wrong shape."""


@dataclass(frozen=True)
class EnvSpec:
    """What a policy and the trainer need to know about an env.

    Attributes:
        name: registry name of the env (e.g. ``"tabletop"``).
        task: the task this instance runs.
        tasks: every task the env offers.
        camera_names: cameras in observation order.
        image_size: (height, width) of every camera image.
        state_dim: length of ``obs["state"]``.
        action_low, action_high: bounds of the action Box, robot units, shape (A,).
        action_names: one name per action dimension, e.g. ``("dx", "dy", "dz", "gripper")``.
        control_hz: env steps per simulated second.
        max_episode_steps: default episode length (truncation) of ``task``.
    """

    name: str
    task: str
    tasks: tuple[str, ...]
    camera_names: tuple[str, ...]
    image_size: tuple[int, int]
    state_dim: int
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    action_names: tuple[str, ...]
    control_hz: float
    max_episode_steps: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def action_dim(self) -> int:
        return len(self.action_low)


def image_shape(image_size: int | tuple[int, int]) -> tuple[int, int]:
    """``(height, width)`` of an ``image_size`` given as one int (square) or a pair."""
    if isinstance(image_size, int):
        return (image_size, image_size)
    height, width = image_size
    return (int(height), int(width))


def make_observation_space(
    camera_names: tuple[str, ...], image_size: tuple[int, int], state_dim: int
) -> gym.spaces.Dict:
    """The observation space every env of the protocol declares."""
    height, width = image_size
    images = gym.spaces.Dict(
        {
            name: gym.spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8)
            for name in camera_names
        }
    )
    return gym.spaces.Dict(
        {
            "images": images,
            "state": gym.spaces.Box(-np.inf, np.inf, shape=(state_dim,), dtype=np.float32),
            "instruction": gym.spaces.Text(
                max_length=INSTRUCTION_MAX_LENGTH, min_length=1, charset=INSTRUCTION_CHARSET
            ),
        }
    )


def validate_action(action: Any, action_space: gym.spaces.Box) -> np.ndarray:
    """Return ``action`` as float array of the space's shape, clipped to its bounds.

    Raises:
        InvalidActionError: wrong shape, or a NaN/inf entry, with what was expected.
    """
    array = np.asarray(action, dtype=np.float64)
    if array.shape != action_space.shape:
        raise InvalidActionError(
            f"action has shape {array.shape}, expected {action_space.shape} "
            f"(bounds low={action_space.low.tolist()}, high={action_space.high.tolist()})"
        )
    if not np.all(np.isfinite(array)):
        bad = np.flatnonzero(~np.isfinite(array)).tolist()
        raise InvalidActionError(
            f"action contains NaN or inf at index {bad}: {array.tolist()}; "
            "check the policy output (an unnormalisation with zero std gives this)"
        )
    return np.clip(array, action_space.low, action_space.high)


class RobotEnv(gym.Env):
    """Base class of protocol envs: subclasses set ``spec_info`` and the two spaces.

    Subclasses implement ``reset`` and ``step`` with the observation and info
    layout of the module docstring, and ``tasks`` (class attribute or property).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    env_spec: EnvSpec
    #: Whether ``step`` honours ``skip_images`` and ``observe`` is implemented (see the module docstring).
    supports_skipping_images: bool = False
    skip_images: bool = False
    _elapsed_steps: int = 0

    def observe(self) -> dict[str, Any]:
        """The complete observation of the current state (envs that support skipping images)."""
        raise NotImplementedError(f"{type(self).__name__} does not support skipping images")

    @staticmethod
    def check_render_mode(render_mode: str | None) -> None:
        """Raise a ValueError unless ``render_mode`` is one the envs support: None or ``"rgb_array"``."""
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode {render_mode!r} is not supported; use None or 'rgb_array'")

    @staticmethod
    def task_of_reset(
        options: dict[str, Any],
        init_state: dict[str, Any] | None,
        same: Callable[[str, str], bool] = operator.eq,
    ) -> str | None:
        """The task ``reset(options=...)`` runs: the task of the (checked) init state ``init_state`` when there is
        one, else ``options["task"]`` (None: the current task).

        Raises:
            ValueError: both name a task and ``same(options["task"], init_state["task"])`` is False.
        """
        task = options.get("task")
        if init_state is None:
            return task
        if task is not None and not same(task, init_state["task"]):
            raise ValueError(
                f"options['task']={task!r} contradicts init_state['task']={init_state['task']!r}; "
                "pass only one of them or make them agree"
            )
        return init_state["task"]

    @property
    def elapsed_steps(self) -> int:
        """Steps since the last ``reset`` (subclasses count them in ``_elapsed_steps``)."""
        return self._elapsed_steps

    @property
    def control_hz(self) -> float:
        return self.env_spec.control_hz

    @property
    def camera_names(self) -> tuple[str, ...]:
        return self.env_spec.camera_names

    @property
    def max_episode_steps(self) -> int:
        return self.env_spec.max_episode_steps


class WrappedSimulatorEnv(RobotEnv):
    """A protocol env around another package's simulator (``_inner``: robosuite, MetaWorld, LIBERO), whose
    cameras our own renderer (``_renderer``) draws; closing releases both, and a rebuild closes them first."""

    _inner: Any = None
    _renderer: Any = None
    _needs_reset: bool = True

    def checked_action(self, action: Any) -> np.ndarray:
        """``action`` as :func:`validate_action` returns it, after checking that the episode was reset (since the
        last task switch)."""
        if self._needs_reset:
            raise RuntimeError("call reset() before step() (and after switching tasks)")
        return validate_action(action, self.action_space)

    def close(self) -> None:
        self._close_inner()

    def _close_inner(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        if self._inner is not None:
            self._inner.close()
            self._inner = None
