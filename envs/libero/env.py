"""LIBERO tasks through the vla-rl env protocol (:mod:`envs.base`).

One :class:`LiberoEnv` wraps LIBERO's ``ControlEnv`` of one task (rebuilt when ``reset`` switches the
task), as LIBERO's and openpi's/LeRobot's evaluations set it up (Panda, OSC_POSE at 20 Hz), with:

- Init states: ``reset(options={"init_state": k})`` starts from the suite's official init state ``k``
  (0..49), as LIBERO's evaluation does (soft reset, then ``set_init_state``); without it the env draws
  ``k`` from its seeded generator. ``info["init_state"]`` is ``{"task": ..., "index": k}`` and restores
  the same start. The init states hold joints only; LIBERO's reset also moves the fixtures (cabinet,
  stove: up to ~1 cm) at random, which here is drawn from seed ``k``, so state ``k`` is one scene.
- Settle steps: ``settle_steps`` (default 10) no-op actions (gripper open) after the init state, as
  openpi's and LeRobot's LIBERO evaluations wait for the objects to come to rest; they are not counted
  in the episode's steps.
- Success: LIBERO's own predicate (the task file's goal, ``_check_success``); the episode terminates on it.
- Images: rendered by :class:`envs.builtin.rendering.CameraRenderer` on LIBERO's model (collision geoms
  hidden as robosuite does; shadows, reflections and multisampling off with ``render_quality="fast"``;
  ``mesh_cell`` (default :data:`DEFAULT_MESH_CELL`) draws visual meshes coarsened to that grid, collision
  meshes untouched; None draws them in full), turned as openpi and LeRobot turn
  robosuite's images (``image[::-1, ::-1]`` of robosuite's bottom-up rows), so they match the LIBERO
  datasets those projects train on. robosuite's observables are switched off: nothing reads them.
- Control: robosuite's OSC substeps are computed by :mod:`envs.libero.osc_substeps` (the same torques to
  the bit, without robosuite's per-substep bookkeeping).

Action (7,), the controller's input units: ``[dx, dy, dz, dax, day, daz, gripper]`` in [-1, 1];
OSC_POSE maps +-1 to +-0.05 m and +-0.5 rad (axis-angle) of end-effector motion per step; gripper -1
open, +1 close. This is the action of LIBERO's demonstrations.

State ``obs["state"]`` (8,) float32: end-effector position (m, world frame), its orientation as
axis-angle (rad; robosuite's ``robot0_eef_quat``, the hand body's), and the two finger joint positions
(m): the state openpi and LeRobot feed their LIBERO policies.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from envs.base import EnvSpec, WrappedSimulatorEnv, image_shape, make_observation_space
from envs.builtin.rendering import CameraRenderer
from envs.libero import osc_substeps
from envs.libero.suites import LiberoTask, get_task, official_init_states, suite_tasks

DEFAULT_CAMERAS = ("agentview", "robot0_eye_in_hand")
ACTION_NAMES = ("dx", "dy", "dz", "dax", "day", "daz", "gripper")
STATE_DIM = 8
CONTROL_HZ = 20.0
#: The no-op of the settle steps: no motion, gripper open (openpi's ``LIBERO_DUMMY_ACTION``).
SETTLE_ACTION = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)
#: Visual meshes drawn on a 5 mm grid (:mod:`envs.builtin.mesh_detail`): LIBERO's meshes are detailed far
#: below a 128 px image's pixels and a CPU renderer pays per triangle; the images change a little
#: (docs/libero.md gives how much).
DEFAULT_MESH_CELL = 0.005
COLLISION_GROUP = 0  # robosuite models keep collision geoms in group 0 and do not draw them


def quat_to_axis_angle(quat_wxyz: np.ndarray) -> np.ndarray:
    """Axis-angle (3,) of a unit quaternion (w, x, y, z), robosuite's ``quat2axisangle`` convention
    (angle in [0, 2 pi], no sign flip of the quaternion)."""
    w = min(max(float(quat_wxyz[0]), -1.0), 1.0)
    den = math.sqrt(1.0 - w * w)
    if den < 1e-8:
        return np.zeros(3)
    return np.asarray(quat_wxyz[1:4], dtype=np.float64) * (2.0 * math.acos(w) / den)


def _mount_floor_robot() -> None:
    """Give the port's floor-scene Panda (libero_object, some libero_90 scenes) robosuite 1.5's empty mount.

    rpent-libero 0.2.0's ``OnTheGroundPanda`` names no base, which robosuite 1.4 read as "no mount" and
    robosuite 1.5 cannot build (``robot_base_factory(None)`` fails); ``NullMount`` is robosuite 1.5's
    mount without bodies of its own, so the robot and its dynamics are the ones LIBERO's scenes had.
    """
    from libero.libero.envs.robots import OnTheGroundPanda

    if OnTheGroundPanda.default_base.fget(None) is None:
        OnTheGroundPanda.default_base = property(lambda self: "NullMount")


def _same_task(first: str, second: str) -> bool:
    """Whether two task names (``<suite>/<index or name>``) name one task."""
    return get_task(first).task_id == get_task(second).task_id


class LiberoEnv(WrappedSimulatorEnv):
    """A LIBERO task with camera images, end-effector state, its instruction and official init states.

    ``task`` is ``<suite>/<index or name>``; ``max_episode_steps`` None: the suite's limit
    (:data:`envs.libero.suites.MAX_EPISODE_STEPS`).
    """

    supports_skipping_images = True

    def __init__(
        self,
        task: str = "libero_spatial/0",
        image_size: int | tuple[int, int] = 128,
        cameras: tuple[str, ...] = DEFAULT_CAMERAS,
        settle_steps: int = 10,
        max_episode_steps: int | None = None,
        render_quality: str = "fast",
        mesh_cell: float | None = DEFAULT_MESH_CELL,
        skip_unseen: bool = True,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self.check_render_mode(render_mode)
        if settle_steps < 0:
            raise ValueError(f"settle_steps must be >= 0, got {settle_steps}")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be positive or None (the suite's limit), got {max_episode_steps}")
        self.image_shape = image_shape(image_size)
        self._cameras = tuple(cameras)
        self.settle_steps = int(settle_steps)
        self._max_steps_override = max_episode_steps
        self.render_quality = render_quality
        self.mesh_cell = mesh_cell
        self.skip_unseen = bool(skip_unseen)
        self.render_mode = render_mode
        self._inner: Any = None
        self._renderer: CameraRenderer | None = None
        self._build(get_task(task))
        self._elapsed_steps = 0
        self._needs_reset = True

    # ----------------------------------------------------------------- construction
    def _build(self, task: LiberoTask) -> None:
        from libero.libero.envs.env_wrapper import ControlEnv

        _mount_floor_robot()
        self._close_inner()
        self._inner = ControlEnv(
            bddl_file_name=str(task.bddl_file),
            has_renderer=False,
            has_offscreen_renderer=False,
            use_camera_obs=False,
            hard_reset=False,  # a hard reset rebuilds the model every episode and leaks GL memory
            ignore_done=True,
            control_freq=CONTROL_HZ,
        )
        inner = self._inner.env
        # Nothing reads robosuite's observables (the state and images are read here), yet robosuite visits
        # each of them after every physics substep: without them a step is the same, only quicker.
        inner._observables = {}
        # robosuite's OSC substeps computed directly (osc_substeps): the same torques, less Python.
        self.fast_substeps = osc_substeps.install(inner)
        self._inner.reset()
        self.task = task
        self._init_states = official_init_states(task.task_id)
        self.model: mujoco.MjModel = inner.sim.model._model
        self.data: mujoco.MjData = inner.sim.data._data
        available = [self.model.camera(i).name for i in range(self.model.ncam)]
        unknown = [name for name in self._cameras if name not in available]
        if unknown:
            raise ValueError(f"unknown camera(s) {unknown} in LIBERO {task.task_id}; available: {available}")
        robot = inner.robots[0]
        self._eef_site = int(robot.eef_site_id["right"])
        self._hand_body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, robot.robot_model.eef_name["right"])
        self._finger_qpos = np.asarray(robot._ref_gripper_joint_pos_indexes["right"], dtype=np.int64)
        self._renderer = CameraRenderer(
            self.model, self.image_shape, self.render_quality, self.mesh_cell,
            skip_unseen=self.skip_unseen, hidden_geom_groups=(COLLISION_GROUP,),
        )  # fmt: skip
        low, high = (np.asarray(bound, dtype=np.float32) for bound in inner.action_spec)
        self.action_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.observation_space = make_observation_space(self._cameras, self.image_shape, STATE_DIM)
        self.env_spec = EnvSpec(
            name="libero",
            task=task.task_id,
            tasks=tuple(other.task_id for other in suite_tasks(task.suite)),
            camera_names=self._cameras,
            image_size=self.image_shape,
            state_dim=STATE_DIM,
            action_low=tuple(float(v) for v in low),
            action_high=tuple(float(v) for v in high),
            action_names=ACTION_NAMES,
            control_hz=CONTROL_HZ,
            max_episode_steps=int(self._max_steps_override or task.max_episode_steps),
            extra={"suite": task.suite, "num_init_states": len(self._init_states), "settle_steps": self.settle_steps},
        )
        self._needs_reset = True

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        init_state = options.get("init_state")
        task_id = options.get("task")
        if isinstance(init_state, dict):
            if "index" not in init_state or "task" not in init_state:
                raise ValueError(
                    f"init_state must be an index 0..{len(self._init_states) - 1} or a dict with keys "
                    f"'task' and 'index' as reset returns in info['init_state'], got keys {sorted(init_state)}"
                )
            task_id = self.task_of_reset(options, init_state, _same_task)
            init_state = init_state["index"]
        if task_id is not None and get_task(task_id).task_id != self.task.task_id:
            self._build(get_task(task_id))
        if init_state is None:
            index = int(self.np_random.integers(len(self._init_states)))
        else:
            index = int(init_state)
            if not 0 <= index < len(self._init_states) or index != init_state:
                raise ValueError(
                    f"init_state {init_state!r}: {self.task.task_id} has official init states 0..{len(self._init_states) - 1}"
                )
        inner = self._inner.env
        # LIBERO's reset places the fixtures (cabinets, stoves) by moving their bodies in the model, drawing
        # from numpy's global generator, and its init states hold only joint positions and velocities: draw
        # the placement from init state k's own seed, so that k always gives the same scene.
        saved = np.random.get_state()
        try:
            np.random.seed(index)
            inner.rng = np.random.default_rng(index)
            self._inner.reset()
        finally:
            np.random.set_state(saved)
        self._inner.set_init_state(self._init_states[index])
        for _ in range(self.settle_steps):
            inner.step(SETTLE_ACTION)
        self._elapsed_steps = 0
        self._needs_reset = False
        info = {"is_success": False, "task": self.task.task_id, "init_state": {"task": self.task.task_id, "index": index}}
        return self.observe(), info

    def step(self, action: Any):
        action = self.checked_action(action)
        _, reward, _, _ = self._inner.env.step(action)
        self._elapsed_steps += 1
        success = bool(reward > 0)  # LIBERO's sparse reward is its success predicate
        truncated = self._elapsed_steps >= self.env_spec.max_episode_steps and not success
        info = {"is_success": success, "task": self.task.task_id}
        observation = {"images": {}, "state": self._state(), "instruction": self.task.instruction}
        if not self.skip_images:
            observation["images"] = self._images()
        return observation, float(success), success, truncated, info

    def observe(self) -> dict[str, Any]:
        return {"images": self._images(), "state": self._state(), "instruction": self.task.instruction}

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self._image(self._cameras[0] if self._cameras else "agentview")

    # ----------------------------------------------------------------- observation
    def _state(self) -> np.ndarray:
        state = np.empty(STATE_DIM, dtype=np.float32)
        state[0:3] = self.data.site_xpos[self._eef_site]
        state[3:6] = quat_to_axis_angle(self.data.xquat[self._hand_body])
        state[6:8] = self.data.qpos[self._finger_qpos]
        return state

    def _image(self, camera: str) -> np.ndarray:
        upright = self._renderer.render(self.data, camera)  # the camera's view, top row first
        return np.ascontiguousarray(upright[:, ::-1])  # robosuite's rows reversed, then columns: openpi's turn

    def _images(self) -> dict[str, np.ndarray]:
        return {name: self._image(name) for name in self._cameras}

    # ----------------------------------------------------------------- privileged state (experts only)
    @property
    def libero_env(self) -> Any:
        """LIBERO's task environment (a robosuite env) for scripted experts and tests."""
        return self._inner.env


#: The factory registered as ``libero`` in :mod:`envs.registry`: the class, which normalises its own options.
make_libero_env = LiberoEnv
