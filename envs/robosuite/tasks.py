"""The robosuite tasks vla-rl offers: robosuite env class, instructions, episode length.

This module does not import robosuite (importing it takes about a second and logs warnings), so
the registry can list the tasks cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RobosuiteTask:
    """One task: which robosuite environment runs it and how to say it in words.

    Attributes:
        name: the vla-rl task name (also robosuite's registered environment name).
        instructions: phrasings of the goal; ``reset`` picks one with the env's seeded generator.
        max_episode_steps: default truncation at the default 20 Hz control frequency.
        robosuite_kwargs: extra keyword arguments of the robosuite environment.
    """

    name: str
    instructions: tuple[str, ...]
    max_episode_steps: int
    robosuite_kwargs: dict[str, Any] = field(default_factory=dict)


_TASK_LIST = (
    RobosuiteTask(
        "Lift",
        ("lift the red cube", "pick up the red cube", "grasp the red block and raise it off the table"),
        max_episode_steps=150,
    ),
    RobosuiteTask(
        "Stack",
        (
            "stack the red cube on the green cube",
            "put the red block on top of the green block",
            "place the red cube onto the green one",
        ),
        max_episode_steps=250,
    ),
    RobosuiteTask(
        "PickPlaceCan",
        (
            "put the can in its bin",
            "pick up the soda can and place it in the matching bin",
            "move the can into the bin on the right",
        ),
        max_episode_steps=300,
    ),
    RobosuiteTask(
        "Door",
        ("open the door", "turn the handle and pull the door open", "unlatch the door and swing it open"),
        max_episode_steps=300,
    ),
    RobosuiteTask(
        "NutAssemblySquare",
        (
            "put the square nut on the square peg",
            "fit the square nut onto its peg",
            "place the square nut around the square peg",
        ),
        max_episode_steps=300,
    ),
)

#: task name -> task, in the order ``vla-rl envs list`` shows them (the first is the default).
TASKS: dict[str, RobosuiteTask] = {task.name: task for task in _TASK_LIST}
ROBOSUITE_TASKS: tuple[str, ...] = tuple(TASKS)


def get_task(name: str) -> RobosuiteTask:
    """The task called ``name``.

    Raises:
        ValueError: unknown task, listing the available ones.
    """
    if name not in TASKS:
        raise ValueError(f"unknown robosuite task {name!r}; available tasks: {', '.join(ROBOSUITE_TASKS)}")
    return TASKS[name]
