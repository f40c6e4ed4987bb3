"""The conformance kit: checks every env of vla-rl must pass.

``vla-rl envs check NAME[/TASK]`` runs :func:`run_checks`. It checks the protocol of :mod:`envs.base`
first, in vla-rl's own words (the spec, every observation key after reset and after steps), then runs
gymnasium's env checker for the API (with its advice about normalised action spaces and infinite bounds
left out: actions are in the robot's own units), then determinism, ``is_success``, the reset options, init states and infos that
survive JSON, bad actions, and last the env's scripted expert when it has one (its actions' shape and bounds,
success on a few seeds). It stops at the first failure with a :class:`ConformanceError` that says which check failed
and why, in plain text (no terminal colour codes).
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from contract import conformance
from contract.conformance import CheckResult
from envs.base import INSTRUCTION_CHARSET, INSTRUCTION_MAX_LENGTH, EnvSpec, InvalidActionError

ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")
#: The allowed instruction characters, as a user reads them.
CHARSET_TEXT = "ASCII letters, digits, space and , . ' - ! ?"
#: gymnasium's advice that vla-rl's protocol overrules (actions are in robot units; proprioception may be
#: unbounded, action bounds are checked by :func:`check_spec`) and its notice that rendering is skipped.
GYMNASIUM_ADVICE = (".*symmetric and normalized space.*", ".*infinity.*", ".*render.*")
#: Steps of random actions whose observations :func:`check_observation` checks like the reset's.
OBSERVATION_STEPS = 3
#: Seeded episodes the scripted expert plays in :func:`check_expert`; it must succeed on most of them.
EXPERT_SEEDS = (0, 1, 2)
#: How far (absolute) an expert's action may stray outside the action space's bounds (float32 round-off).
BOUNDS_TOLERANCE = 1e-6


def plain(text: str) -> str:
    """``text`` without terminal colour codes (gymnasium colours its warnings)."""
    return ANSI_CODE.sub("", text)


class ConformanceError(conformance.ConformanceError):
    """An env conformance check failed; ``check`` names it (the message without terminal colour codes)."""

    def __init__(self, check: str, message: str):
        super().__init__(check, plain(message))


_require = ConformanceError.require


def _observations_equal(first: dict, second: dict) -> bool:
    if first["instruction"] != second["instruction"]:
        return False
    if not np.array_equal(first["state"], second["state"]):
        return False
    if set(first["images"]) != set(second["images"]):
        return False
    return all(np.array_equal(first["images"][k], second["images"][k]) for k in first["images"])


def check_gymnasium_api(env: gym.Env) -> None:
    """gymnasium's own checker (spaces, seeding, step/reset signatures); its advice is no failure."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)
        for advice in GYMNASIUM_ADVICE:
            warnings.filterwarnings("ignore", message=advice)
        try:
            check_env(env, skip_render_check=True)
        except Exception as error:  # noqa: BLE001 - report any failure of the checker
            raise ConformanceError("gymnasium", f"{type(error).__name__}: {error}") from error


def _bounds_text(space: gym.spaces.Box) -> str:
    return f"low={space.low.tolist()}, high={space.high.tolist()}"


def check_spec(env: gym.Env) -> None:
    """The env describes itself through an EnvSpec that agrees with its spaces; actions are a bounded Box."""
    spec = getattr(env, "env_spec", None)
    _require(isinstance(spec, EnvSpec), "spec", "env has no `env_spec` attribute of type envs.base.EnvSpec")
    space = env.observation_space
    _require(isinstance(space, gym.spaces.Dict), "spec",
             "observation_space must be a gymnasium.spaces.Dict (envs.base.make_observation_space makes one)")  # fmt: skip
    for key in ("images", "state", "instruction"):
        _require(key in space.spaces, "spec", f"observation_space lacks key {key!r} (it needs images, state, instruction; "
                 "envs.base.make_observation_space declares them)")  # fmt: skip
    _require(
        tuple(space["images"].spaces) == spec.camera_names,
        "spec",
        f"image keys {tuple(space['images'].spaces)} differ from env_spec.camera_names {spec.camera_names}",
    )
    _require(space["state"].shape == (spec.state_dim,), "spec", "state shape differs from env_spec.state_dim")
    action_space = env.action_space
    _require(isinstance(action_space, gym.spaces.Box), "spec",
             f"action_space must be a gymnasium.spaces.Box in the robot's own units, got {type(action_space).__name__}")  # fmt: skip
    _require(
        bool(np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))),
        "spec",
        f"action_space is unbounded ({_bounds_text(action_space)}): give finite bounds in the robot's own units "
        "(e.g. Box(-0.03, 0.03) metres per step); vla-rl clips actions to them and scales a policy without "
        "demonstrations by them",
    )
    _require(bool(np.all(action_space.low < action_space.high)), "spec",
             f"action_space bounds must have low < high in every dimension ({_bounds_text(action_space)})")  # fmt: skip
    _require(
        np.allclose(action_space.low, spec.action_low) and np.allclose(action_space.high, spec.action_high),
        "spec",
        "action_space bounds differ from env_spec.action_low/high",
    )
    _require(len(spec.action_names) == spec.action_dim, "spec", "one action name per action dimension")
    _require(spec.control_hz > 0, "spec", f"control_hz must be positive, got {spec.control_hz}")
    _require(spec.max_episode_steps > 0, "spec", "max_episode_steps must be positive")


def observation_problem(observation: Any, spec: EnvSpec) -> str | None:
    """What is wrong with one observation of the protocol (the key and why), or None.

    Images must be uint8 ``(H, W, 3)`` of every camera and not blank; the state float32 ``(state_dim,)`` and
    finite; the instruction a non-empty string of at most INSTRUCTION_MAX_LENGTH characters of
    ``envs.base.INSTRUCTION_CHARSET``.
    """
    if not isinstance(observation, dict):
        return f"the observation must be a dict with keys images, state, instruction, got {type(observation).__name__}"
    missing = [key for key in ("images", "state", "instruction") if key not in observation]
    if missing:
        return f"the observation lacks key(s) {missing} (it must hold images, state, instruction)"
    extra = sorted(set(observation) - {"images", "state", "instruction"})
    if extra:
        return f"the observation has key(s) {extra} besides images, state, instruction"
    images = observation["images"]
    if not isinstance(images, dict):
        return f"observation['images'] must be a dict camera name -> image, got {type(images).__name__}"
    height, width = spec.image_size
    for camera in spec.camera_names:
        if camera not in images:
            return f"observation['images'] lacks camera {camera!r} (env_spec.camera_names: {list(spec.camera_names)})"
        image = images[camera]
        if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.shape == (height, width, 3)):
            return (f"observation['images'][{camera!r}]: expected uint8 {(height, width, 3)}, got "
                    f"{getattr(image, 'dtype', type(image).__name__)} {getattr(image, 'shape', '')}")  # fmt: skip
        if int(image.max()) - int(image.min()) <= 10:
            return f"observation['images'][{camera!r}] is blank (one flat colour): is the camera looking at the scene?"
    state = observation["state"]
    if not (isinstance(state, np.ndarray) and state.dtype == np.float32 and state.shape == (spec.state_dim,)):
        return (f"observation['state']: expected float32 ({spec.state_dim},), got "
                f"{getattr(state, 'dtype', type(state).__name__)} {getattr(state, 'shape', '')}")  # fmt: skip
    if not np.all(np.isfinite(state)):
        return f"observation['state'] contains NaN or inf: {state.tolist()}"
    instruction = observation["instruction"]
    if not isinstance(instruction, str) or not instruction.strip():
        return f"observation['instruction'] must be a non-empty string, got {instruction!r}"
    if len(instruction) > INSTRUCTION_MAX_LENGTH:
        return f"observation['instruction'] has {len(instruction)} characters, more than {INSTRUCTION_MAX_LENGTH}"
    outside = sorted(set(instruction) - INSTRUCTION_CHARSET)
    if outside:
        return (f"observation['instruction'] {instruction!r} has characters outside the allowed set: "
                f"{''.join(outside)!r}; allowed: {CHARSET_TEXT} (envs.base.INSTRUCTION_CHARSET)")  # fmt: skip
    return None


def check_observation(env: gym.Env, seed: int = 0) -> None:
    """Every key of the observation after reset and after a few random steps, named where it is wrong."""
    spec: EnvSpec = env.env_spec
    observation, info = env.reset(seed=seed)
    problem = observation_problem(observation, spec)
    _require(problem is None, "observation", f"after reset: {problem}")
    _require(isinstance(info, dict) and "init_state" in info, "observation", "reset info lacks 'init_state'")
    env.action_space.seed(seed)
    for step in range(1, OBSERVATION_STEPS + 1):
        observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
        problem = observation_problem(observation, spec)
        _require(problem is None, "observation", f"after step {step}: {problem}")
        if terminated or truncated:
            break


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


def json_problem(value: Any, where: str) -> str | None:
    """Where ``value`` holds something JSON cannot store exactly (``where['key']`` and its type), or None."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r} of type {type(key).__name__} (JSON keys are strings)"
            problem = json_problem(item, f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = json_problem(item, f"{where}[{index}]")
            if problem:
                return problem
        return None
    if value is None or isinstance(value, str | bool | int) and not isinstance(value, np.generic):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value} (JSON has no NaN or infinity)"
    return (f"{where} is a {type(value).__module__}.{type(value).__name__} ({value!r:.60}); JSON stores lists, dicts, "
            "str, int, float, bool and None: convert it (an array's .tolist(), a numpy number's .item())")


def check_json(env: gym.Env, seed: int = 3) -> None:
    """``info["init_state"]`` and every info serialise to JSON (demonstrations and GRPO groups store them), and the
    init state read back from JSON restores the episode."""
    observation, info = env.reset(seed=seed)
    problem = json_problem(info, "reset info")
    _require(problem is None, "json", f"{problem}")
    init_state = json.loads(json.dumps(info["init_state"]))
    restored, _ = env.reset(seed=seed + 1, options={"init_state": init_state})
    _require(_observations_equal(observation, restored), "json",
             "reset(options={'init_state': json.loads(json.dumps(info['init_state']))}) did not restore the "
             "observation: the init state must survive a JSON round trip")  # fmt: skip
    env.action_space.seed(seed)
    for step in range(1, OBSERVATION_STEPS + 1):
        _, reward, terminated, truncated, step_info = env.step(env.action_space.sample())
        problem = json_problem(step_info, f"step {step}'s info")
        _require(problem is None, "json", f"{problem}")
        _require(math.isfinite(float(reward)), "json", f"step {step}'s reward is {reward}: rewards must be finite")
        if terminated or truncated:
            break


def expert_name(expert: Any) -> str:
    """``package.module.Class`` of a scripted expert, as a user finds it in their code."""
    return f"{type(expert).__module__}.{type(expert).__qualname__}"


def check_expert(env: gym.Env, make_expert: Callable[[gym.Env], Any], seeds: tuple[int, ...] = EXPERT_SEEDS) -> None:
    """The scripted expert's actions fit the action space (shape, finite, within the bounds), and it succeeds on
    most of the seeded episodes ``seeds``. ``make_expert(env)`` builds it (``envs.experts.get_expert``)."""
    try:
        expert = make_expert(env)
    except Exception as error:  # noqa: BLE001 - a failure inside the plug-in, reported in one line
        raise ConformanceError("expert", f"building the expert raised {type(error).__name__}: {error}") from error
    name = expert_name(expert)
    space = env.action_space
    successes = []
    for seed in seeds:
        observation, _ = env.reset(seed=seed)
        info: dict[str, Any] = {}
        _call_expert(expert, "reset", f"(seed {seed})", seed=seed)
        for step in range(env.env_spec.max_episode_steps):
            where = f"(seed {seed}, step {step})"
            action = np.asarray(_call_expert(expert, "act", where, observation))
            _require(action.shape == space.shape, "expert",
                     f"{name}.act returned an action of shape {action.shape} for the action space of shape "
                     f"{space.shape} {where}")  # fmt: skip
            _require(bool(np.all(np.isfinite(action))), "expert", f"{name}.act returned {action.tolist()} {where}")
            outside = (action < space.low - BOUNDS_TOLERANCE) | (action > space.high + BOUNDS_TOLERANCE)
            _require(not bool(outside.any()), "expert",
                     f"{name}.act returned {action.tolist()} outside the action space {_bounds_text(space)} {where}: "
                     "an expert acts in the env's own units, within its bounds")  # fmt: skip
            observation, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        successes.append(bool(info.get("is_success", False)))
    _require(2 * sum(successes) > len(successes), "expert",
             f"{name} succeeded on {sum(successes)} of {len(successes)} seeded episodes (seeds {list(seeds)}); it must "
             "succeed on most, so that its demonstrations teach the task")  # fmt: skip


def _call_expert(expert: Any, method: str, where: str, *args: Any, **kwargs: Any) -> Any:
    """``expert.method(...)``; an exception inside it is one ConformanceError naming the expert's method."""
    try:
        return getattr(expert, method)(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - a failure inside the plug-in, reported in one line
        raise ConformanceError("expert", f"{expert_name(expert)}.{method} raised {type(error).__name__}: {error} "
                               f"{where}") from error  # fmt: skip


CHECKS: dict[str, Callable[[gym.Env], None]] = {
    "spec": check_spec,
    "observation": check_observation,
    "gymnasium": check_gymnasium_api,
    "determinism": check_determinism,
    "success": check_success_reported,
    "reset-options": check_reset_options,
    "json": check_json,
    "bad-action": check_bad_actions,
}


@contextmanager
def _closing(env: gym.Env) -> Iterator[gym.Env]:
    try:
        yield env
    finally:
        env.close()


def run_checks(
    make_env: Callable[[], gym.Env],
    report: Callable[[CheckResult], None] | None = None,
    make_expert: Callable[[gym.Env], Any] | None = None,
) -> None:
    """Run every check on a fresh env from ``make_env``; raise on the first failure.

    ``report`` is called with each passed (or the failed) check, for progress output. ``make_expert(env)``: the
    env's scripted expert (:func:`check_expert` runs last), or None when it has none.
    """
    checks = dict(CHECKS)
    if make_expert is not None:
        checks["expert"] = lambda env: check_expert(env, make_expert)
    for name, check in checks.items():
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
