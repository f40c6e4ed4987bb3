"""The tabletop env's per-step path (plain floats, cached cameras, vectorised contact checks) gives,
bit for bit, what the straightforward code gives: the env as first written (numpy arrays, ``np.linalg.norm``,
a loop over ``MjContact`` structs, ``mujoco.Renderer``), kept here as the reference.

Every task, expert and random actions (so grasps, contacts, successes and truncations all occur),
sparse and dense rewards, yaw control, images every step and only where a 4-action chunk ends.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from envs.builtin import arm
from envs.builtin.rendering import CameraRenderer
from envs.builtin.scene import TabletopScene
from envs.builtin.tabletop import (
    CONTROL_HZ,
    DENSE_REWARD_SCALE,
    WORKSPACE_HIGH,
    WORKSPACE_LOW,
    YAW_LIMIT,
    TabletopEnv,
    make_tabletop_env,
)
from envs.builtin.tasks import TASKS, base, place_in_bowl, push, reach, stack
from envs.experts import get_expert

FINGER_OPEN = 0.045


class ReferenceRenderer:
    """The renderer as first written: ``mujoco.Renderer``, the camera looked up by name every image."""

    def __init__(self, model: mujoco.MjModel, image_shape: tuple[int, int]) -> None:
        height, width = image_shape
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.quality.offsamples = 0
        self.renderer = mujoco.Renderer(model, height=height, width=width)
        self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False

    def render(self, data: mujoco.MjData, camera: str) -> np.ndarray:
        self.renderer.update_scene(data, camera=camera)
        return self.renderer.render()

    def close(self) -> None:
        self.renderer.close()


class ReferenceScene(TabletopScene):
    def fingers_touch_block(self, color: str) -> bool:
        block_geom = self.block_geoms[self.block_index(color)]
        finger_geoms = {self.model.geom("finger_left").id, self.model.geom("finger_right").id}
        for contact in self.data.contact[: self.data.ncon]:
            pair = {contact.geom1, contact.geom2}
            if block_geom in pair and pair & finger_geoms:
                return True
        return False

    @property
    def gripper_opening(self) -> float:
        return float(self.data.qpos[self.finger_qpos_addr].sum())


class ReferenceTabletopEnv(TabletopEnv):
    """reset/step/observation as first written, on numpy arrays."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scene = ReferenceScene(self.model, self.data)
        self._renderer.close()
        self._renderer = ReferenceRenderer(self.model, self.image_shape)

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        self._ee_target = np.asarray(self._layout["ee_start"], dtype=float).copy()
        self._previous_ee = self.scene.ee_position
        self._progress = self.task.progress(self.scene, self._layout["target"])
        return observation, info

    def step(self, action):
        action = np.clip(np.asarray(action, dtype=np.float64), self.action_space.low, self.action_space.high)
        self._ee_target = np.clip(self._ee_target + action[:3], WORKSPACE_LOW, WORKSPACE_HIGH)
        if self.control_yaw:
            self._yaw_target = float(np.clip(self._yaw_target + action[3], -YAW_LIMIT, YAW_LIMIT))
        self.data.ctrl[:5] = arm.solve_ik(self._ee_target, self._yaw_target)
        self.data.ctrl[5:7] = FINGER_OPEN * (1.0 - action[-1]) / 2.0
        self._previous_ee = self.scene.ee_position
        mujoco.mj_step(self.model, self.data, nstep=self.substeps)
        self._elapsed_steps += 1
        success = self.task.is_success(self.scene, self._layout["target"])
        reward = 1.0 if success else 0.0
        progress = self.task.progress(self.scene, self._layout["target"])
        if self.dense_reward:
            reward += DENSE_REWARD_SCALE * (progress - self._progress)
        self._progress = progress
        truncated = self._elapsed_steps >= self.env_spec.max_episode_steps and not success
        info = {"is_success": success, "task": self.task.name}
        return self._observation(with_images=not self.skip_images), reward, success, truncated, info

    def _observation(self, with_images: bool = True):
        ee = self.scene.ee_position
        yaw = self.scene.gripper_yaw
        velocity = (ee - self._previous_ee) * CONTROL_HZ
        state = np.array(
            [*ee, np.sin(yaw), np.cos(yaw), self.scene.gripper_opening, *velocity], dtype=np.float32
        )
        images = {name: self._renderer.render(self.data, name) for name in self._cameras} if with_images else {}
        return {"images": images, "state": state, "instruction": self._layout["instruction"]}


def reference_far_enough(point, placed, kind, extra=0.0):
    for other_kind, other in placed:
        spacing = max(base.MIN_SPACING[kind], base.MIN_SPACING[other_kind]) + extra
        if np.linalg.norm(point - other) < spacing:
            return False
    return True


def reference_segment_distance(point, start, end):
    direction = end - start
    t = np.clip(np.dot(point - start, direction) / np.dot(direction, direction), 0.0, 1.0)
    return float(np.linalg.norm(point - (start + t * direction)))


def reference_adjust_layout(self, rng, layout, target):
    index = layout["block_colors"].index(target["block"])
    block = np.array(layout["block_poses"][index][:2])
    obstacles = [("bowl", np.array(layout["bowl_position"]))] + [
        ("block", np.array(pose[:2])) for i, pose in enumerate(layout["block_poses"]) if i != index
    ]
    (x_low, x_high), (y_low, y_high) = base.OBJECT_REGION
    for _ in range(2000):
        angle = rng.uniform(-np.pi, np.pi)
        direction = np.array([np.cos(angle), np.sin(angle)])
        zone = block + rng.uniform(*push.PUSH_DISTANCE) * direction
        pusher = block - push.PUSHER_BACKOFF * direction
        if not (x_low <= zone[0] <= x_high and y_low <= zone[1] <= y_high):
            continue
        if not (0.22 <= pusher[0] <= 0.6 and -0.3 <= pusher[1] <= 0.3):
            continue
        if all(reference_segment_distance(p, pusher, zone) > push.CLEARANCE[kind] for kind, p in obstacles):
            layout["zone_positions"][layout["zone_colors"].index(target["zone"])] = zone.round(5).tolist()
            return True
    return False


def _use_reference_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (base, reach, push, place_in_bowl, stack):
        monkeypatch.setattr(module, "vector_norm", np.linalg.norm)
    monkeypatch.setattr(base, "far_enough", reference_far_enough)
    monkeypatch.setattr(push.PushTask, "adjust_layout", reference_adjust_layout)


def _episodes(env, task: str, actions: list | None, images_every: int) -> tuple[list, list]:
    """Two episodes of ``task`` (an expert's, then random actions); ``actions`` replays recorded ones."""
    record, played = [], []
    rng = np.random.default_rng(len(task))
    for episode in range(2):
        observation, info = env.reset(seed=40 + episode, options={"task": task})
        record.append((observation, info["init_state"]))
        expert = get_expert("tabletop", task, env, noise_std=0.004, seed=episode) if episode == 0 else None
        for index in range(env.max_episode_steps):
            if actions is not None:
                action = actions.pop(0)
            elif expert is not None:
                action = expert.act(observation)
            else:
                action = rng.uniform(env.action_space.low * 1.2, env.action_space.high * 1.2).astype(np.float32)
            played.append(action)
            env.skip_images = (index + 1) % images_every != 0
            observation, reward, terminated, truncated, info = env.step(action)
            record.append((observation, reward, terminated, truncated, info))
            if terminated or truncated:
                break
    return record, played


def _assert_identical(expected, actual) -> None:
    if isinstance(expected, dict):
        assert expected.keys() == actual.keys()
        for key in expected:
            _assert_identical(expected[key], actual[key])
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual)
        for a, b in zip(expected, actual, strict=True):
            _assert_identical(a, b)
    elif isinstance(expected, np.ndarray):
        assert expected.dtype == actual.dtype and expected.shape == actual.shape
        assert expected.tobytes() == actual.tobytes()
    elif isinstance(expected, float):  # also numpy's float64: the type must match too
        assert type(actual) is type(expected) and expected == actual
        assert math.copysign(1.0, expected) == math.copysign(1.0, actual)
    else:
        assert type(expected) is type(actual) and expected == actual


@pytest.mark.parametrize(
    "options",
    [
        {"dense_reward": False, "images_every": 4},
        {"dense_reward": True, "images_every": 1, "control_yaw": True},
        {"dense_reward": True, "images_every": 4, "fixed_scenes": True, "image_size": (40, 56)},
    ],
    ids=["sparse-chunk-ends", "dense-yaw-every-step", "dense-fixed-scenes"],
)
def test_every_task_steps_bit_for_bit_as_the_reference(monkeypatch, options):
    options = dict(options)
    images_every = options.pop("images_every")
    reference = ReferenceTabletopEnv(**options)
    fast = make_tabletop_env(**options)
    successes = 0
    try:
        for task in TASKS:
            with monkeypatch.context() as patch:
                _use_reference_tasks(patch)
                expected, actions = _episodes(reference, task, None, images_every)
            actual, _ = _episodes(fast, task, list(actions), images_every)
            _assert_identical(expected, actual)
            successes += sum(1 for step in expected if len(step) == 5 and step[4]["is_success"])
    finally:
        reference.close()
        fast.close()
    assert successes >= 5  # the experts succeed: success, termination and grasp checks were compared


def test_vector_norm_is_numpys_norm_bit_for_bit():
    vectors = np.random.default_rng(0).normal(size=(20000, 3)) * np.logspace(-3, 1, 20000)[:, None]
    for vector in vectors:
        assert base.vector_norm(vector) == np.linalg.norm(vector)
        assert base.vector_norm(vector[:2]) == np.linalg.norm(vector[:2])


def test_ik_on_floats_is_the_array_solution():
    rng = np.random.default_rng(1)
    for _ in range(2000):
        target = rng.uniform(WORKSPACE_LOW, WORKSPACE_HIGH)
        yaw = float(rng.uniform(-YAW_LIMIT, YAW_LIMIT))
        joints = arm.solve_ik_floats(*target.tolist(), yaw)
        assert np.array(joints).tobytes() == arm.solve_ik(target, yaw).tobytes()


def test_renderer_gives_upright_contiguous_images_and_names_a_missing_camera():
    env = make_tabletop_env(cameras=())
    renderer = CameraRenderer(env.model, (32, 32))
    try:
        mujoco.mj_forward(env.model, env.data)
        image = renderer.render(env.data, "front")
        assert image.shape == (32, 32, 3) and image.dtype == np.uint8 and image.flags["C_CONTIGUOUS"]
        reference = ReferenceRenderer(env.model, (32, 32))
        np.testing.assert_array_equal(image, reference.render(env.data, "front"))
        reference.close()
        with pytest.raises(ValueError, match="no_such_camera"):
            renderer.render(env.data, "no_such_camera")
    finally:
        renderer.close()
        env.close()
