"""The conformance kit: checks every env of vla-rl must pass.

``vla-rl envs check NAME[/TASK]`` runs :func:`run_checks`. It runs gymnasium's own
env checker, then our checks of the protocol in :mod:`envs.base`, and stops at the
first failure with a :class:`ConformanceError` that says which check failed and why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from envs.base import EnvSpec, InvalidActionError


class ConformanceError(AssertionError):
    """A conformance check failed; ``check`` names it."""

    def __init__(self, check: str, message: str):
        super().__init__(f"[{check}] {message}")
        self.check = check


@dataclass
class CheckResult:
    name: str
    passed: bool
    detail: str = ""


def _require(condition: bool, check: str, message: str) -> None:
    """Raise ConformanceError(check, message) unless ``condition``."""
    if not condition:
        raise ConformanceError(check, message)


def _observations_equal(first: dict, second: dict) -> bool:
    if first["instruction"] != second["instruction"]:
        return False
    if not np.array_equal(first["state"], second["state"]):
        return False
    if set(first["images"]) != set(second["images"]):
        return False
    return all(np.array_equal(first["images"][k], second["images"][k]) for k in first["images"])


def check_gymnasium_api(env: gym.Env) -> None:
    """gymnasium's own checker (spaces, seeding, step/reset signatures)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)
        # The checker's own notice that rendering is skipped is not a defect.
        warnings.filterwarnings("ignore", message=".*render.*")
        # Unbounded proprioception (a Box with infinite bounds) is legitimate.
        warnings.filterwarnings("ignore", message=".*infinity.*")
        try:
            check_env(env, skip_render_check=True)
        except Exception as error:  # noqa: BLE001 - report any failure of the checker
            raise ConformanceError("gymnasium", f"{type(error).__name__}: {error}") from error


def check_spec(env: gym.Env) -> None:
    """The env describes itself through an EnvSpec that agrees with its spaces."""
    spec = getattr(env, "env_spec", None)
    _require(isinstance(spec, EnvSpec), "spec", "env has no `env_spec` attribute of type envs.base.EnvSpec")
    space = env.observation_space
    _require(isinstance(space, gym.spaces.Dict), "spec", "observation_space must be a Dict")
    for key in ("images", "state", "instruction"):
        _require(key in space.spaces, "spec", f"observation_space lacks key {key!r}")
    _require(
        tuple(space["images"].spaces) == spec.camera_names,
        "spec",
        f"image keys {tuple(space['images'].spaces)} differ from env_spec.camera_names {spec.camera_names}",
    )
    _require(space["state"].shape == (spec.state_dim,), "spec", "state shape differs from env_spec.state_dim")
    action_space = env.action_space
    _require(isinstance(action_space, gym.spaces.Box), "spec", "action_space must be a Box")
    _require(
        np.allclose(action_space.low, spec.action_low) and np.allclose(action_space.high, spec.action_high),
        "spec",
        "action_space bounds differ from env_spec.action_low/high",
    )
    _require(len(spec.action_names) == spec.action_dim, "spec", "one action name per action dimension")
    _require(spec.control_hz > 0, "spec", f"control_hz must be positive, got {spec.control_hz}")
    _require(spec.max_episode_steps > 0, "spec", "max_episode_steps must be positive")


def check_observation(env: gym.Env, seed: int = 0) -> None:
    """Images have the declared shape and dtype and are not blank; the instruction is a string."""
    spec: EnvSpec = env.env_spec
    observation, info = env.reset(seed=seed)
    height, width = spec.image_size
    for camera in spec.camera_names:
        _require(camera in observation["images"], "images", f"camera {camera!r} missing from observation")
        image = observation["images"][camera]
        _require(
            isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.shape == (height, width, 3),
            "images",
            f"camera {camera!r}: expected uint8 {(height, width, 3)}, got "
            f"{getattr(image, 'dtype', type(image))} {getattr(image, 'shape', None)}",
        )
        _require(int(image.max()) - int(image.min()) > 10, "images", f"camera {camera!r} image is blank")
    state = observation["state"]
    _require(state.dtype == np.float32 and state.shape == (spec.state_dim,), "state", "state must be float32")
    _require(bool(np.all(np.isfinite(state))), "state", "state contains NaN or inf")
    instruction = observation["instruction"]
    _require(
        isinstance(instruction, str) and instruction.strip() != "",
        "instruction",
        f"instruction must be a non-empty string, got {instruction!r}",
    )
    _require("init_state" in info, "reset", "reset info lacks 'init_state'")


def check_determinism(env: gym.Env, seed: int = 123, num_steps: int = 5) -> None:
    """The same seed and actions give the same observations."""
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(num_steps)]

    def trajectory() -> list[dict]:
        observation, _ = env.reset(seed=seed)
        observations = [observation]
        for action in actions:
            observation, *_ = env.step(action)
            observations.append(observation)
        return observations

    first, second = trajectory(), trajectory()
    for step, (a, b) in enumerate(zip(first, second, strict=True)):
        _require(_observations_equal(a, b), "determinism", f"observations differ at step {step} for seed {seed}")


def check_success_reported(env: gym.Env, seed: int = 0, num_steps: int = 3) -> None:
    """Every step reports ``info["is_success"]`` as a bool."""
    env.reset(seed=seed)
    for _ in range(num_steps):
        *_, terminated, truncated, info = env.step(env.action_space.sample())
        _require("is_success" in info, "success", "step info lacks 'is_success'")
        _require(
            isinstance(info["is_success"], bool | np.bool_), "success", "info['is_success'] must be a bool"
        )
        if terminated or truncated:
            break


def check_reset_options(env: gym.Env) -> None:
    """``init_state`` restores the initial state; ``task`` selects a task."""
    first, info = env.reset(seed=1)
    other, _ = env.reset(seed=2)
    restored, _ = env.reset(seed=2, options={"init_state": info["init_state"]})
    _require(
        _observations_equal(first, restored),
        "reset-options",
        "reset(options={'init_state': ...}) did not restore the observation of the reset that produced it",
    )
    spec: EnvSpec = env.env_spec
    for task in spec.tasks[:2]:
        _, task_info = env.reset(seed=0, options={"task": task})
        _require(
            task_info.get("task", task) == task, "reset-options", f"options['task']={task!r} was not honoured"
        )
    env.reset(seed=0, options={"task": spec.task})
    del other


def check_bad_actions(env: gym.Env) -> None:
    """NaN and wrong-shape actions raise InvalidActionError with a message."""
    env.reset(seed=0)
    shape = env.action_space.shape
    nan_action = np.full(shape, np.nan, dtype=np.float32)
    wrong_shape = np.zeros((shape[0] + 1,), dtype=np.float32)
    for label, action in (("NaN", nan_action), ("wrong shape", wrong_shape)):
        try:
            env.step(action)
        except InvalidActionError as error:
            _require(len(str(error)) > 10, "bad-action", f"{label} action error has no useful message")
        else:
            raise ConformanceError("bad-action", f"a {label} action was accepted; it must raise InvalidActionError")


CHECKS: dict[str, Callable[[gym.Env], None]] = {
    "spec": check_spec,
    "gymnasium": check_gymnasium_api,
    "observation": check_observation,
    "determinism": check_determinism,
    "success": check_success_reported,
    "reset-options": check_reset_options,
    "bad-action": check_bad_actions,
}


@contextmanager
def _closing(env: gym.Env) -> Iterator[gym.Env]:
    try:
        yield env
    finally:
        env.close()


def run_checks(make_env: Callable[[], gym.Env], report: Callable[[CheckResult], None] | None = None) -> None:
    """Run every check on a fresh env from ``make_env``; raise on the first failure.

    ``report`` is called with each passed (or the failed) check, for progress output.
    """
    for name, check in CHECKS.items():
        try:
            env = make_env()
        except Exception as error:
            if report:
                report(CheckResult("construct", False, f"{type(error).__name__}: {error}"))
            raise ConformanceError("construct", f"building the env raised {type(error).__name__}: {error}") from error
        with _closing(env):
            try:
                check(env)
            except ConformanceError as error:
                if report:
                    report(CheckResult(name, False, str(error)))
                if error.check != name:
                    raise ConformanceError(name, str(error)) from error
                raise
            except Exception as error:  # an exception inside the env itself
                if report:
                    report(CheckResult(name, False, f"{type(error).__name__}: {error}"))
                raise ConformanceError(name, f"the env raised {type(error).__name__}: {error}") from error
        if report:
            report(CheckResult(name, True))
