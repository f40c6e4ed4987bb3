"""robosuite tasks through the vla-rl env protocol (:mod:`envs.base`).

One :class:`RobosuiteEnv` wraps one robosuite environment (rebuilt when ``reset`` switches the
task). What it does beyond a thin wrapper, and why (see ``docs/platform.md``):

- Soft resets only (``hard_reset=False``): robosuite's hard reset rebuilds the model every episode,
  leaks 1.4-2.1 GB per 20 resets with its renderer and then renders noise.
- robosuite's own offscreen renderer is not used. Cameras are rendered by our
  :class:`envs.builtin.rendering.CameraRenderer` (``mujoco.Renderer``) on the robosuite model:
  shadows, reflections and multisampling off by default (``render_quality="fast"``), the geoms
  outside each camera's view left out (``skip_unseen``, :mod:`envs.builtin.view_culling`: the same
  pixels, at a fraction of the CPU time), the GL
  context made current before every render (so several envs in one process each render their own
  scene), and images come out upright (robosuite's come out upside down).
- Seeding: robosuite draws object placements and the robot's initial joint noise from one
  generator (``env.rng``), shared with its placement samplers; ``reset(seed=...)`` re-seeds that
  generator in place.

Every environment robosuite registers is a task (:mod:`envs.robosuite.tasks`), with any robosuite
robot (``robot="Sawyer"``; two-arm tasks get two of a one-arm robot, or one bimanual robot: see
:mod:`envs.robosuite.robots`) and controller.

Action (robot units, OSC_POSE default), shape (7,) per arm: ``[dx, dy, dz, dax, day, daz, gripper]``:
end-effector translation (m, +-0.05 per step) and rotation (axis-angle, rad, +-0.5 per step) in
the robot base frame; gripper -1 open, +1 close. A second robot's entries follow the first's, named
``robot1_...``. Other controllers: see :mod:`envs.robosuite.controllers`.

State ``obs["state"]`` (float32): per arm ``[eef_x, eef_y, eef_z, eef_qx, eef_qy, eef_qz, eef_qw,
finger_qpos (gripper dof)]``, then the robot's arm joint angles (16 for the Panda): grip site in the
world frame (m), its orientation (quaternion, xyzw, w >= 0), finger joint positions, joint angles (rad).

Reward: sparse 1.0 on the step the task succeeds (the episode then terminates); with
``dense_reward=True``, robosuite's shaped reward instead (``reward_shaping=True``).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from envs.base import EnvSpec, WrappedSimulatorEnv, image_shape, make_observation_space
from envs.builtin.rendering import CameraRenderer
from envs.robosuite.controllers import ActionScaling, action_scaling_of, build_controller_config
from envs.robosuite.robots import StateLayout, robots_for, state_layout
from envs.robosuite.sim_state import capture_init_state, check_init_state, restore_init_state
from envs.robosuite.tasks import ROBOSUITE_TASKS, RobosuiteTask, get_task

DEFAULT_CAMERAS = ("agentview", "robot0_eye_in_hand")


class RobosuiteEnv(WrappedSimulatorEnv):
    """A robosuite manipulation task with camera images, proprioception and an instruction.

    ``robot``: a robosuite robot name (two-arm tasks get two of it unless it is bimanual) or a list of
    names; ``max_episode_steps``: one length or task -> length; ``instructions``: task -> phrasings;
    ``mesh_cell``: draw meshes coarsened to that grid (m) in camera images (:mod:`envs.builtin.mesh_detail`);
    ``skip_unseen=False``: send every geom to every camera (the same images, more vertices).
    """

    tasks = ROBOSUITE_TASKS

    def __init__(
        self,
        task: str = "Lift",
        image_size: int | tuple[int, int] = 64,
        cameras: tuple[str, ...] = DEFAULT_CAMERAS,
        robot: str | tuple[str, ...] = "Panda",
        controller: str = "OSC_POSE",
        controller_overrides: dict[str, Any] | None = None,
        control_freq: float = 20.0,
        dense_reward: bool = False,
        max_episode_steps: int | dict[str, int] | None = None,
        instructions: dict[str, str | tuple[str, ...]] | None = None,
        render_quality: str = "fast",
        mesh_cell: float | None = None,
        render_mode: str | None = None,
        skip_unseen: bool = True,
    ) -> None:
        super().__init__()
        self.check_render_mode(render_mode)
        self.image_shape = image_shape(image_size)
        self.robot_name = robot if isinstance(robot, str) else tuple(robot)
        self._controller = (controller, dict(controller_overrides) if controller_overrides else None)
        self._instructions = dict(instructions) if instructions else None
        self.control_freq = float(control_freq)
        self.dense_reward = dense_reward
        self.render_quality = render_quality
        self.mesh_cell = mesh_cell
        self.skip_unseen = bool(skip_unseen)
        self.render_mode = render_mode
        self._cameras = tuple(cameras)
        steps = max_episode_steps
        self._max_steps_override = dict(steps) if isinstance(steps, dict) else steps
        self._inner: Any = None
        self._renderer: CameraRenderer | None = None
        self._build(self._task(task))
        self._instruction = ""
        self._elapsed_steps = 0
        self._needs_reset = True

    # ----------------------------------------------------------------- construction
    def _build(self, task: RobosuiteTask) -> None:
        """(Re)create the robosuite environment of ``task`` and everything derived from it."""
        import robosuite

        self._close_inner()
        robots = robots_for(task.name, self.robot_name)
        configs = [build_controller_config(self._controller[0], name, self._controller[1]) for name in robots]
        self.controller_config = configs[0] if len(configs) == 1 else configs
        self._inner = robosuite.make(
            task.name,
            robots=robots[0] if len(robots) == 1 else robots,
            controller_configs=self.controller_config,
            has_renderer=False,
            has_offscreen_renderer=False,
            use_camera_obs=False,
            hard_reset=False,
            renderer="mujoco",
            ignore_done=True,
            reward_shaping=self.dense_reward,
            control_freq=self.control_freq,
            seed=0,
            **task.robosuite_kwargs,
        )
        self.task = task
        self.model: mujoco.MjModel = self._inner.sim.model._model
        self.data: mujoco.MjData = self._inner.sim.data._data
        available = [self.model.camera(i).name for i in range(self.model.ncam)]
        unknown = [name for name in self._cameras if name not in available]
        if unknown:
            raise ValueError(f"unknown camera(s) {unknown} in robosuite {task.name}; available: {available}")
        self._renderer = CameraRenderer(
            self.model, self.image_shape, self.render_quality, self.mesh_cell, skip_unseen=self.skip_unseen
        )
        self.scaling: ActionScaling = _joined_scaling([action_scaling_of(robot) for robot in self._inner.robots])
        self.action_space = gym.spaces.Box(
            self.scaling.low.astype(np.float32), self.scaling.high.astype(np.float32), dtype=np.float32
        )
        self._layout: StateLayout = state_layout(self._inner.robots)
        self._eef_site = self._layout.eef_sites[0]
        state_dim = self._layout.state_dim
        self.observation_space = make_observation_space(self._cameras, self.image_shape, state_dim)
        self.env_spec = EnvSpec(
            name="robosuite",
            task=task.name,
            tasks=ROBOSUITE_TASKS,
            camera_names=self._cameras,
            image_size=self.image_shape,
            state_dim=state_dim,
            action_low=tuple(float(v) for v in self.action_space.low),
            action_high=tuple(float(v) for v in self.action_space.high),
            action_names=self.scaling.names,
            control_hz=self.control_freq,
            max_episode_steps=int(task.max_episode_steps),
            extra={"robot": robots, "controller": [config["body_parts"] for config in configs]},
        )
        self._needs_reset = True

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        init_state = options.get("init_state")
        if init_state is not None:
            check_init_state(init_state, self.model, ROBOSUITE_TASKS)
        task_name = self.task_of_reset(options, init_state)
        if task_name is not None and task_name != self.task.name:
            self._build(self._task(task_name))
        if seed is not None:  # re-seed in place: the placement samplers hold this very generator
            self._inner.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state
        self._inner.reset()
        if init_state is None:
            index = int(self.np_random.integers(len(self.task.instructions)))
            self._instruction = self.task.instructions[index]
            init_state = capture_init_state(self.model, self.data, self.task.name, self._instruction)
        else:
            self._instruction = init_state["instruction"]
        # A fresh episode goes through the same restore as a replayed one, so that both start from
        # identical controller state too (robosuite's own reset builds the controllers before it
        # places the gripper fingers, which leaves them different from a rebuild after a restore).
        restore_init_state(self.model, self.data, init_state)
        self._reset_controllers()
        self._elapsed_steps = 0
        self._needs_reset = False
        info = {"is_success": False, "task": self.task.name, "init_state": copy.deepcopy(init_state)}
        return self._observation(), info

    def step(self, action: Any):
        action = self.checked_action(action)
        _, shaped_reward, _, _ = self._inner.step(self.scaling.to_robosuite(action))
        self._elapsed_steps += 1
        success = bool(self._inner._check_success())
        reward = float(shaped_reward) if self.dense_reward else float(success)
        truncated = self._elapsed_steps >= self.env_spec.max_episode_steps and not success
        info = {"is_success": success, "task": self.task.name}
        return self._observation(), reward, success, truncated, info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self._renderer.render(self.data, self._cameras[0] if self._cameras else "agentview")

    # ----------------------------------------------------------------- internals
    def _task(self, name: str) -> RobosuiteTask:
        return get_task(name, self._instructions, self._max_steps_override)

    def _reset_controllers(self) -> None:
        """After restoring a state, rebuild the controllers from it as robosuite's robot reset does."""
        for robot in self._inner.robots:
            robot._load_controller()
            for arm in robot.arms:
                if robot.has_gripper[arm]:
                    robot.gripper[arm].current_action = np.zeros(robot.gripper[arm].dof)
            robot.composite_controller.update_state()
            robot.composite_controller.reset()

    def _observation(self) -> dict[str, Any]:
        state = self._layout.read(self.data)
        images = {name: self._renderer.render(self.data, name) for name in self._cameras}
        return {"images": images, "state": state, "instruction": self._instruction}

    # ----------------------------------------------------------------- privileged state (experts only)
    @property
    def robosuite_env(self) -> Any:
        """The wrapped robosuite environment (for scripted experts and tests)."""
        return self._inner

    @property
    def eef_position(self) -> np.ndarray:
        """Grip site position in the world frame (3,)."""
        return self.data.site_xpos[self._eef_site].copy()


def _joined_scaling(scalings: list[ActionScaling]) -> ActionScaling:
    """One :class:`ActionScaling` over several robots' actions, in robosuite's order (robot 0 first)."""
    if len(scalings) == 1:
        return scalings[0]
    names = [name if index == 0 else f"robot{index}_{name}" for index, s in enumerate(scalings) for name in s.names]
    joined = {key: np.concatenate([getattr(s, key) for s in scalings]) for key in ("low", "high", "input_low", "input_high")}
    return ActionScaling(names=tuple(names), **joined)


#: The factory registered as ``robosuite`` in :mod:`envs.registry`: the class, which normalises its own options.
make_robosuite_env = RobosuiteEnv
