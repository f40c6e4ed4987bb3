"""Leave out of a camera's scene the geoms that lie wholly outside its view (frustum culling).

On CPU (Mesa's llvmpipe) most of a small image's time goes to transforming and lighting vertices,
and OpenGL transforms every vertex it is sent, also those of geoms that end up outside the picture:
MetaWorld's ``gripperPOV`` camera looks down at the table, yet MuJoCo sent it the whole arm (20k
of the frame's 31k vertices, none of them on screen). :meth:`ViewCuller.update_scene` builds the
scene without the geoms and sites whose bounding spheres lie wholly outside the view frustum. Such a
geom colours no pixel, so the image is the same to the bit, as long as nothing else lets it show:

- shadows and reflections (off-screen geoms cast shadows and are mirrored): cull only with both off;
- planes (unbounded) and geoms with a reflective material (``mjr_render`` lets only the first one
  reflect, so removing one could change which) are always kept, as is anything that is not a model
  geom or site (decorations, flexes, skins).

Bounds are MuJoCo's own (``geom_rbound``, about the geom's frame origin) and, for sites, the sum of
the site's sizes (which bounds a sphere, capsule, cylinder, ellipsoid or box), widened by a millimetre.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

_PLANE = int(mujoco.mjtGeom.mjGEOM_PLANE)
MARGIN = 1e-3  # metres added to every bounding radius (float32 camera, rounding)
RETEST_EVERY = 16  # images: how often a camera whose test left out no geom is tested again


def frustum_planes(
    camera: tuple[np.ndarray, np.ndarray, np.ndarray],
    bounds: tuple[float, float, float, float],
    near: float,
    far: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The six planes of a perspective view frustum as (normals (6, 3), offsets (6,)), world frame.

    A point ``p`` lies ``normals @ p - offsets`` outside each plane (unit outward normals: negative
    inside). ``camera``: (position, forward, up), the eye and unit viewing and up directions;
    ``bounds``: (left, right, bottom, top) of the view at unit distance in front of the eye
    (``glFrustum``'s, divided by its near distance); ``near``, ``far``: clipping distances.
    """
    px, py, pz = (float(value) for value in camera[0])
    (fx, fy, fz), (ux, uy, uz) = (tuple(float(value) for value in vector) for vector in camera[1:])
    basis = (
        (fy * uz - fz * uy, fz * ux - fx * uz, fx * uy - fy * ux),
        (ux, uy, uz),
        (fx, fy, fz),
    )  # right, up, forward
    rows = [(0.0, 0.0, -1.0), (0.0, 0.0, 1.0)]  # (across, upward, depth) components of near and far
    for slope, sign, axis in (
        (bounds[1], 1.0, 0),
        (bounds[0], -1.0, 0),
        (bounds[3], 1.0, 1),
        (bounds[2], -1.0, 1),
    ):
        norm = math.hypot(1.0, slope)  # the side planes pass through the eye
        row = [0.0, 0.0, -sign * slope / norm]
        row[axis] = sign / norm
        rows.append(tuple(row))
    # plain Python for the 6 x 3 numbers: numpy's matmul would call BLAS, whose threads busy-wait
    normals = [tuple(sum(row[k] * basis[k][j] for k in range(3)) for j in range(3)) for row in rows]
    offsets = [n[0] * px + n[1] * py + n[2] * pz for n in normals]
    offsets[0] -= near
    offsets[1] += far
    normals, offsets = np.array(normals), np.array(offsets)
    return normals, offsets


def spheres_outside_frustum(
    centers: np.ndarray, radii: np.ndarray, planes: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """(N,) bool: which spheres (centres (N, 3), radii (N,)) lie wholly outside the frustum ``planes``
    (:func:`frustum_planes`): beyond one of its planes by more than their radius."""
    normals, offsets = planes
    distances = np.einsum("nk,pk->np", np.asarray(centers, dtype=float), normals) - offsets  # einsum: no BLAS
    return (distances > np.asarray(radii)[:, None]).any(axis=1)


def _unit(vector: np.ndarray) -> tuple[float, float, float]:
    x, y, z = (float(value) for value in vector)
    norm = math.sqrt(x * x + y * y + z * z)
    return x / norm, y / norm, z / norm


class ViewCuller:
    """Finds, for one model, the geoms and sites outside a camera's view.

    The candidate geoms (not planes, no reflective material, a bounding radius), their radii and the
    sites' radii are read from ``model`` once (MuJoCo computes ``geom_rbound`` when it compiles).
    """

    def __init__(self, model: mujoco.MjModel) -> None:
        self.model = model
        materials = model.geom_matid
        reflective = (materials >= 0) & (model.mat_reflectance[np.maximum(materials, 0)] > 0)
        self.geoms = np.flatnonzero((model.geom_type != _PLANE) & ~reflective & (model.geom_rbound > 0))
        self.radii = np.concatenate([model.geom_rbound[self.geoms], model.site_size.sum(axis=1)]) + MARGIN
        self._centers = np.empty((len(self.radii), 3))
        self._paused: dict[tuple[int, int], int] = {}  # camera (type, id) -> images left without the test

    def outside_view(
        self, data: mujoco.MjData, scene: mujoco.MjvScene, aspect: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Ids of the geoms and sites wholly outside the view of the scene's camera.

        ``scene`` holds ``mjv_updateScene``'s camera (the mono view ``mjr_render`` draws: the average
        of its two eyes) for a viewport of width / height ``aspect``. Orthographic views: none.
        """
        eye, other = scene.camera[0], scene.camera[1]
        near = float(eye.frustum_near)
        if eye.orthographic or near <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        forward, up = _unit(eye.forward + other.forward), _unit(eye.up + other.up)
        top, bottom, center = eye.frustum_top, eye.frustum_bottom, eye.frustum_center
        half_width = eye.frustum_width or 0.5 * aspect * (top - bottom)
        bounds = ((center - half_width) / near, (center + half_width) / near, bottom / near, top / near)
        planes = frustum_planes(
            ((eye.pos + other.pos) / 2.0, forward, up), bounds, near, float(eye.frustum_far)
        )
        count = len(self.geoms)
        np.take(data.geom_xpos, self.geoms, axis=0, out=self._centers[:count])
        self._centers[count:] = data.site_xpos
        outside = spheres_outside_frustum(self._centers, self.radii, planes)
        return self.geoms[outside[:count]], np.flatnonzero(outside[count:])

    def update_scene(
        self, data: mujoco.MjData, option: mujoco.MjvOption, camera: mujoco.MjvCamera, scene: mujoco.MjvScene,
        aspect: float,
    ) -> int:  # fmt: skip
        """``mjv_updateScene`` (all categories) without the geoms and sites outside the camera's view;
        returns how many were left out.

        The scene is updated once to place the camera, then again with the culled geoms' and sites'
        alpha at 0 for the moment (``mjv_updateScene`` skips invisible ones; the model's colours are
        restored before this returns). An update costs a few microseconds, the test itself 50-250
        (numpy calls between renders, on a busy machine), so a camera whose test leaves out no geom
        (e.g. one that sees the whole arm) skips it for its next ``RETEST_EVERY - 1`` images: the
        images are the same either way, only the time differs.
        """
        model, everything = self.model, mujoco.mjtCatBit.mjCAT_ALL.value
        mujoco.mjv_updateScene(model, data, option, None, camera, everything, scene)
        key = (int(camera.type), int(camera.fixedcamid))
        paused = self._paused.get(key, 0)
        if paused > 0:
            self._paused[key] = paused - 1
            return 0
        geoms, sites = self.outside_view(data, scene, aspect)
        if len(geoms) == 0:
            self._paused[key] = RETEST_EVERY - 1
        if len(geoms) == 0 and len(sites) == 0:
            return 0
        geom_alpha, site_alpha = model.geom_rgba[geoms, 3], model.site_rgba[sites, 3]  # copies
        try:
            model.geom_rgba[geoms, 3] = 0.0
            model.site_rgba[sites, 3] = 0.0
            mujoco.mjv_updateScene(model, data, option, None, camera, everything, scene)
        finally:
            model.geom_rgba[geoms, 3] = geom_alpha
            model.site_rgba[sites, 3] = site_alpha
        return len(geoms) + len(sites)
