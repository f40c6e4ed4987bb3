"""Leaving unseen geoms out of camera images (envs/builtin/view_culling.py) and the GL context settings of
envs/builtin/rendering.py: known answers for the frustum test, and images that stay the same to the bit."""

from __future__ import annotations

import importlib.util

import mujoco
import numpy as np
import pytest

from envs.builtin.rendering import CameraRenderer
from envs.builtin.view_culling import frustum_planes, spheres_outside_frustum

needs_metaworld = pytest.mark.skipif(importlib.util.find_spec("metaworld") is None, reason="metaworld is not installed")

# an eye at the origin looking along +x with +z up, 90 degrees wide and high, clipping at 0.1 and 10 m
PLANES = frustum_planes((np.zeros(3), np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])), (-1, 1, -1, 1), 0.1, 10.0)


@pytest.mark.parametrize(
    ("center", "radius", "outside"),
    [
        ((5.0, 0.0, 0.0), 0.1, False),  # straight ahead
        ((5.0, 6.0, 0.0), 0.5, True),  # left of the view (+y is the camera's left): 1/sqrt(2) m beyond
        ((5.0, -6.0, 0.0), 0.5, True),  # right of it
        ((5.0, 5.5, 0.0), 0.5, False),  # 0.35 m beyond the side plane, radius 0.5: reaches in
        ((5.0, 0.0, 6.0), 0.5, True),  # above
        ((5.0, 0.0, -5.5), 0.5, False),  # below, reaching in
        ((-1.0, 0.0, 0.0), 0.5, True),  # behind the eye
        ((0.0, 0.0, 0.0), 0.5, False),  # around the eye: reaches past the near plane
        ((11.0, 0.0, 0.0), 0.5, True),  # beyond the far plane
        ((10.3, 0.0, 0.0), 0.5, False),
    ],
)
def test_a_sphere_is_outside_only_when_wholly_beyond_one_plane(center, radius, outside):
    assert bool(spheres_outside_frustum(np.array([center]), np.array([radius]), PLANES)[0]) is outside


def test_fast_contexts_have_no_shadow_map_and_an_image_sized_buffer_with_mujocos_pixels():
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><light pos="0 0 2"/><geom type="plane" size="1 1 0.05" rgba="0.4 0.5 0.6 1"/>'
        '<geom type="box" size="0.1 0.1 0.1" pos="0 0 0.1" rgba="0.8 0.2 0.2 1"/>'
        '<camera name="top" pos="0.3 -0.6 0.8" xyaxes="1 0 0 0 0.8 0.6"/></worldbody></mujoco>'
    )
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    model.vis.quality.offsamples = 0  # as "fast" sets it
    renderer = CameraRenderer(model, (48, 64), "fast")
    coarse_floor = CameraRenderer(model, (48, 64), "fast", plane_grid=0.5)
    reference = mujoco.Renderer(model, 48, 64)  # what mujoco draws with the same flags and full settings
    try:
        image = renderer.render(data, "top")
        context = renderer._mjr_context
        assert (context.shadowFBO, context.offWidth, context.offHeight) == (0, 64, 48)
        reference.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        reference.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
        reference.update_scene(data, "top")
        np.testing.assert_array_equal(image, reference.render())
        assert len(np.unique(image.reshape(-1, 3), axis=0)) > 3  # plane, box and sky: not a blank image
        # a spot light is shaded per vertex, so a coarser floor grid shades this floor differently (MetaWorld's
        # lights are directional: there the images stay the same, see the MetaWorld test below)
        assert np.any(coarse_floor.render(data, "top") != image)
        assert model.vis.quality.shadowsize == 4096 and model.geom_size[0, 2] == 0.05  # the model is restored
    finally:
        renderer.close()
        coarse_floor.close()
        reference.close()


@needs_metaworld
def test_metaworld_images_are_the_same_without_unseen_geoms_and_with_a_coarse_floor_grid():
    from envs.metaworld.env import make_metaworld_env

    cameras = ("corner", "gripperPOV", "behindGripper")
    fast = make_metaworld_env("pick-place-v3", cameras=cameras)
    plain = make_metaworld_env("pick-place-v3", cameras=cameras, skip_unseen=False, plane_grid=None)
    try:
        colours = fast.model.geom_rgba.copy(), fast.model.site_rgba.copy(), fast.model.geom_size.copy()
        firsts = []
        for seed in (0, 1):  # two object and goal positions
            a, _ = fast.reset(seed=seed)
            b, _ = plain.reset(seed=seed)
            for _ in range(3):
                for camera in cameras:
                    np.testing.assert_array_equal(a["images"][camera], b["images"][camera], err_msg=camera)
                action = np.array([0.01, -0.01, -0.01, 1.0], dtype=np.float32)
                a, b = fast.step(action)[0], plain.step(action)[0]
            firsts.append(a["images"]["corner"])
        assert np.any(firsts[0] != firsts[1])  # the images follow the scene
        fast.unwrapped._renderer.render(fast.data, "gripperPOV")
        assert fast.unwrapped._renderer.culled >= 10  # the arm's links, behind and above the gripper camera
        for before, after in zip(colours, (fast.model.geom_rgba, fast.model.site_rgba, fast.model.geom_size), strict=True):
            np.testing.assert_array_equal(before, after)
    finally:
        fast.close()
        plain.close()


@pytest.mark.skipif(importlib.util.find_spec("robosuite") is None, reason="robosuite is not installed")
def test_robosuite_images_are_the_same_without_unseen_geoms():
    from envs.registry import make

    cameras = ("agentview", "robot0_eye_in_hand")
    fast = make("robosuite/Lift", image_size=32, cameras=cameras)
    plain = make("robosuite/Lift", image_size=32, cameras=cameras, skip_unseen=False)
    try:
        a, _ = fast.reset(seed=3)
        b, _ = plain.reset(seed=3)
        for _ in range(3):
            for camera in cameras:
                np.testing.assert_array_equal(a["images"][camera], b["images"][camera], err_msg=camera)
            action = fast.action_space.sample() * 0.5
            a, b = fast.step(action)[0], plain.step(action)[0]
        fast.unwrapped._renderer.render(fast.unwrapped.data, "robot0_eye_in_hand")
        assert fast.unwrapped._renderer.culled > 10  # the robot's base and links, behind the hand camera
    finally:
        fast.close()
        plain.close()
