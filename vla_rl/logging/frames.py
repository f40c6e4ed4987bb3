"""Video frames of one env, captured inside the process that holds the env.

A frame shows the chosen cameras side by side, each ``(height, width)``, so a frame is
``uint8 (height, width * len(cameras), 3)``. Two sources, chosen by what the env offers
(duck typing, not env kinds):

- :class:`MujocoFrameSource`: the env (``env.unwrapped``) holds a ``mujoco.MjModel`` as
  ``model`` and its ``mujoco.MjData`` as ``data`` and names the cameras: a second renderer
  draws them at the video size, independent of the (often smaller) observation images.
- :class:`ObservationFrameSource`: any protocol env: the observation images of the cameras,
  resized to the video size (bilinear).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from PIL import Image


class FrameSource(Protocol):
    def frame(self, observation: dict[str, Any]) -> np.ndarray:
        """uint8 ``(height, width * len(cameras), 3)`` for the env's current state."""

    def close(self) -> None: ...


def resize_image(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """uint8 ``(H, W, 3)`` -> uint8 ``(size[0], size[1], 3)``."""
    height, width = size
    if image.shape[:2] == (height, width):
        return image
    return np.asarray(Image.fromarray(image).resize((width, height), Image.BILINEAR))


class ObservationFrameSource:
    """The observation images of ``cameras``, resized to ``size`` and put side by side."""

    def __init__(self, cameras: Sequence[str], size: tuple[int, int]):
        self.cameras = tuple(cameras)
        self.size = size

    def frame(self, observation: dict[str, Any]) -> np.ndarray:
        images = observation["images"]
        missing = [camera for camera in self.cameras if camera not in images]
        if missing:
            raise KeyError(
                f"video camera(s) {missing} are not in the observation (cameras: {sorted(images)}); "
                "set eval.video.cameras to some of these"
            )
        return np.concatenate([resize_image(images[camera], self.size) for camera in self.cameras], axis=1)

    def close(self) -> None:
        pass


class MujocoFrameSource:
    """A second MuJoCo renderer at the video size (no shadows, reflections or multisampling)."""

    def __init__(self, model: Any, data: Any, cameras: Sequence[str], size: tuple[int, int]):
        import mujoco

        self.cameras = tuple(cameras)
        self.data = data
        height, width = size
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        self.renderer = mujoco.Renderer(model, height=height, width=width)
        self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
        self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False

    def frame(self, observation: dict[str, Any]) -> np.ndarray:
        images = []
        for camera in self.cameras:
            self.renderer.update_scene(self.data, camera=camera)
            images.append(self.renderer.render().copy())
        return np.concatenate(images, axis=1)

    def close(self) -> None:
        self.renderer.close()


def _mujoco_cameras_exist(env: Any, cameras: Sequence[str]) -> bool:
    model, data = getattr(env, "model", None), getattr(env, "data", None)
    if model is None or data is None or not type(model).__module__.startswith("mujoco"):
        return False
    import mujoco

    if not isinstance(model, mujoco.MjModel) or not isinstance(data, mujoco.MjData):
        return False
    return all(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera) >= 0 for camera in cameras)


def make_frame_source(env: Any, cameras: Sequence[str], size: tuple[int, int]) -> FrameSource:
    """The best frame source ``env`` allows (see the module docstring)."""
    unwrapped = getattr(env, "unwrapped", env)
    if _mujoco_cameras_exist(unwrapped, cameras):
        return MujocoFrameSource(unwrapped.model, unwrapped.data, cameras, size)
    return ObservationFrameSource(cameras, size)
