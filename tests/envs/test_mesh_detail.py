"""Mesh coarsening for camera images (envs/builtin/mesh_detail.py), against a grid whose answer is known."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from envs.builtin.mesh_detail import coarsen_faces, coarsened_copy


def _grid(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A flat (n+1) x (n+1) vertex grid of spacing 1, each unit square split into two triangles."""
    xs, ys = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    vertices = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], axis=1).astype(float)
    index = lambda i, j: i * (n + 1) + j  # noqa: E731
    faces = []
    for i in range(n):
        for j in range(n):
            faces.append((index(i, j), index(i + 1, j), index(i + 1, j + 1)))
            faces.append((index(i, j), index(i + 1, j + 1), index(i, j + 1)))
    return vertices, np.array(faces)


def test_clustering_a_fine_grid_leaves_two_triangles_per_cell_corner():
    vertices, faces = _grid(100)  # 20,000 triangles; cells of 10 meet at 10 x 10 interior-or-edge corners
    kept, corners = coarsen_faces(vertices, faces, cell=10.0)
    assert len(kept) == 2 * 10 * 10
    assert np.all(np.diff(kept) > 0)  # in their original order
    cells = np.floor(vertices[corners] / 10.0)
    assert all(len({tuple(c) for c in triangle}) == 3 for triangle in cells)  # three distinct cells each
    assert len(coarsen_faces(vertices, faces, cell=0.5)[0]) == len(faces)  # finer than the mesh: all kept
    with pytest.raises(ValueError, match="positive"):
        coarsen_faces(vertices, faces, cell=0.0)


def test_coarsened_copy_changes_only_the_copys_triangle_lists():
    vertices, faces = _grid(20)
    vertices[:, 2] = np.random.default_rng(0).uniform(0.0, 2.0, len(vertices))  # not flat: MuJoCo wants a hull
    spec = mujoco.MjSpec()
    mesh = spec.add_mesh()
    mesh.name, mesh.uservert, mesh.userface = "sheet", (vertices * 0.001).ravel().tolist(), faces.ravel().tolist()
    body = spec.worldbody.add_body()
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname="sheet")
    model = spec.compile()
    before = model.mesh_face.copy(), int(model.mesh_facenum[0])
    coarse = coarsened_copy(model, cell=0.005)
    assert 0 < coarse.mesh_facenum[0] < before[1]
    np.testing.assert_array_equal(model.mesh_face, before[0])
    assert model.mesh_facenum[0] == before[1]
