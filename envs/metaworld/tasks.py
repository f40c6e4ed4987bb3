"""The 50 MetaWorld v3 tasks: names, language instructions, and the MT10 / MT50 benchmark lists.

This module does not import metaworld, so the registry lists the tasks cheaply and without the package;
a test checks the names against ``metaworld.env_dict.ALL_V3_ENVIRONMENTS`` and ``MT10_V3``.
The instructions are ours (MetaWorld ships none), one imperative sentence each, saying what success means.
"""

from __future__ import annotations

#: task name -> instruction, in MetaWorld's own order (``ALL_V3_ENVIRONMENTS``).
INSTRUCTIONS: dict[str, str] = {
    "assembly-v3": "put the ring onto the peg",
    "basketball-v3": "dunk the ball into the basket",
    "bin-picking-v3": "move the cube from one bin into the other bin",
    "box-close-v3": "put the lid on the box",
    "button-press-topdown-v3": "press the button from the top",
    "button-press-topdown-wall-v3": "press the button from the top, past the wall",
    "button-press-v3": "press the button",
    "button-press-wall-v3": "press the button behind the wall",
    "coffee-button-v3": "push the button on the coffee machine",
    "coffee-pull-v3": "pull the mug out of the coffee machine",
    "coffee-push-v3": "push the mug under the coffee machine",
    "dial-turn-v3": "turn the dial",
    "disassemble-v3": "lift the ring off the peg",
    "door-close-v3": "close the door",
    "door-lock-v3": "lock the door by turning the lock",
    "door-open-v3": "open the door",
    "door-unlock-v3": "unlock the door by turning the lock",
    "hand-insert-v3": "slide the block into the hole",
    "drawer-close-v3": "close the drawer",
    "drawer-open-v3": "open the drawer",
    "faucet-open-v3": "turn the faucet on",
    "faucet-close-v3": "turn the faucet off",
    "hammer-v3": "hammer the nail into the wall",
    "handle-press-side-v3": "press the handle down from the side",
    "handle-press-v3": "press the handle down",
    "handle-pull-side-v3": "pull the handle up from the side",
    "handle-pull-v3": "pull the handle up",
    "lever-pull-v3": "pull the lever up",
    "pick-place-wall-v3": "pick up the puck and place it at the goal behind the wall",
    "pick-out-of-hole-v3": "pick the peg out of the hole",
    "pick-place-v3": "pick up the puck and place it at the goal",
    "plate-slide-v3": "slide the plate into the cabinet",
    "plate-slide-side-v3": "slide the plate into the cabinet from the side",
    "plate-slide-back-v3": "slide the plate out of the cabinet",
    "plate-slide-back-side-v3": "slide the plate out of the cabinet to the side",
    "peg-insert-side-v3": "insert the peg into the hole from the side",
    "peg-unplug-side-v3": "unplug the peg to the side",
    "soccer-v3": "kick the ball into the goal",
    "stick-push-v3": "grasp the stick and push the box with it",
    "stick-pull-v3": "grasp the stick and pull the box with it",
    "push-v3": "push the puck to the goal",
    "push-wall-v3": "push the puck to the goal behind the wall",
    "push-back-v3": "pull the puck back to the goal",
    "reach-v3": "reach the goal with the gripper",
    "reach-wall-v3": "reach the goal behind the wall",
    "shelf-place-v3": "pick up the puck and place it on the shelf",
    "sweep-into-v3": "sweep the puck into the hole",
    "sweep-v3": "sweep the puck off the table",
    "window-open-v3": "slide the window open",
    "window-close-v3": "slide the window closed",
}

#: Every task (MT50), in MetaWorld's order; the first is the default.
METAWORLD_TASKS: tuple[str, ...] = tuple(INSTRUCTIONS)

#: The MT10 benchmark (``metaworld.env_dict.MT10_V3``), in its order.
MT10_TASKS: tuple[str, ...] = (
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
)


def check_task(name: str) -> str:
    """``name`` if it is a MetaWorld task.

    Raises:
        ValueError: unknown task, listing the available ones.
    """
    if name not in INSTRUCTIONS:
        raise ValueError(f"unknown metaworld task {name!r}; available tasks: {', '.join(METAWORLD_TASKS)}")
    return name
