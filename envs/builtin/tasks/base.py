"""What a tabletop task is, and the sampling of initial layouts shared by all tasks.

A task is stateless: it samples its *target* (which block, which zone, ...), may adjust the layout
to make the target feasible, words the instruction, and judges success and progress from the
privileged scene state. The layout (a JSON-able dict) holds everything needed to rebuild the
initial scene exactly; it is what the env returns as ``info["init_state"]``::

    {"task": str, "instruction": str, "target": {str: str},
     "block_colors": [str] * 3, "block_poses": [[x, y, yaw]] * 3,
     "zone_colors": [str] * 2, "zone_positions": [[x, y]] * 2, "bowl_position": [x, y],
     "drawer_color": str, "drawer_opening": float, "ee_start": [x, y, z]}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from envs.builtin.scene import NUM_BLOCKS, NUM_ZONES, PALETTE, TabletopScene

#: Region of the table where blocks, bowl and zones are placed (x range, y range), metres.
OBJECT_REGION = ((0.28, 0.56), (-0.28, 0.12))
BLOCK_YAW_RANGE = 0.3
MIN_SPACING = {"block": 0.10, "bowl": 0.12, "zone": 0.10}
EE_START_LOW = (0.30, -0.10, 0.20)
EE_START_HIGH = (0.45, 0.10, 0.28)
_REGION_LOW = np.array([OBJECT_REGION[0][0], OBJECT_REGION[1][0]])
_REGION_HIGH = np.array([OBJECT_REGION[0][1], OBJECT_REGION[1][1]])


class TabletopTask:
    """Base class: subclasses set the class attributes and implement the three hooks."""

    name: ClassVar[str]
    max_episode_steps: ClassVar[int]
    phrasings: ClassVar[tuple[str, ...]]
    drawer_opening_range: ClassVar[tuple[float, float]] = (0.0, 0.0)

    def sample_target(self, rng: np.random.Generator, layout: dict[str, Any]) -> dict[str, str]:
        """Choose what the instruction refers to, e.g. ``{"block": "red"}``."""
        return {"block": str(rng.choice(layout["block_colors"]))}

    def adjust_layout(self, rng: np.random.Generator, layout: dict[str, Any], target: dict[str, str]) -> bool:
        """Change the sampled layout in place where the task needs it; False: infeasible, resample."""
        return True

    def instruction(self, rng: np.random.Generator, target: dict[str, str]) -> str:
        template = self.phrasings[int(rng.integers(len(self.phrasings)))]
        return template.format(**target)

    def is_success(self, scene: TabletopScene, target: dict[str, str]) -> bool:
        raise NotImplementedError

    def progress(self, scene: TabletopScene, target: dict[str, str]) -> float:
        """Shaped progress in [0, 1] for the dense reward."""
        raise NotImplementedError


def vector_norm(vector: np.ndarray) -> float:
    """``np.linalg.norm`` of a float64 vector, bit for bit (it is ``sqrt(x.dot(x))``), at a quarter of its cost.

    Not ``math.hypot`` nor a sum of squares in Python: the BLAS dot product fuses multiply-adds, so
    those differ from numpy's norm in the last bit for about one vector in five.
    """
    return math.sqrt(vector.dot(vector))


def reach_progress(scene: TabletopScene, point: np.ndarray) -> float:
    """1 at ``point``, decaying with the grip site's distance from it."""
    return float(1.0 - np.tanh(5.0 * vector_norm(scene.ee_position - point)))


def far_enough(point: np.ndarray, placed: list[tuple[str, np.ndarray]], kind: str, extra: float = 0.0) -> bool:
    """Whether ``point`` (an object of ``kind``) keeps ``MIN_SPACING`` (plus ``extra``, m) from every placed one."""
    for other_kind, other in placed:
        spacing = max(MIN_SPACING[kind], MIN_SPACING[other_kind]) + extra
        if vector_norm(point - other) < spacing:
            return False
    return True


def sample_object_positions(rng: np.random.Generator) -> dict[str, list]:
    """Non-overlapping xy positions for the blocks, the bowl and the zones (rejection sampling)."""
    kinds = ["bowl"] + ["block"] * NUM_BLOCKS + ["zone"] * NUM_ZONES
    for _ in range(1000):
        placed: list[tuple[str, np.ndarray]] = []
        for kind in kinds:
            for _ in range(100):
                point = rng.uniform(_REGION_LOW, _REGION_HIGH)
                if far_enough(point, placed, kind):
                    placed.append((kind, point))
                    break
            else:
                break
        if len(placed) == len(kinds):
            points = [p.round(5).tolist() for _, p in placed]
            return {
                "bowl_position": points[0],
                "block_xy": points[1 : 1 + NUM_BLOCKS],
                "zone_positions": points[1 + NUM_BLOCKS :],
            }
    raise RuntimeError("could not place the tabletop objects without overlap; is OBJECT_REGION too small?")


def check_block_colors(block_colors: Sequence[str] | None) -> tuple[str, ...] | None:
    """Validate the ``block_colors`` option: distinct palette colours, at least one per block."""
    if block_colors is None:
        return None
    colors = tuple(str(color) for color in block_colors)
    unknown = [color for color in colors if color not in PALETTE]
    if unknown:
        raise ValueError(f"block_colors: unknown colour(s) {unknown}; the palette is {list(PALETTE)}")
    if len(set(colors)) != len(colors) or len(colors) < NUM_BLOCKS:
        raise ValueError(
            f"block_colors={list(colors)}: give at least {NUM_BLOCKS} distinct colours (one per block), "
            "or null for the whole palette"
        )
    return colors


def sample_layout(
    rng: np.random.Generator, task: TabletopTask, block_colors: Sequence[str] | None = None
) -> dict[str, Any]:
    """A full initial layout for ``task`` (see the module docstring for its keys).

    ``block_colors``: the colours blocks may take (None: the whole palette). With exactly three,
    every scene holds the same three blocks in new places, so an instruction names one of three
    colours; zones and the drawer take colours outside the list.
    """
    block_colors = check_block_colors(block_colors)
    for _ in range(100):
        layout = _sample_layout_once(rng, task, block_colors)
        if layout is not None:
            return layout
    raise RuntimeError(f"could not sample a feasible layout for task {task.name!r} in 100 tries")


def _sample_colors(
    rng: np.random.Generator, block_colors: tuple[str, ...] | None
) -> tuple[list[str], list[str]]:
    """(block colours, other colours for the zones then the drawer), all distinct."""
    colors = list(PALETTE)
    if block_colors is None:
        chosen = rng.choice(len(colors), size=NUM_BLOCKS + NUM_ZONES + 1, replace=False)
        return [colors[i] for i in chosen[:NUM_BLOCKS]], [colors[i] for i in chosen[NUM_BLOCKS:]]
    blocks = [block_colors[i] for i in rng.choice(len(block_colors), size=NUM_BLOCKS, replace=False)]
    rest = [color for color in colors if color not in blocks]
    return blocks, [rest[i] for i in rng.choice(len(rest), size=NUM_ZONES + 1, replace=False)]


def _sample_layout_once(
    rng: np.random.Generator, task: TabletopTask, block_colors: tuple[str, ...] | None
) -> dict[str, Any] | None:
    blocks, other_colors = _sample_colors(rng, block_colors)
    zone_colors = other_colors[:NUM_ZONES]
    positions = sample_object_positions(rng)
    yaws = rng.uniform(-BLOCK_YAW_RANGE, BLOCK_YAW_RANGE, size=NUM_BLOCKS).round(5)
    layout: dict[str, Any] = {
        "task": task.name,
        "block_colors": blocks,
        "block_poses": [[*xy, float(yaw)] for xy, yaw in zip(positions["block_xy"], yaws, strict=True)],
        "zone_colors": zone_colors,
        "zone_positions": positions["zone_positions"],
        "bowl_position": positions["bowl_position"],
        "drawer_color": other_colors[-1],
        "drawer_opening": round(float(rng.uniform(*task.drawer_opening_range)), 5),
        "ee_start": rng.uniform(EE_START_LOW, EE_START_HIGH).round(5).tolist(),
    }
    target = task.sample_target(rng, layout)
    if not task.adjust_layout(rng, layout, target):
        return None
    layout["target"] = target
    layout["instruction"] = task.instruction(rng, target)
    return layout
