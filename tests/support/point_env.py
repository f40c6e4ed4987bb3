"""A small protocol env used by the tests of the registry and the conformance kit.

A point on a plane moves towards a goal square; the picture is drawn with numpy. It is
deliberately outside the framework's packages: it is registered by import path only,
as a user's own env would be. Subclasses with one defect each test that the kit fails.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from envs.base import EnvSpec, RobotEnv, make_observation_space, validate_action

TASKS = ("reach_red", "reach_blue")
COLOURS = {"reach_red": (220, 40, 40), "reach_blue": (40, 40, 220)}


class PointEnv(RobotEnv):
    def __init__(self, task: str = "reach_red", image_size: int = 32, max_episode_steps: int = 20):
        if task not in TASKS:
            raise ValueError(f"unknown task {task!r}; available tasks: {', '.join(TASKS)}")
        self.env_spec = EnvSpec(
            name="point", task=task, tasks=TASKS, camera_names=("top",), image_size=(image_size, image_size),
            state_dim=2, action_low=(-0.1, -0.1), action_high=(0.1, 0.1), action_names=("dx", "dy"),
            control_hz=10.0, max_episode_steps=max_episode_steps,
        )  # fmt: skip
        self.observation_space = make_observation_space(("top",), (image_size, image_size), 2)
        self.action_space = __import__("gymnasium").spaces.Box(-0.1, 0.1, shape=(2,), dtype=np.float32)
        self.task = task
        self.position = np.zeros(2)
        self.goal = np.zeros(2)
        self.steps = 0

    def _observation(self) -> dict:
        size = self.env_spec.image_size[0]
        image = np.full((size, size, 3), 200, np.uint8)
        gx, gy = ((self.goal + 1) / 2 * (size - 4)).astype(int)
        image[gy : gy + 4, gx : gx + 4] = COLOURS[self.task]
        px, py = ((self.position + 1) / 2 * (size - 2)).astype(int)
        image[py : py + 2, px : px + 2] = 0
        colour = self.task.split("_")[1]
        return {
            "images": {"top": image},
            "state": self.position.astype(np.float32),
            "instruction": f"move to the {colour} square",
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        options = options or {}
        self.task = options.get("task", self.task)
        if "init_state" in options:
            state = options["init_state"]
            self.task = state["task"]
            self.position, self.goal = np.array(state["position"]), np.array(state["goal"])
        else:
            self.position = self.np_random.uniform(-0.8, 0.8, 2)
            self.goal = self.np_random.uniform(-0.8, 0.8, 2)
        self.steps = 0
        init_state = {"task": self.task, "position": self.position.tolist(), "goal": self.goal.tolist()}
        return self._observation(), {"init_state": init_state, "task": self.task}

    def step(self, action):
        action = validate_action(action, self.action_space)
        self.position = np.clip(self.position + action, -1, 1)
        self.steps += 1
        success = bool(np.linalg.norm(self.position - self.goal) < 0.1)
        truncated = self.steps >= self.env_spec.max_episode_steps
        return self._observation(), float(success), success, truncated, {"is_success": success, "task": self.task}


def make(task: str = "reach_red", **kwargs) -> PointEnv:
    return PointEnv(task=task, **kwargs)


make.tasks = TASKS


class NondeterministicPointEnv(PointEnv):
    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        self.position = np.random.uniform(-0.8, 0.8, 2)  # ignores the seed
        return self._observation(), info


class BlankImagePointEnv(PointEnv):
    def _observation(self) -> dict:
        observation = super()._observation()
        observation["images"]["top"][:] = 0
        return observation


class NaNAcceptingPointEnv(PointEnv):
    def step(self, action):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (2,):
            return super().step(action)
        self.position = np.nan_to_num(np.clip(self.position + action, -1, 1))
        return self._observation(), 0.0, False, False, {"is_success": False, "task": self.task}


class IgnoresInitStatePointEnv(PointEnv):
    def reset(self, *, seed=None, options=None):
        options = {k: v for k, v in (options or {}).items() if k != "init_state"}
        return super().reset(seed=seed, options=options)


class WrongActionBoundsPointEnv(PointEnv):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.action_space = __import__("gymnasium").spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)


class WrongCameraNamesPointEnv(PointEnv):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.env_spec = replace(self.env_spec, camera_names=("front",))


class DriftingPointEnv(PointEnv):
    """From the second step on, an unseeded wind pushes the point (gymnasium checks only one step)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.wind = np.random.default_rng()

    def step(self, action):
        if self.steps >= 1:
            self.position = np.clip(self.position + self.wind.uniform(-0.05, 0.05, 2), -1, 1)
        return super().step(action)


class FloatSuccessPointEnv(PointEnv):
    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, reward, terminated, truncated, {**info, "is_success": float(info["is_success"])}


class SilentSuccessPointEnv(PointEnv):
    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        del info["is_success"]
        return observation, reward, terminated, truncated, info


class RobotUnitsPointEnv(PointEnv):
    """Actions in its own units: an asymmetric Box beyond [-1, 1] (gymnasium only advises against it)."""

    LOW, HIGH = (-0.05, -2.0), (0.1, 2.0)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        low, high = np.array(self.LOW, np.float32), np.array(self.HIGH, np.float32)
        self.action_space = __import__("gymnasium").spaces.Box(low, high, dtype=np.float32)
        self.env_spec = replace(self.env_spec, action_low=self.LOW, action_high=self.HIGH, action_names=("dx", "turn"))


class UnboundedActionPointEnv(PointEnv):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.action_space = __import__("gymnasium").spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.env_spec = replace(self.env_spec, action_low=(-np.inf,) * 2, action_high=(np.inf,) * 2)


class NoInstructionPointEnv(PointEnv):
    def _observation(self) -> dict:
        observation = super()._observation()
        del observation["instruction"]
        return observation


class ColonInstructionPointEnv(PointEnv):
    def _observation(self) -> dict:
        return {**super()._observation(), "instruction": "goal: the red square"}


class BlankAfterResetPointEnv(PointEnv):
    """The reset image is fine; every image after a step is black."""

    def _observation(self) -> dict:
        observation = super()._observation()
        if self.steps:
            observation["images"]["top"][:] = 0
        return observation


class ListRewardPointEnv(PointEnv):
    """Returns the reward in a list: gymnasium's checker warns (in colour)."""

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, [reward], terminated, truncated, info


class ArrayInitStatePointEnv(PointEnv):
    """Keeps numpy arrays in ``info["init_state"]``: restores fine in memory, cannot be written to JSON."""

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        info["init_state"] = {**info["init_state"], "position": self.position.copy()}
        return observation, info


class PointExpert:
    """Steps towards the goal at the largest action the space allows (reads the goal: privileged state)."""

    def __init__(self, env: PointEnv, task: str, noise_std: float = 0.0, seed: int | None = None):
        self.env = env.unwrapped

    def reset(self, seed: int | None = None) -> None:
        pass

    def act(self, obs=None) -> np.ndarray:
        return np.clip(self.env.goal - self.env.position, -0.1, 0.1).astype(np.float32)


class ThreeDimensionalExpert(PointExpert):
    """A broken expert: one action dimension too many for the (2,) action space."""

    def act(self, obs=None) -> np.ndarray:
        return np.append(super().act(obs), 0.0).astype(np.float32)


class StandStillExpert(PointExpert):
    """A useless expert: valid actions that never reach the goal."""

    def act(self, obs=None) -> np.ndarray:
        return np.zeros(2, np.float32)


def make_with_expert(task: str = "reach_red", **kwargs) -> PointEnv:
    return PointEnv(task=task, **kwargs)


def make_with_broken_expert(task: str = "reach_red", **kwargs) -> PointEnv:
    return PointEnv(task=task, **kwargs)


def make_with_useless_expert(task: str = "reach_red", **kwargs) -> PointEnv:
    return PointEnv(task=task, **kwargs)


for _factory, _expert in ((make_with_expert, PointExpert), (make_with_broken_expert, ThreeDimensionalExpert),
                          (make_with_useless_expert, StandStillExpert)):  # fmt: skip
    _factory.tasks = TASKS
    _factory.expert = lambda env, task, _expert=_expert, **kwargs: _expert(env, task, **kwargs)


class WideActionPointEnv(PointEnv):
    """Actions in Box(-2, 2) (a velocity command, 0.05 per unit per step): bounds symmetric about 0 and wider than
    [-1, 1], where a policy's normalised output looks plausible in env units."""

    def __init__(self, task: str = "reach_red", image_size: int = 32, max_episode_steps: int = 20):
        super().__init__(task, image_size, max_episode_steps)
        self.env_spec = replace(self.env_spec, action_low=(-2.0, -2.0), action_high=(2.0, 2.0))
        self.action_space = __import__("gymnasium").spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)

    def step(self, action):
        action = validate_action(action, self.action_space)
        return super().step(0.05 * action)


def make_wide(task: str = "reach_red", **kwargs) -> WideActionPointEnv:
    return WideActionPointEnv(task=task, **kwargs)


make_wide.tasks = TASKS
