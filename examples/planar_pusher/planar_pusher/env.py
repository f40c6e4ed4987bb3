"""A 2-link planar arm pushing a puck to a goal: a robot env of vla-rl that lives outside it.

Everything vla-rl needs is in this file: the env class following the protocol of ``envs.base``
and the factory ``make`` that names its tasks, its scripted expert and its benchmark. Nothing in
vla-rl knows this package; it is used by import path::

    vla-rl envs check planar_pusher.env:make
    vla-rl collect env=planar_pusher
    vla-rl train env.id=planar_pusher.env:make

Timing: physics timestep 0.01 s (``scene.xml``), control at 10 Hz (10 substeps per env step).

Action (robot units), shape (2,): ``[dx, dy]`` in [-0.03, 0.03] m moves the fingertip target per
step; the target stays inside the arm's reachable ring. Every step the env solves the arm's
inverse kinematics in closed form (elbow on one side) and sends the joint angles to the servos.

State ``obs["state"]`` (float32, 6): ``[tip_x, tip_y, shoulder, elbow, tip_vx, tip_vy]``
(m, rad, m/s; world frame with the shoulder at the origin).

Tasks: ``push`` (puck centre within 3 cm of the goal centre) and ``reach`` (fingertip touching the
puck). Reward: sparse 1.0 on success, which ends the episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from envs.base import EnvSpec, RobotEnv, make_observation_space, validate_action

SCENE = Path(__file__).with_name("scene.xml")
CONTROL_HZ = 10.0
MAX_DELTA = 0.03
UPPER_ARM, FOREARM = 0.25, 0.20
REACH_MIN, REACH_MAX = 0.10, 0.43
PUCK_RADIUS, TIP_RADIUS = 0.025, 0.015
GOAL_TOLERANCE = 0.03
CAMERAS = ("top", "angled")
STATE_DIM = 6
INSTRUCTIONS = {
    "push": ("push the red puck onto the green target", "slide the puck to the green circle",
             "move the red puck to the goal"),  # fmt: skip
    "reach": ("touch the red puck", "move the fingertip to the puck", "reach for the red puck"),
}
MAX_EPISODE_STEPS = {"push": 80, "reach": 40}
TASKS = tuple(INSTRUCTIONS)


def solve_ik(target: np.ndarray) -> np.ndarray:
    """Joint angles (2,) that put the fingertip at ``target`` (x, y); elbow bent to the right."""
    x, y = target
    distance_sq = x * x + y * y
    cos_elbow = (distance_sq - UPPER_ARM**2 - FOREARM**2) / (2 * UPPER_ARM * FOREARM)
    elbow = -np.arccos(np.clip(cos_elbow, -1.0, 1.0))
    shoulder = np.arctan2(y, x) - np.arctan2(FOREARM * np.sin(elbow), UPPER_ARM + FOREARM * np.cos(elbow))
    return np.array([shoulder, elbow])


def clip_to_reach(point: np.ndarray) -> np.ndarray:
    """``point`` (2,) moved radially into the reachable ring and in front of the base (x >= 0)."""
    point = np.array([max(point[0], 0.0), point[1]])
    radius = np.linalg.norm(point)
    if radius < 1e-9:
        return np.array([REACH_MIN, 0.0])
    return point * np.clip(radius, REACH_MIN, REACH_MAX) / radius


class PlanarPusherEnv(RobotEnv):
    """The planar pusher: a puck, a goal, a 2-link arm, a top and an angled camera."""

    tasks = TASKS

    def __init__(self, task: str = "push", image_size: int = 64, cameras: tuple[str, ...] = ("top",)) -> None:
        super().__init__()
        unknown = [name for name in cameras if name not in CAMERAS]
        if unknown:
            raise ValueError(f"unknown camera(s) {unknown}; the planar pusher's cameras are {list(CAMERAS)}")
        self.model = mujoco.MjModel.from_xml_path(str(SCENE))
        self.data = mujoco.MjData(self.model)
        self.substeps = int(round(1.0 / (CONTROL_HZ * self.model.opt.timestep)))
        self.image_size = int(image_size)
        self._cameras = tuple(cameras)
        self._renderer: mujoco.Renderer | None = None
        self._tip = self.model.site("tip").id
        self._goal = self.model.site("goal").id
        self._puck_qpos = np.array([self.model.joint("puck_x").qposadr[0], self.model.joint("puck_y").qposadr[0]])
        self._arm_qpos = np.array([self.model.joint("shoulder").qposadr[0], self.model.joint("elbow").qposadr[0]])
        self.action_space = gym.spaces.Box(-MAX_DELTA, MAX_DELTA, shape=(2,), dtype=np.float32)
        self.observation_space = make_observation_space(self._cameras, (self.image_size,) * 2, STATE_DIM)
        self._set_task(task)
        self._layout: dict[str, Any] | None = None
        self._target = np.zeros(2)
        self._previous_tip = np.zeros(2)
        self._elapsed_steps = 0

    def _set_task(self, task: str) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown planar_pusher task {task!r}; available tasks: {', '.join(TASKS)}")
        self.task = task
        self.env_spec = EnvSpec(
            name="planar_pusher", task=task, tasks=TASKS, camera_names=self._cameras,
            image_size=(self.image_size, self.image_size), state_dim=STATE_DIM,
            action_low=(-MAX_DELTA, -MAX_DELTA), action_high=(MAX_DELTA, MAX_DELTA), action_names=("dx", "dy"),
            control_hz=CONTROL_HZ, max_episode_steps=MAX_EPISODE_STEPS[task],
        )  # fmt: skip

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        layout = options.get("init_state")
        if layout is not None:
            missing = {"task", "instruction", "puck", "goal", "tip"} - set(layout)
            if missing:
                raise ValueError(f"init_state lacks {sorted(missing)}; pass info['init_state'] from reset")
        task = layout["task"] if layout is not None else options.get("task", self.task)
        if task != self.task:
            self._set_task(task)
        if layout is None:
            layout = self._sample_layout()
        self._layout = {key: (list(value) if isinstance(value, list | tuple) else value) for key, value in layout.items()}
        mujoco.mj_resetData(self.model, self.data)
        self.model.site_pos[self._goal, :2] = layout["goal"]
        self.data.qpos[self._puck_qpos] = np.asarray(layout["puck"]) - self.model.body("puck").pos[:2]
        self._target = np.asarray(layout["tip"], dtype=float)
        self.data.qpos[self._arm_qpos] = self.data.ctrl[:] = solve_ik(self._target)
        mujoco.mj_forward(self.model, self.data)
        self._previous_tip = self.tip_position
        self._elapsed_steps = 0
        info = {"is_success": False, "task": self.task, "init_state": dict(self._layout)}
        return self._observation(), info

    def step(self, action: Any):
        if self._layout is None:
            raise RuntimeError("call reset() before step()")
        action = validate_action(action, self.action_space)
        self._target = clip_to_reach(self._target + action)
        self.data.ctrl[:] = solve_ik(self._target)
        self._previous_tip = self.tip_position
        mujoco.mj_step(self.model, self.data, nstep=self.substeps)
        self._elapsed_steps += 1
        success = self._is_success()
        truncated = self._elapsed_steps >= self.env_spec.max_episode_steps and not success
        return self._observation(), float(success), success, truncated, {"is_success": success, "task": self.task}

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # ----------------------------------------------------------------- internals
    def _sample_layout(self) -> dict[str, Any]:
        rng = self.np_random
        puck = np.array([rng.uniform(0.22, 0.32), rng.uniform(-0.10, 0.10)])
        while True:
            goal = np.array([rng.uniform(0.18, 0.36), rng.uniform(-0.15, 0.15)])
            if np.linalg.norm(goal - puck) > 0.08:
                break
        tip = np.array([rng.uniform(0.12, 0.16), rng.uniform(-0.05, 0.05)])
        instruction = INSTRUCTIONS[self.task][int(rng.integers(len(INSTRUCTIONS[self.task])))]
        return {"task": self.task, "instruction": instruction, "puck": puck.tolist(), "goal": goal.tolist(),
                "tip": tip.tolist()}  # fmt: skip

    def _is_success(self) -> bool:
        if self.task == "push":
            return bool(np.linalg.norm(self.puck_position - self.goal_position) < GOAL_TOLERANCE)
        return bool(np.linalg.norm(self.tip_position - self.puck_position) < PUCK_RADIUS + TIP_RADIUS + 0.005)

    def _observation(self) -> dict[str, Any]:
        tip = self.tip_position
        velocity = (tip - self._previous_tip) * CONTROL_HZ
        state = np.array([*tip, *self.data.qpos[self._arm_qpos], *velocity], dtype=np.float32)
        return {"images": {name: self._render(name) for name in self._cameras}, "state": state,
                "instruction": self._layout["instruction"]}  # fmt: skip

    def _render(self, camera: str) -> np.ndarray:
        if self._renderer is None:  # no shadows, reflections or multisampling: fast on CPU
            self.model.vis.quality.offsamples = 0
            self._renderer = mujoco.Renderer(self.model, self.image_size, self.image_size)
            self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
            self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        self._renderer.update_scene(self.data, camera=camera)
        return self._renderer.render()  # upright RGB, the GL context made current first

    # ----------------------------------------------------------------- privileged state (the expert's)
    @property
    def tip_position(self) -> np.ndarray:
        return self.data.site_xpos[self._tip, :2].copy()

    @property
    def tip_target(self) -> np.ndarray:
        return self._target.copy()

    @property
    def puck_position(self) -> np.ndarray:
        return self.data.xpos[self.model.body("puck").id, :2].copy()

    @property
    def goal_position(self) -> np.ndarray:
        return self.model.site_pos[self._goal, :2].copy()


def make(task: str = "push", image_size: int = 64, cameras: tuple[str, ...] = ("top",)) -> PlanarPusherEnv:
    """The factory vla-rl calls (``env.id: planar_pusher.env:make``)."""
    return PlanarPusherEnv(task=task, image_size=image_size, cameras=tuple(cameras))


# What vla-rl reads from the factory, by import path: its tasks, its scripted expert, its benchmark.
make.tasks = TASKS  # type: ignore[attr-defined]
make.expert = "planar_pusher.expert:make_expert"  # type: ignore[attr-defined]
make.benchmark = "planar_pusher.benchmark:measure_env_speed"  # type: ignore[attr-defined]
