"""Captioned frames of the tabletop suite: what a small vision-language model can be pretrained on.

Each frame is one scene of a task: ``reset`` under its own seed (random layouts, any of the tasks), then
up to ``max_moves`` actions that steer the gripper towards a random point of the workspace (half the time
towards the point above the instruction's object, where reaching and grasping happen) with noise and a random
gripper command, so the arm is seen everywhere. The frame holds both cameras, the instruction and a caption
written from the privileged scene state, in words of a fixed vocabulary (:data:`CAPTION_WORDS`)::

    "<colour> block <x> <y> gripper <x> <y> <z>"     (tasks whose instruction names a block)
    "<colour> drawer <open|closed> gripper <x> <y> <z>"    (the drawer tasks)

Positions are discretised into thirds, in the robot's frame (the arm stands at the origin facing +x):
``x`` near / middle / far (distance ahead of the base, thirds of the object region 0.28-0.56 m), ``y``
right / centre / left (-y is the robot's right; thirds of -0.28..0.12 m), ``z`` of the grip site low
(< 10 cm) / middle (< 20 cm) / high. A block in a caption is the one the instruction names (of the three on
the table), so reading its position needs the instruction as well as the image. The drawer is ``open`` beyond
half its travel. Words that name what the image must tell carry a slot name (``object_x``, ``object_y``,
``drawer``, ``gripper_x``, ``gripper_y``, ``gripper_z``); the others (the colour, copied from the
instruction, and the nouns) carry none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from envs.builtin.scene import DRAWER_RANGE, PALETTE
from envs.builtin.tabletop import CAMERAS, MAX_POSITION_DELTA, WORKSPACE_HIGH, WORKSPACE_LOW, TabletopEnv
from envs.builtin.tasks import TASKS
from envs.builtin.tasks.base import OBJECT_REGION

X_WORDS = ("near", "middle", "far")
Y_WORDS = ("right", "centre", "left")
Z_WORDS = ("low", "middle", "high")
X_EDGES = tuple(np.linspace(*OBJECT_REGION[0], 4)[1:3].round(4).tolist())
Y_EDGES = tuple(np.linspace(*OBJECT_REGION[1], 4)[1:3].round(4).tolist())
Z_EDGES = (0.10, 0.20)
DRAWER_WORDS = ("closed", "open")
#: Every word a caption can hold.
CAPTION_WORDS = tuple(dict.fromkeys(["block", "drawer", "gripper", *PALETTE, *X_WORDS, *Y_WORDS, *Z_WORDS,
                                     *DRAWER_WORDS]))  # fmt: skip
#: Seeds of each split start here (frame i of split s resets with seed ``seed * 10**7 + SPLIT_OFFSETS[s] + i``).
SPLIT_OFFSETS = {"train": 0, "held_out": 4_000_000, "probe": 8_000_000}
STEER_NOISE = 0.01  # m, the noise added to every steering action


def vocabulary_words() -> list[str]:
    """Every word of the suite's instructions (each task's phrasings, every colour) and of the captions, in a
    fixed order: what a tokenizer of this data needs."""
    words: dict[str, None] = {}
    for task in TASKS.values():
        for phrasing in task.phrasings:
            for word in re.sub(r"\{\w+\}", " ", phrasing).lower().split():
                words[word] = None
    for word in (*PALETTE, *CAPTION_WORDS):
        words[word] = None
    return list(words)


def bin_word(value: float, edges: Sequence[float], words: Sequence[str]) -> str:
    """The word of the bin ``value`` falls in (``edges`` ascending, one word more than edges)."""
    return words[int(np.searchsorted(np.asarray(edges), value, side="right"))]


@dataclass
class CaptionedFrames:
    """``N`` frames: ``images`` {camera: uint8 (N, H, W, 3)}, ``instructions`` [N], ``captions`` [N] (words),
    ``slots`` [N] (per caption word its slot name or None), ``tasks`` [N], ``object_xy`` (N, 2) the named block's
    position (NaN for the drawer tasks), ``gripper_xyz`` (N, 3) the grip site, ``seeds`` [N]."""

    images: dict[str, np.ndarray]
    instructions: list[str]
    captions: list[list[str]]
    slots: list[list[str | None]]
    tasks: list[str]
    object_xy: np.ndarray
    gripper_xyz: np.ndarray
    seeds: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.instructions)


def describe(env: TabletopEnv) -> tuple[list[str], list[str | None], np.ndarray, np.ndarray]:
    """``(caption words, slots, object_xy (2,), gripper_xyz (3,))`` of the env's current scene."""
    target = env.task_target
    gripper = env.ee_position
    if "block" in target:
        color = target["block"]
        position = env.scene.block_position(color)
        words = [color, "block", bin_word(position[0], X_EDGES, X_WORDS), bin_word(position[1], Y_EDGES, Y_WORDS)]
        slots: list[str | None] = [None, None, "object_x", "object_y"]
        object_xy = position[:2]
    elif "drawer" in target:
        opening = env.scene.drawer_opening
        words = [target["drawer"], "drawer", DRAWER_WORDS[int(opening > DRAWER_RANGE / 2)]]
        slots = [None, None, "drawer"]
        object_xy = np.full(2, np.nan)
    else:
        raise ValueError(f"task {env.task.name!r}: its target {target} names neither a block nor a drawer")
    words += ["gripper", bin_word(gripper[0], X_EDGES, X_WORDS), bin_word(gripper[1], Y_EDGES, Y_WORDS),
              bin_word(gripper[2], Z_EDGES, Z_WORDS)]  # fmt: skip
    slots += [None, "gripper_x", "gripper_y", "gripper_z"]
    return words, slots, np.asarray(object_xy, dtype=np.float64), np.asarray(gripper, dtype=np.float64)


def steer(env: TabletopEnv, rng: np.random.Generator, moves: int) -> None:
    """``moves`` actions towards a random goal (half the time the point 5 cm above the named block) with noise."""
    target = env.task_target
    if "block" in target and rng.random() < 0.5:
        goal = env.scene.block_position(target["block"]) + np.array([0.0, 0.0, 0.05])
        goal[:2] += rng.normal(0.0, 0.03, size=2)
    else:
        goal = rng.uniform(WORKSPACE_LOW, WORKSPACE_HIGH)
    gripper = float(rng.uniform(-1.0, 1.0))
    extra = [0.0] if env.control_yaw else []
    for _ in range(moves):
        delta = goal - env.ee_target + rng.normal(0.0, STEER_NOISE, size=3)
        delta = np.clip(delta, -MAX_POSITION_DELTA, MAX_POSITION_DELTA)
        _, _, terminated, truncated, _ = env.step(np.array([*delta, *extra, gripper], dtype=np.float32))
        if terminated or truncated:
            break


def captioned_frames(
    count: int, seed: int = 0, split: str = "train", tasks: Sequence[str] | None = None, image_size: int = 64,
    cameras: Sequence[str] = CAMERAS, max_moves: int = 12,
) -> CaptionedFrames:  # fmt: skip
    """``count`` frames of ``split`` (train, held_out, probe: disjoint reset seeds), tasks in turn."""
    if split not in SPLIT_OFFSETS:
        raise ValueError(f"split={split!r}; allowed: {', '.join(SPLIT_OFFSETS)}")
    tasks = list(tasks or TASKS)
    unknown = [task for task in tasks if task not in TASKS]
    if unknown:
        raise ValueError(f"unknown tabletop task(s) {unknown}; available: {', '.join(TASKS)}")
    env = TabletopEnv(task=tasks[0], image_size=image_size, cameras=tuple(cameras))
    images: dict[str, list[np.ndarray]] = {camera: [] for camera in cameras}
    frames = CaptionedFrames({}, [], [], [], [], np.zeros((count, 2)), np.zeros((count, 3)))
    try:
        env.skip_images = True
        for i in range(count):
            frame_seed = seed * 10**7 + SPLIT_OFFSETS[split] + i
            rng = np.random.default_rng(frame_seed)
            task = tasks[i % len(tasks)]
            env.reset(seed=frame_seed, options={"task": task})
            steer(env, rng, int(rng.integers(0, max_moves + 1)))
            observation = env.observe()
            words, slots, frames.object_xy[i], frames.gripper_xyz[i] = describe(env)
            for camera in cameras:
                images[camera].append(observation["images"][camera])
            frames.instructions.append(observation["instruction"])
            frames.captions.append(words)
            frames.slots.append(slots)
            frames.tasks.append(task)
            frames.seeds.append(frame_seed)
    finally:
        env.close()
    frames.images = {camera: np.stack(stack) for camera, stack in images.items()}
    return frames
