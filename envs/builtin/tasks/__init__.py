"""The tasks of the tabletop suite: ``TASKS`` maps a task name to its class."""

from __future__ import annotations

from envs.builtin.tasks.base import TabletopTask, check_block_colors, sample_layout
from envs.builtin.tasks.drawer import CloseDrawerTask, OpenDrawerTask
from envs.builtin.tasks.lift import LiftTask
from envs.builtin.tasks.place_in_bowl import PlaceInBowlTask
from envs.builtin.tasks.push import PushTask
from envs.builtin.tasks.reach import ReachTask
from envs.builtin.tasks.stack import StackTask

TASKS: dict[str, type[TabletopTask]] = {
    task.name: task
    for task in (ReachTask, PushTask, LiftTask, PlaceInBowlTask, StackTask, OpenDrawerTask, CloseDrawerTask)
}

__all__ = ["TASKS", "TabletopTask", "check_block_colors", "sample_layout"]
