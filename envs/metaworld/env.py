"""MetaWorld v3 tasks through the vla-rl env protocol (:mod:`envs.base`).

One :class:`MetaWorldEnv` wraps one MetaWorld task environment (rebuilt when ``reset`` switches the
task). What it does beyond a thin wrapper, and why:

- Placements are drawn per episode from the env's seeded generator: ``reset(seed=s)`` gives the same
  object and goal positions for the same ``s``. By default they are fresh (MetaWorld's
  ``seeded_rand_vec``), so evaluation meets placements no demonstration or rollout had; with
  ``variations_seed=k`` they are drawn from the task's 50 fixed variations of ``metaworld.MT1(task,
  seed=k)`` (:mod:`envs.metaworld.variations`), the protocol of MetaWorld's MT benchmarks, RLinf and piRL.
- ``info["init_state"]`` holds the placement vector (``rand_vec``) and the full MuJoCo integration
  state after the reset; ``reset(options={"init_state": ...})`` replays the reset with that vector
  (MetaWorld's task bookkeeping, e.g. the goal and initial object positions that decide success,
  follows from it) and then sets the physics to the captured state, so the episode is the same to
  the last bit.
- Soft resets only: the model is built once per task and reset in place (``mj_resetData``), so an
  episode allocates nothing.
- Cameras are rendered by :class:`envs.builtin.rendering.CameraRenderer` on MetaWorld's model with
  shadows, reflections and multisampling off and the arm's meshes coarsened to ``mesh_cell``
  (see :mod:`envs.builtin.mesh_detail`), the only costs that showed on CPU, and, with ``skip_unseen``
  (the default), without the geoms outside each camera's view (:mod:`envs.builtin.view_culling`: the
  same pixels; the gripper camera sees none of the arm's meshes), the floor drawn in ``plane_grid``
  cells (1 m instead of 0.1 m: the same pixels, 1.9k fewer vertices per image) and no shadow map in
  the GL context (64 MiB less per env). Images come out upright:
  MetaWorld's ``corner`` cameras look at the table upside down, so their images are turned 180 degrees.
- Images can be skipped inside an action chunk (``skip_images``; ``observe()`` renders them).
- Success is MetaWorld's own ``info["success"]``; the episode terminates on it.

Action (robot units), shape (4,): ``[dx, dy, dz, gripper]``: the hand's mocap target moves by
(dx, dy, dz) metres per step (+-0.01, MetaWorld's ``action_scale``), in the world frame; gripper
effort -1 open, +1 close.

State ``obs["state"]`` (float32, 4): ``[hand_x, hand_y, hand_z, gripper_opening]``, the hand position
(m, world frame) and the normalised distance between the fingers (0 closed, 1 open), MetaWorld's own
first four observation entries (its object and goal entries are privileged: experts only). With
``observe_goal=True`` the state is 7 values: these four and the goal's position (m, world frame),
MetaWorld's last three entries, as in the observation of its MT benchmarks (goal observable); the
images are then no longer the only place the policy learns where the goal is.

Reward: sparse 1.0 on the step the task succeeds; with ``dense_reward=True`` plus a potential-based
shaping term, as the built-in suite's: ``DENSE_REWARD_SCALE * (progress_t - progress_{t-1})`` with
MetaWorld's shaped reward (0 to 10) divided by 10 as the progress (the first step's shaping is 0). Its
shaped reward itself is not the reward: summed per step, it pays more for hovering near success
until the time limit than for the success that ends the episode.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from envs.base import EnvSpec, WrappedSimulatorEnv, image_shape, make_observation_space
from envs.builtin.rendering import CameraRenderer
from envs.metaworld.tasks import INSTRUCTIONS, METAWORLD_TASKS, check_task
from envs.metaworld.variations import mt1_variations

DEFAULT_CAMERAS = ("corner", "gripperPOV")
#: Mesh grid (m) of the rendered arm: 13k of its 67k triangles are left, a 64 px image looks the same.
DEFAULT_MESH_CELL = 0.01
#: Grid cell (m) of the drawn floor (MetaWorld's: 0.1): the same pixels in all 7 cameras, fewer vertices.
DEFAULT_PLANE_GRID = 1.0
SHAPED_REWARD_MAX = 10.0  # MetaWorld v3's shaped rewards lie in [0, 10]
DENSE_REWARD_SCALE = 0.5  # as the built-in suite's (envs/builtin/tabletop.py)
#: metaworld 3.1.1 pins mujoco==3.3.0, which would replace vla-rl's mujoco (and change the tabletop
#: physics); it runs on vla-rl's mujoco 3.9 (its conformance and experts are tested there), and its other
#: dependencies are vla-rl's own, so it is installed without them.
INSTALL_HINT = "pip install --no-deps metaworld==3.1.1"
STATE_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
_INIT_KEYS = ("task", "instruction", "rand_vec", "physics")


def metaworld_classes() -> dict[str, type]:
    """MetaWorld's task name -> environment class (``ALL_V3_ENVIRONMENTS``).

    Raises:
        ImportError: metaworld is not installed, with the command that installs it.
    """
    try:
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    except ImportError as error:
        raise ImportError(f"the metaworld env needs the metaworld package: {INSTALL_HINT} ({error})") from None
    return ALL_V3_ENVIRONMENTS


_COMPILED: dict[str, mujoco.MjModel] = {}
_CACHED_CLASSES: dict[str, type] = {}


def _compiled_once(self: Any) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """gymnasium's ``MujocoEnv._initialize_simulation`` with each XML compiled once per process.

    Compiling a MetaWorld scene (its STL meshes) takes seconds, a deep copy of the compiled model far less;
    a copy is the model a fresh compile gives, and every env owns its copy (episodes move bodies
    and sites in the model).
    """
    if self.fullpath not in _COMPILED:
        _COMPILED[self.fullpath] = mujoco.MjModel.from_xml_path(self.fullpath)
    model = copy.deepcopy(_COMPILED[self.fullpath])
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
    return model, mujoco.MjData(model)


def environment_class(task: str) -> type:
    """MetaWorld's class of ``task``, subclassed to compile its scene once per process."""
    base = metaworld_classes()[task]
    if task not in _CACHED_CLASSES:
        _CACHED_CLASSES[task] = type(base.__name__, (base,), {"_initialize_simulation": _compiled_once})
    return _CACHED_CLASSES[task]


class MetaWorldEnv(WrappedSimulatorEnv):
    """A MetaWorld v3 task with camera images, proprioception and an instruction.

    ``skip_unseen=False`` sends every geom to every camera and ``plane_grid=None`` draws the floor in
    MetaWorld's own cells (the same images either way, more vertices).
    """

    tasks = METAWORLD_TASKS
    #: what the class, the registered factory, offers beside its tasks (:mod:`envs.registry`): a task's goal for
    #: target frames, its scripted expert and its speed benchmark
    target = "envs.metaworld.env:goal_position"
    expert = "envs.metaworld.expert:make_expert"
    benchmark = "envs.metaworld.benchmark:measure_env_speed"
    supports_skipping_images = True

    def __init__(
        self,
        task: str = "reach-v3",
        image_size: int | tuple[int, int] = 64,
        cameras: tuple[str, ...] = DEFAULT_CAMERAS,
        max_episode_steps: int | None = None,
        dense_reward: bool = False,
        render_quality: str = "fast",
        mesh_cell: float | None = DEFAULT_MESH_CELL,
        render_mode: str | None = None,
        skip_unseen: bool = True,
        plane_grid: float | None = DEFAULT_PLANE_GRID,
        observe_goal: bool = False,
        variations_seed: int | None = None,
    ) -> None:
        super().__init__()
        self.check_render_mode(render_mode)
        if max_episode_steps is not None and int(max_episode_steps) < 1:
            raise ValueError(f"max_episode_steps must be a positive number of steps or None, got {max_episode_steps}")
        self.image_shape = image_shape(image_size)
        self.dense_reward = bool(dense_reward)
        self.render_quality = render_quality
        self.mesh_cell = mesh_cell
        self.skip_unseen = bool(skip_unseen)
        self.plane_grid = plane_grid
        self.observe_goal = bool(observe_goal)
        self._state_dim = 7 if self.observe_goal else 4
        if variations_seed is not None and (isinstance(variations_seed, bool) or not isinstance(variations_seed, int)):
            raise ValueError(
                f"variations_seed must be null (fresh placements) or an integer (MetaWorld's MT1 seed), got "
                f"{variations_seed!r}"
            )
        self.variations_seed = variations_seed
        self._variations: np.ndarray | None = None  # the task's fixed placements, with variations_seed
        self.render_mode = render_mode
        self._cameras = tuple(cameras)
        self._max_steps_override = max_episode_steps
        self._inner: Any = None
        self._renderer: CameraRenderer | None = None
        self._upside_down: frozenset[str] = frozenset()
        self._last_obs = np.zeros(39)
        self._instruction = ""
        self._elapsed_steps = 0
        self._progress: float | None = None  # the dense reward's potential (progress), from an episode's first step
        self._needs_reset = True
        self._build(check_task(task))

    # ----------------------------------------------------------------- construction
    def _build(self, task: str) -> None:
        """(Re)create MetaWorld's environment of ``task`` and everything derived from it."""
        cls = environment_class(task)
        self._close_inner()
        inner = cls(render_mode=None, width=self.image_shape[1], height=self.image_shape[0])
        inner._set_task_called = True  # placements come from rand_vec, drawn below, not from a Task
        inner._freeze_rand_vec = False
        inner.seeded_rand_vec = True  # rand_vec from inner.np_random, which reset(seed=) seeds
        inner._partially_observable = False  # the goal in MetaWorld's observation, for the experts
        inner.__dict__.pop("sawyer_observation_space", None)  # a cached property of the above
        self._metaworld_horizon = int(inner.max_path_length)
        inner.max_path_length = np.iinfo(np.int64).max  # truncation is ours (max_episode_steps)
        self._inner, self.task = inner, task
        if self.variations_seed is not None:
            self._variations = mt1_variations(task, self.variations_seed)
        self.model: mujoco.MjModel = inner.model
        self.data: mujoco.MjData = inner.data
        available = [self.model.camera(i).name for i in range(self.model.ncam)]
        unknown = [name for name in self._cameras if name not in available]
        if unknown:
            raise ValueError(f"unknown camera(s) {unknown} in metaworld {task}; available: {available}")
        self._renderer = CameraRenderer(
            self.model, self.image_shape, self.render_quality, self.mesh_cell, self.skip_unseen, self.plane_grid
        )
        mujoco.mj_forward(self.model, self.data)
        self._upside_down = frozenset(  # the camera's up axis (cam_xmat's 2nd column) points down
            name for name in available if self.data.cam_xmat[self.model.camera(name).id].reshape(3, 3)[2, 1] < 0
        )
        scale = float(inner.action_scale)
        self.action_space = gym.spaces.Box(
            np.array([-scale] * 3 + [-1.0], dtype=np.float32), np.array([scale] * 3 + [1.0], dtype=np.float32)
        )
        self._native_scale = np.array([1.0 / scale] * 3 + [1.0])
        self.observation_space = make_observation_space(self._cameras, self.image_shape, self._state_dim)
        self.env_spec = EnvSpec(
            name="metaworld",
            task=task,
            tasks=METAWORLD_TASKS,
            camera_names=self._cameras,
            image_size=self.image_shape,
            state_dim=self._state_dim,
            action_low=tuple(float(v) for v in self.action_space.low),
            action_high=tuple(float(v) for v in self.action_space.high),
            action_names=("dx", "dy", "dz", "gripper"),
            control_hz=1.0 / (inner.frame_skip * self.model.opt.timestep),
            max_episode_steps=int(self._max_steps_override or self._metaworld_horizon),
            extra={"metaworld_horizon": self._metaworld_horizon},
        )
        self._needs_reset = True

    # ----------------------------------------------------------------- gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        init_state = options.get("init_state")
        if init_state is not None:
            _check_init_state(init_state)
        task = self.task_of_reset(options, init_state)
        if task is not None and task != self.task:
            self._build(check_task(task))
        if seed is not None:
            self._inner.np_random = np.random.default_rng(seed)
        if init_state is None:
            if self._variations is None:
                self._inner.reset()
            else:
                self._reset_with(self._variations[self._inner.np_random.integers(len(self._variations))])
            # MetaWorld places the goal site in the model after its last mj_forward: without this
            # forward the first image would show the previous episode's goal.
            mujoco.mj_forward(self.model, self.data)
            init_state = self._capture(INSTRUCTIONS[self.task])
        else:
            self._replay(init_state)
        self._set_physics(init_state)  # both paths end alike, bit for bit
        self._instruction = init_state["instruction"]
        self._elapsed_steps = 0
        self._progress = None
        self._needs_reset = False
        info = {"is_success": False, "task": self.task, "init_state": copy.deepcopy(init_state)}
        return self.observe(), info

    def step(self, action: Any):
        action = self.checked_action(action)
        observation, shaped_reward, _, _, metaworld_info = self._inner.step(
            (action * self._native_scale).astype(np.float32)
        )
        self._last_obs = observation
        self._elapsed_steps += 1
        success = bool(metaworld_info["success"])
        reward = float(success)
        if self.dense_reward:
            progress = float(shaped_reward) / SHAPED_REWARD_MAX
            if self._progress is not None:
                reward += DENSE_REWARD_SCALE * (progress - self._progress)
            self._progress = progress
        truncated = self._elapsed_steps >= self.env_spec.max_episode_steps and not success
        info = {"is_success": success, "task": self.task}
        obs = self._observation(images=not self.skip_images)
        return obs, reward, success, truncated, info

    def observe(self) -> dict[str, Any]:
        return self._observation(images=True)

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return self._render(self._cameras[0] if self._cameras else DEFAULT_CAMERAS[0])

    # ----------------------------------------------------------------- internals
    def _capture(self, instruction: str) -> dict[str, Any]:
        """The init state of the episode just reset (JSON-able: lists of floats survive a round trip)."""
        physics = np.empty(mujoco.mj_stateSize(self.model, STATE_SPEC))
        mujoco.mj_getState(self.model, self.data, physics, STATE_SPEC)
        return {
            "task": self.task,
            "instruction": instruction,
            "rand_vec": np.asarray(self._inner._last_rand_vec, dtype=float).tolist(),
            "physics": physics.tolist(),
        }

    def _replay(self, init_state: dict[str, Any]) -> None:
        """Reset with the episode's placement vector (MetaWorld's goal and object bookkeeping)."""
        size = mujoco.mj_stateSize(self.model, STATE_SPEC)
        if len(init_state["physics"]) != size:
            raise ValueError(
                f"init_state['physics'] has {len(init_state['physics'])} values but metaworld {self.task} needs "
                f"{size}: it comes from another MetaWorld or MuJoCo version"
            )
        self._reset_with(init_state["rand_vec"])

    def _reset_with(self, rand_vec: Any) -> None:
        """MetaWorld's reset with the given placement vector instead of a drawn one."""
        self._inner._last_rand_vec = np.array(rand_vec, dtype=float)
        self._inner._freeze_rand_vec = True
        try:
            self._inner.reset()
        finally:
            self._inner._freeze_rand_vec = False

    def _set_physics(self, init_state: dict[str, Any]) -> None:
        """Set the captured integration state, recompute what follows from it, and read MetaWorld's observation."""
        mujoco.mj_setState(self.model, self.data, np.asarray(init_state["physics"], dtype=float), STATE_SPEC)
        mujoco.mj_forward(self.model, self.data)
        self._last_obs = self._inner._get_obs()

    def _render(self, camera: str) -> np.ndarray:
        image = self._renderer.render(self.data, camera)
        return np.ascontiguousarray(image[::-1, ::-1]) if camera in self._upside_down else image

    def _observation(self, images: bool) -> dict[str, Any]:
        hand = self._last_obs[:4]
        state = np.concatenate([hand, self._last_obs[-3:]]) if self.observe_goal else hand
        state = np.asarray(state, dtype=np.float32)
        rendered = {name: self._render(name) for name in self._cameras} if images else {}
        return {"images": rendered, "state": state, "instruction": self._instruction}

    # ----------------------------------------------------------------- privileged state (experts only)
    @property
    def metaworld_env(self) -> Any:
        """The wrapped MetaWorld environment (for scripted experts and tests)."""
        return self._inner

    @property
    def metaworld_observation(self) -> np.ndarray:
        """MetaWorld's own (39,) observation of the current state: hand, objects, previous frame, goal."""
        return np.asarray(self._last_obs, dtype=float).copy()


def _check_init_state(init_state: Any) -> None:
    if not isinstance(init_state, dict) or any(key not in init_state for key in _INIT_KEYS):
        keys = sorted(init_state) if isinstance(init_state, dict) else "-"
        raise ValueError(
            f"init_state must be a dict with keys {list(_INIT_KEYS)} as returned in info['init_state'] by reset; "
            f"got {type(init_state).__name__} with keys {keys}"
        )
    check_task(init_state["task"])


def goal_position(env: gym.Env, reset_info: dict[str, Any]) -> np.ndarray:
    """A task's goal, x-y-z (m): what MetaWorld's success is measured against (the factory's ``target`` reader)."""
    return np.asarray(env.unwrapped.metaworld_env._target_pos, dtype=float).copy()


#: The factory registered as ``metaworld`` in :mod:`envs.registry`: the class, which normalises its own options
#: and carries the factory's ``target``, ``expert`` and ``benchmark`` (:class:`MetaWorldEnv`).
make_metaworld_env = MetaWorldEnv
