"""A differential-drive rover driving to a coloured pad: a robot env of vla-rl that lives outside it.

Not a tabletop: a mobile base, velocity commands in its own units, one overhead camera. Everything vla-rl
needs is here and in ``expert.py``; nothing in vla-rl knows this package, which is used by import path::

    vla-rl envs check rover_nav.env:make --all-tasks
    vla-rl train --config-dir examples/rover_nav/rover_nav/configs env=rover_nav experiment=flow_residual_ppo

Timing: physics timestep 0.01 s (``scene.xml``), control at 10 Hz (10 substeps per env step).

Action (robot units), shape (2,): ``[forward speed, turn rate]`` in [-0.1, 0.3] m/s x [-1.5, 1.5] rad/s
(it reverses slower than it drives forward). Velocity servos on the chassis's x, y and yaw joints track
the command, turned from the rover's frame into the world's each step; the arena's edge (+-0.5 m) stops it.

State ``obs["state"]`` (float32, 6): ``[x, y, cos(yaw), sin(yaw), forward speed, turn rate]`` (odometry:
m, m/s, rad/s). No pad positions: the policy finds the pad in the image, and which one in the instruction.

Tasks: ``go_to_red`` and ``go_to_blue``: stop the rover's centre within 8 cm of that pad's centre; both pads
are always there. Reward: 1.0 on success, which ends the episode; with ``dense_reward=True`` also the
distance (m) gained towards the pad at each step, times 10 (potential-based shaping).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from envs.base import EnvSpec, RobotEnv, make_observation_space, validate_action

SCENE = Path(__file__).with_name("scene.xml")
CONTROL_HZ = 10.0
ACTION_LOW, ACTION_HIGH = (-0.1, -1.5), (0.3, 1.5)
ARENA = 0.45  # pads and start positions stay within +-ARENA m
PAD_RADIUS = 0.08
SHAPING_SCALE = 10.0
CAMERAS = ("overhead",)
STATE_DIM = 6
MAX_EPISODE_STEPS = 60
INSTRUCTIONS = {
    "go_to_red": ("drive to the red pad", "go to the red circle", "park on the red pad"),
    "go_to_blue": ("drive to the blue pad", "go to the blue circle", "park on the blue pad"),
}
TASKS = tuple(INSTRUCTIONS)


class RoverNavEnv(RobotEnv):
    """The rover, two pads, an overhead camera."""

    tasks = TASKS

    def __init__(self, task: str = "go_to_red", image_size: int = 64, dense_reward: bool = False) -> None:
        super().__init__()
        self.model = mujoco.MjModel.from_xml_path(str(SCENE))
        self.data = mujoco.MjData(self.model)
        self.substeps = int(round(1.0 / (CONTROL_HZ * self.model.opt.timestep)))
        self.image_size = int(image_size)
        self.dense_reward = bool(dense_reward)
        self._renderer: mujoco.Renderer | None = None
        self._pads = {"red": self.model.site("red_pad").id, "blue": self.model.site("blue_pad").id}
        self._qpos = [self.model.joint(name).qposadr[0] for name in ("x", "y", "yaw")]
        self._qvel = [self.model.joint(name).dofadr[0] for name in ("x", "y", "yaw")]
        self.action_space = gym.spaces.Box(np.array(ACTION_LOW, np.float32), np.array(ACTION_HIGH, np.float32))
        self.observation_space = make_observation_space(CAMERAS, (self.image_size,) * 2, STATE_DIM)
        self._set_task(task)
        self._layout: dict[str, Any] | None = None
        self._elapsed_steps = 0
        self._distance = 0.0

    def _set_task(self, task: str) -> None:
        if task not in TASKS:
            raise ValueError(f"unknown rover_nav task {task!r}; available tasks: {', '.join(TASKS)}")
        self.task = task
        self.env_spec = EnvSpec(
            name="rover_nav", task=task, tasks=TASKS, camera_names=CAMERAS,
            image_size=(self.image_size, self.image_size), state_dim=STATE_DIM, action_low=ACTION_LOW,
            action_high=ACTION_HIGH, action_names=("forward_speed", "turn_rate"), control_hz=CONTROL_HZ,
            max_episode_steps=MAX_EPISODE_STEPS,
        )  # fmt: skip

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        layout = options.get("init_state")
        if layout is not None:
            missing = {"task", "instruction", "rover", "red", "blue"} - set(layout)
            if missing:
                raise ValueError(f"init_state lacks {sorted(missing)}; pass info['init_state'] from reset")
        task = layout["task"] if layout is not None else options.get("task", self.task)
        if task != self.task:
            self._set_task(task)
        self._layout = dict(layout) if layout is not None else self._sample_layout()
        mujoco.mj_resetData(self.model, self.data)
        for colour, site in self._pads.items():
            self.model.site_pos[site, :2] = self._layout[colour]
        self.data.qpos[self._qpos] = self._layout["rover"]
        mujoco.mj_forward(self.model, self.data)
        self._elapsed_steps = 0
        self._distance = self.distance_to_target()
        return self._observation(), {"is_success": False, "task": self.task, "init_state": dict(self._layout)}

    def step(self, action: Any):
        if self._layout is None:
            raise RuntimeError("call reset() before step()")
        speed, turn_rate = validate_action(action, self.action_space)
        yaw = self.data.qpos[self._qpos[2]]
        self.data.ctrl[:] = (speed * math.cos(yaw), speed * math.sin(yaw), turn_rate)  # rover frame -> world
        mujoco.mj_step(self.model, self.data, nstep=self.substeps)
        self._elapsed_steps += 1
        distance = self.distance_to_target()
        success = distance < PAD_RADIUS
        reward = float(success)
        if self.dense_reward:
            reward += SHAPING_SCALE * (self._distance - distance)
        self._distance = distance
        truncated = self._elapsed_steps >= MAX_EPISODE_STEPS and not success
        return self._observation(), reward, success, truncated, {"is_success": success, "task": self.task}

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # ----------------------------------------------------------------- internals
    def _sample_layout(self) -> dict[str, Any]:
        rng = self.np_random
        while True:  # pads apart from each other, the rover apart from both
            red, blue, rover = (rng.uniform(-ARENA, ARENA, 2) for _ in range(3))
            if np.linalg.norm(red - blue) > 0.35 and min(np.linalg.norm(rover - red), np.linalg.norm(rover - blue)) > 0.25:
                break
        instruction = INSTRUCTIONS[self.task][int(rng.integers(len(INSTRUCTIONS[self.task])))]
        return {"task": self.task, "instruction": instruction, "rover": [*rover.tolist(), float(rng.uniform(-np.pi, np.pi))],
                "red": red.tolist(), "blue": blue.tolist()}  # fmt: skip

    def _observation(self) -> dict[str, Any]:
        x, y, yaw = self.data.qpos[self._qpos]
        vx, vy, turn_rate = self.data.qvel[self._qvel]
        forward = vx * math.cos(yaw) + vy * math.sin(yaw)
        state = np.array([x, y, math.cos(yaw), math.sin(yaw), forward, turn_rate], dtype=np.float32)
        return {"images": {"overhead": self._render()}, "state": state, "instruction": self._layout["instruction"]}

    def _render(self) -> np.ndarray:
        if self._renderer is None:  # no shadows, reflections or multisampling: fast on CPU
            self.model.vis.quality.offsamples = 0
            self._renderer = mujoco.Renderer(self.model, self.image_size, self.image_size)
            self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
            self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        self._renderer.update_scene(self.data, camera="overhead")
        return self._renderer.render()  # upright RGB, the GL context made current first

    # ----------------------------------------------------------------- privileged state (the expert's)
    @property
    def pose(self) -> np.ndarray:
        """``[x, y, yaw]`` of the rover."""
        return self.data.qpos[self._qpos].copy()

    @property
    def target(self) -> np.ndarray:
        """Centre ``[x, y]`` of the pad the task names."""
        return self.model.site_pos[self._pads[self.task.removeprefix("go_to_")], :2].copy()

    def distance_to_target(self) -> float:
        return float(np.linalg.norm(self.pose[:2] - self.target))


def make(task: str = "go_to_red", image_size: int = 64, dense_reward: bool = False) -> RoverNavEnv:
    """The factory vla-rl calls (``env.id: rover_nav.env:make``)."""
    return RoverNavEnv(task=task, image_size=image_size, dense_reward=dense_reward)


# What vla-rl reads from the factory, by import path: its tasks and its scripted expert.
make.tasks = TASKS  # type: ignore[attr-defined]
make.expert = "rover_nav.expert:make_expert"  # type: ignore[attr-defined]
