"""The robosuite tasks vla-rl offers: robosuite env class, instructions, episode length.

Every environment robosuite registers is a task. Five have hand-written instructions and episode
lengths (:data:`_TASK_LIST`); the others get an instruction made from their name ("TwoArmPegInHole":
"complete the two arm peg in hole task") and :data:`GENERIC_EPISODE_STEPS`. A config gives its own
(``env.kwargs.instructions``, ``env.kwargs.max_episode_steps``; see :func:`get_task`).

This module does not import robosuite (importing it takes seconds and logs warnings), so the registry
can list the tasks cheaply; a test checks :data:`REGISTERED_ENVS` against the installed robosuite's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.base import INSTRUCTION_CHARSET


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

#: Every environment robosuite 1.5 registers (``robosuite.environments.base.REGISTERED_ENVS``).
REGISTERED_ENVS: tuple[str, ...] = (
    "Door", "Lift", "NutAssembly", "NutAssemblyRound", "NutAssemblySingle", "NutAssemblySquare", "PickPlace",
    "PickPlaceBread", "PickPlaceCan", "PickPlaceCereal", "PickPlaceMilk", "PickPlaceSingle", "Stack", "ToolHang",
    "TwoArmHandover", "TwoArmLift", "TwoArmPegInHole", "TwoArmTransport", "Wipe",
)  # fmt: skip
#: Episode length (env steps at 20 Hz) of a task without a written one (robosuite's own horizon is 1000).
GENERIC_EPISODE_STEPS = 500


def instruction_from_name(name: str) -> str:
    """A generic instruction from a CamelCase task name: ``"ToolHang"`` -> ``"complete the tool hang task"``."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)
    return f"complete the {' '.join(word.lower() for word in words)} task"


#: task name -> task, in the order ``vla-rl envs list`` shows them (the first is the default): the written
#: ones, then the rest of robosuite's in its order.
TASKS: dict[str, RobosuiteTask] = {task.name: task for task in _TASK_LIST}
TASKS.update(
    {
        name: RobosuiteTask(name, (instruction_from_name(name),), GENERIC_EPISODE_STEPS)
        for name in REGISTERED_ENVS
        if name not in TASKS
    }
)
ROBOSUITE_TASKS: tuple[str, ...] = tuple(TASKS)


def get_task(
    name: str,
    instructions: Mapping[str, str | Sequence[str]] | None = None,
    max_episode_steps: int | Mapping[str, int] | None = None,
) -> RobosuiteTask:
    """The task called ``name``, with a config's instructions and episode length where it gives them.

    Args:
        instructions: task name -> one instruction or a list of phrasings (replacing the task's own).
        max_episode_steps: one length for every task, or task name -> length.

    Raises:
        ValueError: unknown task (listing the available ones), or an unusable instruction or length.
    """
    if name not in TASKS:
        raise ValueError(f"unknown robosuite task {name!r}; available tasks: {', '.join(ROBOSUITE_TASKS)}")
    task = TASKS[name]
    for key in instructions or {}:
        if key not in TASKS:
            raise ValueError(f"env.kwargs.instructions names unknown task {key!r}; tasks: {', '.join(ROBOSUITE_TASKS)}")
    if instructions and name in instructions:
        given = instructions[name]
        phrasings = (given,) if isinstance(given, str) else tuple(given)
        for phrasing in phrasings:
            if not isinstance(phrasing, str) or not phrasing.strip() or set(phrasing) - INSTRUCTION_CHARSET:
                raise ValueError(
                    f"env.kwargs.instructions.{name}: {phrasing!r} must be a non-empty string of ASCII letters, "
                    "digits, space and , . ' - ! ?"
                )
        if not phrasings:
            raise ValueError(f"env.kwargs.instructions.{name} is empty: give at least one instruction")
        task = dataclasses.replace(task, instructions=phrasings)
    steps = max_episode_steps.get(name) if isinstance(max_episode_steps, Mapping) else max_episode_steps
    if steps is not None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"env.kwargs.max_episode_steps for {name}: {steps!r} must be a positive integer")
        task = dataclasses.replace(task, max_episode_steps=steps)
    return task
