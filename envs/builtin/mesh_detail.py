"""Coarser meshes for camera images: a copy of a model whose meshes have fewer triangles.

On CPU (Mesa's llvmpipe) a small image costs about as much as the triangles it draws, whatever its
size: MetaWorld's Sawyer arm has tens of thousands of mesh triangles, which cost far more to draw than the
primitive geoms (table, objects; timings: docs/results.md). At 64 px one pixel spans about a centimetre
of the scene, so detail finer than that is never seen.

:func:`coarsened_copy` clusters each mesh's vertices on a grid of ``cell`` metres (mesh frame) and
keeps one vertex per occupied cell (vertex clustering, Rossignac and Borrel 1993): triangles whose
corners fall into fewer than three cells vanish, the rest are re-pointed at the kept vertices, with
their own normals and texture coordinates. Only a *copy* is changed and only its triangle lists:
the renderer uploads the copy's meshes to its GL context, while simulation and
``mjv_updateScene`` keep using the original model, so physics and collision are untouched.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np


def coarsen_faces(vertices: np.ndarray, faces: np.ndarray, cell: float) -> np.ndarray:
    """Indices into ``faces`` of the triangles that survive clustering, and their new corners.

    Args:
        vertices: (V, 3) mesh vertices.
        faces: (F, 3) vertex indices of each triangle.
        cell: grid spacing, in the units of ``vertices``.

    Returns:
        (kept, corners): (K,) indices of the kept triangles in ``faces`` (in their order) and (K, 3)
        their corners re-pointed at one representative vertex per cell. Degenerate triangles and
        duplicates (the same three cells) are dropped.
    """
    if cell <= 0:
        raise ValueError(f"mesh cell size must be positive, got {cell}")
    cells = np.floor(vertices / cell).astype(np.int64)
    _, representative, cluster = np.unique(cells, axis=0, return_index=True, return_inverse=True)
    corners = representative[cluster.ravel()[faces]]
    distinct = (corners[:, 0] != corners[:, 1]) & (corners[:, 1] != corners[:, 2]) & (corners[:, 0] != corners[:, 2])
    kept = np.flatnonzero(distinct)
    _, first = np.unique(np.sort(corners[kept], axis=1), axis=0, return_index=True)
    kept = kept[np.sort(first)]
    return kept, corners[kept]


def coarsened_copy(model: mujoco.MjModel, cell: float) -> mujoco.MjModel:
    """A deep copy of ``model`` whose meshes keep only the triangles of :func:`coarsen_faces`.

    Each mesh's kept triangles move to the front of its slice of ``mesh_face`` (and of
    ``mesh_facenormal`` / ``mesh_facetexcoord``) and ``mesh_facenum`` shrinks to their count.
    """
    coarse = copy.deepcopy(model)
    for mesh in range(coarse.nmesh):
        vert_start, vert_count = coarse.mesh_vertadr[mesh], coarse.mesh_vertnum[mesh]
        face_start, face_count = coarse.mesh_faceadr[mesh], coarse.mesh_facenum[mesh]
        faces = coarse.mesh_face[face_start : face_start + face_count]  # indices local to the mesh
        kept, corners = coarsen_faces(coarse.mesh_vert[vert_start : vert_start + vert_count], faces, cell)
        if len(kept) == 0:  # a mesh smaller than one cell: keep it as it is
            continue
        span = slice(face_start, face_start + len(kept))
        coarse.mesh_face[span] = corners
        for name in ("mesh_facenormal", "mesh_facetexcoord"):
            table = getattr(coarse, name)
            if table.shape[0] >= face_start + face_count:
                table[span] = table[face_start + kept].copy()
        coarse.mesh_facenum[mesh] = len(kept)
    return coarse
