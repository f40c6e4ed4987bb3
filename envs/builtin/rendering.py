"""Offscreen camera rendering for the tabletop env (one GL context per env, created on first use).

On CPU (Mesa's llvmpipe) a small image of this scene costs nearly all its time drawing the geoms (the cost
hardly changes between 32 and 64 px). Two things here keep the rest small, without changing a pixel:

- ``LP_NUM_THREADS=0`` (unless already set) before the first context of the process: llvmpipe
  rasterises in 64x64 tiles, one thread per tile, so a 64 px image is one tile and its worker threads
  only add hand-offs, which cost most on a busy machine (env workers and a learner sharing two cores;
  timings: docs/results.md). The variable is read once per process, so it also holds for other renderers there; set it yourself to keep the threads (e.g. for
  large video frames).
- The scene update, render and read-back called directly on a cached ``MjvCamera`` per camera, as
  ``mujoco.Renderer`` does (same context, buffer and options, so the same pixels), without its
  per-call camera lookup and flag copies.

With ``quality="fast"`` the GL context is made without a shadow map (MuJoCo's default is a 4096 x 4096
depth texture, most of a MetaWorld context's memory) and with an offscreen buffer of the
image's size instead of the model's (MetaWorld's 640 x 480): shadows are off, the images read only the
image's rectangle, so the pixels are the same.

``skip_unseen=True`` (with ``quality="fast"``) leaves out the geoms wholly outside each camera's view
(:mod:`envs.builtin.view_culling`): the same pixels, fewer vertices, for scenes where a camera sees a
small part of a detailed model (MetaWorld's gripper camera and its arm). ``plane_grid`` (metres) draws
planes with grid cells at least that large (a plane's third size is only its grid spacing for drawing;
the GL context's copy is changed, not the simulated model): MetaWorld's floor, 8 x 8 m in 0.1 m cells,
sent 1.9k of a frame's 31k vertices, and with 1 m cells its images were the same to the bit (its
lights are directional; a spot light is shaded per vertex, so there a coarser grid changes the floor).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import mujoco
import numpy as np

from envs.builtin.mesh_detail import coarsened_copy
from envs.builtin.view_culling import ViewCuller

RENDER_QUALITIES = ("fast", "high")
LLVMPIPE_THREADS = "LP_NUM_THREADS"


class CameraRenderer:
    """Renders named cameras of ``model`` at ``image_shape`` (H, W); created lazily on first use.

    ``quality="fast"`` turns shadows, reflections and multisampling off (on CPU/llvmpipe this is
    the difference between ~40 and ~2000 images/s at 64 px); ``"high"`` keeps them on.
    ``mesh_cell`` (metres): draw meshes coarsened to that grid (:mod:`envs.builtin.mesh_detail`);
    None draws them as they are. ``skip_unseen``: leave out the geoms outside each camera's view (the same
    pixels; only with ``quality="fast"``, as off-screen geoms cast shadows and show in reflections).
    ``plane_grid`` (metres): draw planes with grid cells at least that large; None as they are.
    ``hidden_geom_groups``: geom groups left out of every image (robosuite models keep their collision
    geoms in group 0, which robosuite's own renderer does not draw).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        image_shape: tuple[int, int],
        quality: str = "fast",
        mesh_cell: float | None = None,
        skip_unseen: bool = False,
        plane_grid: float | None = None,
        hidden_geom_groups: tuple[int, ...] = (),
    ) -> None:
        if quality not in RENDER_QUALITIES:
            raise ValueError(f"render_quality {quality!r} is not one of {RENDER_QUALITIES}")
        if mesh_cell is not None and not mesh_cell > 0:
            raise ValueError(f"mesh_cell must be a positive size in metres or None, got {mesh_cell!r}")
        if plane_grid is not None and not plane_grid > 0:
            raise ValueError(f"plane_grid must be a positive size in metres or None, got {plane_grid!r}")
        self.model = model
        self.plane_grid = plane_grid
        self.mesh_cell = mesh_cell
        self.image_shape = image_shape
        self.quality = quality
        self.skip_unseen = bool(skip_unseen) and quality == "fast"
        self.culled = 0  # geoms left out of the last image (skip_unseen)
        self._gl_context = None
        self._mjr_context: mujoco.MjrContext | None = None
        self._scene: mujoco.MjvScene | None = None
        self._option = mujoco.MjvOption()
        for group in hidden_geom_groups:
            if not 0 <= group < len(self._option.geomgroup):
                raise ValueError(f"hidden_geom_groups: {group} is not a geom group (0..{len(self._option.geomgroup) - 1})")
            self._option.geomgroup[group] = 0
        self._rect = mujoco.MjrRect(0, 0, image_shape[1], image_shape[0])
        self._cameras: dict[str, mujoco.MjvCamera] = {}
        self._culler = ViewCuller(model) if self.skip_unseen else None

    def _make_context(self) -> None:
        """What ``mujoco.Renderer(model, height, width)`` sets up, with the quality's scene flags."""
        gl_context = getattr(mujoco, "GLContext", None)  # absent with MUJOCO_GL=disable
        if gl_context is None:
            raise RuntimeError("MuJoCo has no OpenGL backend here: set MUJOCO_GL=egl (or osmesa, glfw)")
        os.environ.setdefault(LLVMPIPE_THREADS, "0")  # read once, when the process's first context starts
        height, width = self.image_shape
        fast = self.quality == "fast"
        self.model.vis.global_.offheight = max(self.model.vis.global_.offheight, height)
        self.model.vis.global_.offwidth = max(self.model.vis.global_.offwidth, width)
        self.model.vis.quality.offsamples = 0 if fast else 4
        self._scene = mujoco.MjvScene(self.model, maxgeom=10000)
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = not fast
        self._scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = not fast
        self._gl_context = gl_context(width, height)
        self._gl_context.make_current()
        uploaded = self.model if self.mesh_cell is None else coarsened_copy(self.model, self.mesh_cell)
        with _context_settings(uploaded, self.image_shape if fast else None, self.plane_grid):
            self._mjr_context = mujoco.MjrContext(uploaded, mujoco.mjtFontScale.mjFONTSCALE_150.value)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._mjr_context)

    def _camera(self, name: str) -> mujoco.MjvCamera:
        camera = self._cameras.get(name)
        if camera is None:
            camera_id = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, name)
            if camera_id == -1:
                raise ValueError(f'The camera "{name}" does not exist.')
            camera = self._cameras[name] = mujoco.MjvCamera()
            camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
            camera.fixedcamid = camera_id
        return camera

    def render(self, data: mujoco.MjData, camera: str) -> np.ndarray:
        """uint8 image (H, W, 3), upright RGB."""
        if self._mjr_context is None:
            self._make_context()
        scene, context = self._scene, self._mjr_context
        if self.skip_unseen:
            aspect = self._rect.width / self._rect.height
            self.culled = self._culler.update_scene(data, self._option, self._camera(camera), scene, aspect)
        else:
            mujoco.mjv_updateScene(
                self.model,
                data,
                self._option,
                None,
                self._camera(camera),
                mujoco.mjtCatBit.mjCAT_ALL.value,
                scene,
            )
        self._gl_context.make_current()
        mujoco.mjr_render(self._rect, scene, context)
        pixels = np.empty((*self.image_shape, 3), dtype=np.uint8)
        mujoco.mjr_readPixels(pixels, None, self._rect, context)
        return np.ascontiguousarray(pixels[::-1])  # OpenGL's rows run bottom to top

    def close(self) -> None:
        if self._gl_context is not None:
            self._gl_context.free()
            self._gl_context = None
        if self._mjr_context is not None:
            self._mjr_context.free()
            self._mjr_context = None
        self._scene = None

    def __del__(self) -> None:  # as mujoco.Renderer: an env that is not closed frees its context here
        if hasattr(self, "_mjr_context"):  # not when __init__ raised
            self.close()


@contextlib.contextmanager
def _context_settings(
    model: mujoco.MjModel, fast_shape: tuple[int, int] | None, plane_grid: float | None
) -> Iterator[None]:
    """While a GL context is made from ``model``: no shadow map and an offscreen buffer of ``fast_shape``
    (H, W) where given, planes' grid spacing at least ``plane_grid``; the model is restored after."""
    planes = np.flatnonzero(model.geom_type == mujoco.mjtGeom.mjGEOM_PLANE)
    saved = (
        model.vis.quality.shadowsize, model.vis.global_.offwidth, model.vis.global_.offheight,
        model.geom_size[planes, 2].copy(),
    )  # fmt: skip
    try:
        if fast_shape is not None:
            model.vis.quality.shadowsize = 0
            model.vis.global_.offheight, model.vis.global_.offwidth = fast_shape
        if plane_grid is not None:
            model.geom_size[planes, 2] = np.maximum(model.geom_size[planes, 2], plane_grid)
        yield
    finally:
        model.vis.quality.shadowsize, model.vis.global_.offwidth, model.vis.global_.offheight = saved[:3]
        model.geom_size[planes, 2] = saved[3]
