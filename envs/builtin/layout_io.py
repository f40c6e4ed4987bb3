"""Checking an ``init_state`` handed back through ``reset(options={"init_state": ...})``."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from envs.builtin.scene import NUM_BLOCKS, NUM_ZONES, PALETTE

REQUIRED_KEYS = (
    "task",
    "instruction",
    "target",
    "block_colors",
    "block_poses",
    "zone_colors",
    "zone_positions",
    "bowl_position",
    "drawer_color",
    "drawer_opening",
    "ee_start",
)


def check_init_state(init_state: Any, tasks: Mapping[str, type]) -> dict[str, Any]:
    """A validated deep copy of ``init_state`` (as returned in ``info["init_state"]``).

    Raises:
        ValueError: not a dict, a key is missing, or a task/colour is unknown; says which.
    """
    if not isinstance(init_state, Mapping):
        raise ValueError(
            f"init_state must be the dict returned in info['init_state'] by reset(), got {type(init_state).__name__}"
        )
    missing = [key for key in REQUIRED_KEYS if key not in init_state]
    if missing:
        raise ValueError(
            f"init_state lacks key(s) {missing}; pass the dict from info['init_state'] unchanged"
        )
    layout = copy.deepcopy(dict(init_state))
    if layout["task"] not in tasks:
        raise ValueError(
            f"init_state task {layout['task']!r} is unknown; available tasks: {', '.join(tasks)}"
        )
    colors = [*layout["block_colors"], *layout["zone_colors"], layout["drawer_color"]]
    unknown = [color for color in colors if color not in PALETTE]
    if unknown:
        raise ValueError(f"init_state names unknown colour(s) {unknown}; known colours: {', '.join(PALETTE)}")
    if len(layout["block_poses"]) != NUM_BLOCKS or len(layout["zone_positions"]) != NUM_ZONES:
        raise ValueError(
            f"init_state must describe {NUM_BLOCKS} blocks and {NUM_ZONES} zones, got "
            f"{len(layout['block_poses'])} and {len(layout['zone_positions'])}"
        )
    return layout
