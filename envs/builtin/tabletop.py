"""The built-in MuJoCo tabletop env: a primitive-geometry arm, three blocks, a bowl, a drawer.

Timing: physics timestep 0.005 s (``assets/tabletop/scene.xml``), control at 10 Hz, so one env
step runs ``mj_step(model, data, nstep=20)``. 5 ms is the largest step at which grasps stay
stable with the stiff finger servos (12 N squeeze, elliptic friction cones); 10 Hz keeps episodes
short (30-60 steps) for cheap RL on CPU.

Action (robot units), shape (4,) or (5,) with ``control_yaw=True``::

    [dx, dy, dz, (dyaw,) gripper]

``dx, dy, dz`` in [-0.05, 0.05] m move the end-effector target (the grip site between the finger
pads) per step; the target is clipped to the workspace box ``WORKSPACE_LOW..WORKSPACE_HIGH``.
``dyaw`` in [-0.25, 0.25] rad turns the gripper about the vertical (yaw limited to +-pi/2).
``gripper`` in [-1, 1]: -1 fully open, +1 closed (finger targets in between are proportional).
Every step the env solves the arm's inverse kinematics (:mod:`envs.builtin.arm`) for the target,
gripper pointing down, and sends the joint angles to the position servos.

State ``obs["state"]`` (float32, 9): ``[ee_x, ee_y, ee_z, sin(yaw), cos(yaw), gripper_opening,
ee_vx, ee_vy, ee_vz]``: grip site position (m, world frame, origin at the arm base on the table
top), gripper yaw, distance between finger pads (m, 0..0.09) and grip site velocity over the last
step (m/s).

Scenes: by default every reset samples a new layout (positions anywhere on the table, 3 of 7
colours for the blocks, one of several phrasings). ``fixed_scenes=True`` gives each task one
nominal scene, moved by up to ``scene_jitter`` metres at each reset, as LIBERO's tasks are
(:mod:`envs.builtin.tasks.fixed_scenes`).

Rewards: sparse 1.0 on the step the task succeeds (the episode then terminates); with
``dense_reward=True`` each step adds ``0.5 * (progress_t - progress_{t-1})``: potential-based shaping
(Ng, Harada and Russell, 1999) with the task's progress in [0, 1] as the potential, so the shaped
return differs from the sparse one by a constant and the optimal policy stays the same. (Adding the
progress itself would pay an agent for hovering near the goal instead of finishing the task.)
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from envs.base import EnvSpec, RobotEnv, image_shape, make_observation_space, validate_action
from envs.builtin.arm import solve_ik_floats
from envs.builtin.assets import load_tabletop_model
from envs.builtin.layout_io import check_init_state
from envs.builtin.rendering import CameraRenderer
from envs.builtin.scene import FINGER_OPEN, TabletopScene
from envs.builtin.tasks import TASKS, TabletopTask, check_block_colors, sample_layout
from envs.builtin.tasks.fixed_scenes import check_scene_jitter, jitter_layout, nominal_layout

CONTROL_HZ = 10.0
MAX_POSITION_DELTA = 0.05
MAX_YAW_DELTA = 0.25
YAW_LIMIT = np.pi / 2
WORKSPACE_LOW = np.array([0.20, -0.30, 0.015])
WORKSPACE_HIGH = np.array([0.60, 0.30, 0.35])
DENSE_REWARD_SCALE = 0.5
CAMERAS = ("front", "wrist")
STATE_DIM = 9
# the workspace box as (low, high) float pairs per axis, for the per-step clipping on plain floats
_WORKSPACE_BOUNDS = tuple(zip(WORKSPACE_LOW.tolist(), WORKSPACE_HIGH.tolist(), strict=True))


class TabletopEnv(RobotEnv):
    """One tabletop scene running one task at a time (switchable at reset)."""

    tasks = tuple(TASKS)
    supports_skipping_images = True

    def __init__(
        self,
        task: str = "reach",
        image_size: int | tuple[int, int] = 64,
        cameras: tuple[str, ...] = CAMERAS,
        control_yaw: bool = False,
        dense_reward: bool = False,
        max_episode_steps: int | None = None,
        render_quality: str = "fast",
        render_mode: str | None = None,
        block_colors: tuple[str, ...] | None = None,
        fixed_scenes: bool = False,
        scene_seed: int = 0,
        scene_jitter: float = 0.03,
    ) -> None:
        super().__init__()
        self.block_colors = check_block_colors(block_colors)
        self.fixed_scenes = bool(fixed_scenes)
        self.scene_seed = int(scene_seed)
        self.scene_jitter = check_scene_jitter(scene_jitter)
        self._nominal_layouts: dict[str, dict[str, Any]] = {}
        unknown = [name for name in cameras if name not in CAMERAS]
        if unknown:
            raise ValueError(f"unknown camera(s) {unknown}; the tabletop cameras are {list(CAMERAS)}")
        self.check_render_mode(render_mode)
        self.model = load_tabletop_model()
        self.data = mujoco.MjData(self.model)
        self.scene = TabletopScene(self.model, self.data)
        self.substeps = int(round(1.0 / (CONTROL_HZ * self.model.opt.timestep)))
        self.image_shape = image_shape(image_size)
        self.control_yaw = control_yaw
        self.dense_reward = dense_reward
        self.render_mode = render_mode
        self._max_steps_override = max_episode_steps
        self._renderer = CameraRenderer(self.model, self.image_shape, render_quality)
        self._cameras = tuple(cameras)
        self.action_names = ("dx", "dy", "dz") + (("dyaw",) if control_yaw else ()) + ("gripper",)
        low = [-MAX_POSITION_DELTA] * 3 + ([-MAX_YAW_DELTA] if control_yaw else []) + [-1.0]
        self.action_space = gym.spaces.Box(
            np.array(low, np.float32), -np.array(low, np.float32), dtype=np.float32
        )
        self.observation_space = make_observation_space(self._cameras, self.image_shape, STATE_DIM)
        self._set_task(task)
        self._layout: dict[str, Any] | None = None
        self._ee_target = (0.0, 0.0, 0.0)
        self._yaw_target = 0.0
        self._previous_ee = (0.0, 0.0, 0.0)
        self._progress = 0.0
        self._elapsed_steps = 0

    # ----------------------------------------------------------------- task handling
    def _set_task(self, name: str) -> None:
        if name not in TASKS:
            raise ValueError(f"unknown tabletop task {name!r}; available tasks: {', '.join(TASKS)}")
        self.task: TabletopTask = TASKS[name]()
        steps = self._max_steps_override or self.task.max_episode_steps
        spec = EnvSpec(
            name="tabletop",
            task=name,
            tasks=tuple(TASKS),
            camera_names=self._cameras,
            image_size=self.image_shape,
            state_dim=STATE_DIM,
            action_low=tuple(float(v) for v in self.action_space.low),
            action_high=tuple(float(v) for v in self.action_space.high),
            action_names=self.action_names,
            control_hz=CONTROL_HZ,
            max_episode_steps=int(steps),
            extra={"workspace_low": WORKSPACE_LOW.tolist(), "workspace_high": WORKSPACE_HIGH.tolist()},
        )
        self.env_spec = spec

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        init_state = options.get("init_state")
        layout = None if init_state is None else check_init_state(init_state, TASKS)
        task_name = self.task_of_reset(options, layout)
        if task_name is not None and task_name != self.task.name:
            self._set_task(task_name)
        if layout is None:
            layout = self._sample_layout()
        self._layout = layout
        self.scene.apply_layout(layout)
        self._ee_target = tuple(float(v) for v in layout["ee_start"])
        self._yaw_target = 0.0
        self._previous_ee = self._grip_position()
        self._elapsed_steps = 0
        # the progress is the dense reward's potential: nothing else reads it
        self._progress = self.task.progress(self.scene, layout["target"]) if self.dense_reward else 0.0
        info = {"is_success": False, "task": self.task.name, "init_state": _copy_layout(layout)}
        return self._observation(), info

    def _sample_layout(self) -> dict[str, Any]:
        """A random layout, or (``fixed_scenes``) the task's nominal scene moved by up to ``scene_jitter``."""
        if not self.fixed_scenes:
            return sample_layout(self.np_random, self.task, self.block_colors)
        name = self.task.name
        if name not in self._nominal_layouts:
            self._nominal_layouts[name] = nominal_layout(
                self.task, self.scene_seed, self.block_colors, self.scene_jitter
            )
        return jitter_layout(self.np_random, self._nominal_layouts[name], self.scene_jitter)

    def step(self, action: Any):
        if self._layout is None:
            raise RuntimeError("call reset() before step()")
        # plain floats from here on: the same IEEE arithmetic as on arrays, without numpy's per-call cost
        action = validate_action(action, self.action_space).tolist()
        self._ee_target = x, y, z = tuple(
            min(max(target + delta, low), high)
            for target, delta, (low, high) in zip(self._ee_target, action[:3], _WORKSPACE_BOUNDS, strict=True)
        )
        if self.control_yaw:
            self._yaw_target = min(max(self._yaw_target + action[3], -YAW_LIMIT), YAW_LIMIT)
        data = self.data
        data.ctrl[:5] = solve_ik_floats(x, y, z, self._yaw_target)
        data.ctrl[5:7] = FINGER_OPEN * (1.0 - action[-1]) / 2.0
        self._previous_ee = self._grip_position()
        self._advance_physics()
        self._elapsed_steps += 1
        success = self.task.is_success(self.scene, self._layout["target"])
        reward = 1.0 if success else 0.0
        if self.dense_reward:
            progress = self.task.progress(self.scene, self._layout["target"])
            reward += DENSE_REWARD_SCALE * (progress - self._progress)
            self._progress = progress
        truncated = self._elapsed_steps >= self.env_spec.max_episode_steps and not success
        info = {"is_success": success, "task": self.task.name}
        return self._observation(with_images=not self.skip_images), reward, success, truncated, info

    def _advance_physics(self) -> None:
        """One control step of physics (``substeps`` MuJoCo steps); a method of its own so that
        ``research/tabletop_render_costs.py`` can time it apart from the env's Python."""
        mujoco.mj_step(self.model, self.data, nstep=self.substeps)

    def observe(self) -> dict[str, Any]:
        return self._observation()

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self._renderer.render(self.data, "front")

    def close(self) -> None:
        self._renderer.close()

    # ----------------------------------------------------------------- observation
    def _grip_position(self) -> tuple[float, float, float]:
        x, y, z = self.data.site_xpos[self.scene.grip_site].tolist()
        return x, y, z

    def _observation(self, with_images: bool = True) -> dict[str, Any]:
        x, y, z = self._grip_position()
        previous_x, previous_y, previous_z = self._previous_ee
        yaw = self.scene.gripper_yaw
        state = np.array(
            [
                x,
                y,
                z,
                np.sin(yaw),  # numpy's, as before: its functions need not round as math's do (tanh does not)
                np.cos(yaw),
                self.scene.gripper_opening,
                (x - previous_x) * CONTROL_HZ,
                (y - previous_y) * CONTROL_HZ,
                (z - previous_z) * CONTROL_HZ,
            ],
            dtype=np.float32,
        )
        images = (
            {name: self._renderer.render(self.data, name) for name in self._cameras} if with_images else {}
        )
        return {"images": images, "state": state, "instruction": self._layout["instruction"]}

    # ----------------------------------------------------------------- privileged state (experts only)
    @property
    def ee_position(self) -> np.ndarray:
        return self.scene.ee_position

    @property
    def ee_target(self) -> np.ndarray:
        """The end-effector target the arm is tracking (3,)."""
        return np.array(self._ee_target)

    @property
    def task_target(self) -> dict[str, str]:
        """What the instruction refers to, e.g. ``{"block": "red", "zone": "blue"}``."""
        return dict(self._layout["target"]) if self._layout else {}


def _copy_layout(layout: dict[str, Any]) -> dict[str, Any]:
    """A deep copy (the layout holds only lists, dicts, str and float: picklable, JSON-able)."""
    return copy.deepcopy(layout)


#: The factory registered as ``tabletop`` in :mod:`envs.registry`: the class, which normalises its own options.
make_tabletop_env = TabletopEnv
