"""Scripted pick-and-place experts for LIBERO from the simulator's state: libero_spatial, libero_object,
and the pick-and-place tasks of libero_goal and libero_10 (:data:`PICK_PLACE_TASKS`).

The task's goal in its BDDL file names the objects to move and where they go (``(On bowl plate)``,
``(In soup basket_contain_region)``; several, one after the other). The expert reads the objects' and
the targets' collision geoms (world-frame bounds: privileged state, not images) and runs a sequence of
phases (:mod:`envs.experts.phases`) per goal: above the grasp point, down, close, lift, over the target,
down, open, up. Bowls and mugs are gripped by their wall on the gripper's side (the fingers close along
the world y axis, across that wall), or by the far wall when a finger on the near side would land on a
neighbour; a bowl raised in or on a fixture such as a cabinet, where a finger beside it would land on the
fixture, by the wall facing the robot, the gripper turned a quarter turn. Other objects are gripped at
their centre, a little below the top, the gripper turned as little as keeps its hand and fingers clear
of the objects around and the closing line across the object short enough for the open fingers. The held
object is carried so that its centre arrives over the target's centre (a fixture's goal region: its
site). Between turns the gripper holds the orientation it had at the start (rotation commands from the
orientation error).

Actions are the controller's inputs (the env's units): a translation of ``d`` metres is ``d / 0.05``,
a rotation of ``r`` rad is ``r / 0.5`` (OSC_POSE's scaling), clipped to [-1, 1]; gripper -1 open, +1 close.
Noise for diverse demonstrations: ``noise_std`` (in action units) on the translation.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation

from envs.experts.base import ScriptedExpert
from envs.experts.phases import Phase, PhaseSequence

OPEN, CLOSED = -1.0, 1.0
TRANSLATION_SCALE = 0.05  # metres per unit of action (OSC_POSE output_max)
ROTATION_SCALE = 0.5  # radians per unit of action
MAX_TRANSLATION = 1.0  # action units
RAISED = 0.05  # m: a bowl this much above its target's base stands on a fixture
PHASE_TIMEOUT = 60  # steps; a phase that cannot reach its tolerance moves on
#: Turns of the gripper about the vertical (rad) tried for an object other than a bowl, smallest first.
GRASP_YAWS = (0.0, np.pi / 12, -np.pi / 12, np.pi / 6, -np.pi / 6, np.pi / 4, -np.pi / 4, np.pi / 3, -np.pi / 3,
              np.pi / 2, -np.pi / 2)  # fmt: skip
CLEARANCE = 0.015  # m: wanted gap between the gripper and a neighbouring object at the grasp
MAX_SPAN = 0.07  # m: the widest object the open fingers close around
PAD_HALF_WIDTH = 0.01  # m: the fingers touch the object within this of the closing line
SUITES_WITH_EXPERTS = ("libero_spatial", "libero_object")
#: Tasks of other suites whose goal is one pick and place the expert runs (task names, LIBERO's order).
PICK_PLACE_TASKS = {
    "libero_goal": (
        "put_the_bowl_on_the_stove",
        "put_the_wine_bottle_on_top_of_the_cabinet",
        "put_the_bowl_on_top_of_the_cabinet",
        "put_the_cream_cheese_in_the_bowl",
        "put_the_bowl_on_the_plate",
    ),
    "libero_10": (  # two objects, one after the other
        "LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket",
        "LIVING_ROOM_SCENE5_put_the_white_mug_on_the_left_plate_and_put_the_yellow_and_white_mug_on_the_right_plate",
        "LIVING_ROOM_SCENE6_put_the_white_mug_on_the_plate_and_put_the_chocolate_pudding_to_the_right_of_the_plate",
        "LIVING_ROOM_SCENE1_put_both_the_alphabet_soup_and_the_cream_cheese_box_in_the_basket",
    ),
}


@dataclass(frozen=True)
class Box:
    """World-frame axis-aligned bounds (lo, hi: (3,)) of a body's collision geoms."""

    lo: np.ndarray
    hi: np.ndarray

    @property
    def centre(self) -> np.ndarray:
        return (self.lo + self.hi) / 2


def collision_box(model, data, body_id: int) -> Box:
    """Bounds of the collision geoms (group 0) of ``body_id``: boxes exactly, others by their bounding sphere."""
    geoms = np.flatnonzero((model.geom_bodyid == body_id) & (model.geom_group == 0))
    if len(geoms) == 0:
        raise ValueError(f"body {model.body(body_id).name!r} has no collision geoms to grasp")
    lows, highs = [], []
    for geom in geoms:
        centre = data.geom_xpos[geom]
        if model.geom_type[geom] == 6:  # box: its half sizes turned into the world frame
            half = np.abs(data.geom_xmat[geom].reshape(3, 3)) @ model.geom_size[geom]
        else:
            half = np.full(3, model.geom_rbound[geom])
        lows.append(centre - half)
        highs.append(centre + half)
    return Box(np.min(lows, axis=0), np.max(highs, axis=0))


def body_boxes(model, data, body_id: int, origin: np.ndarray) -> list[Box]:
    """Bounds of each collision geom of ``body_id`` (mesh vertices or box corners), relative to ``origin`` (3,)."""
    boxes = []
    for geom in np.flatnonzero((model.geom_bodyid == body_id) & (model.geom_group == 0)):
        rotation = data.geom_xmat[geom].reshape(3, 3)
        if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_MESH:
            mesh = model.geom_dataid[geom]
            start = model.mesh_vertadr[mesh]
            local = model.mesh_vert[start : start + model.mesh_vertnum[mesh]]
        else:  # boxes exactly, other shapes by their bounding sphere's cube
            half = model.geom_size[geom] if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_BOX else np.full(3, model.geom_rbound[geom])
            local = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
        points = data.geom_xpos[geom] + local @ rotation.T - origin
        boxes.append(Box(points.min(axis=0), points.max(axis=0)))
    return boxes


def rectangle_meets_box(centre: np.ndarray, half: np.ndarray, yaw: float, box: Box) -> bool:
    """Whether a rectangle (centre (2,), half extents (2,), turned by ``yaw``) overlaps ``box``'s xy bounds
    (separating-axis test on the box's axes and the rectangle's)."""
    axes = np.array([[np.cos(yaw), np.sin(yaw)], [-np.sin(yaw), np.cos(yaw)]])  # the rectangle's axes (rows)
    box_half = (box.hi[:2] - box.lo[:2]) / 2
    gap = centre - box.centre[:2]
    for axis in (np.array([1.0, 0.0]), np.array([0.0, 1.0]), axes[0], axes[1]):
        reach = np.abs(axes @ axis) @ half + np.abs(axis) @ box_half
        if abs(gap @ axis) > reach:
            return False
    return True


def span_along(model, data, body_id: int, point: np.ndarray, direction: np.ndarray, band: float) -> float:
    """Extent (m) of ``body_id``'s box collision geoms along the horizontal ``direction`` (3,) on the lines
    through ``point`` (3,) and ``band`` to either side: how far open fingers closing there must be."""
    across = np.array([-direction[1], direction[0], 0.0])
    lows, highs = [], []
    for geom in np.flatnonzero((model.geom_bodyid == body_id) & (model.geom_group == 0)):
        rotation = data.geom_xmat[geom].reshape(3, 3)
        if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_BOX:
            half = model.geom_size[geom]
        else:
            half = np.full(3, model.geom_rbound[geom])
        step = rotation.T @ direction
        for offset in (-band, 0.0, band):
            start = rotation.T @ (point + offset * across - data.geom_xpos[geom])
            low, high = -np.inf, np.inf
            for axis in range(3):  # the line's stretch inside each slab of the box
                if abs(step[axis]) < 1e-9:
                    if abs(start[axis]) > half[axis]:
                        low, high = np.inf, -np.inf
                    continue
                ends = sorted(((-half[axis] - start[axis]) / step[axis], (half[axis] - start[axis]) / step[axis]))
                low, high = max(low, ends[0]), min(high, ends[1])
            if low <= high:
                lows.append(low)
                highs.append(high)
    return float(max(highs) - min(lows)) if lows else 0.0


def _descends_from(model, body: int, ancestor: int) -> bool:
    while body > 0:
        body = model.body_parentid[body]
        if body == ancestor:
            return True
    return False


def goals_of(inner) -> list[tuple[str, str, str]]:
    """(object, target body, target as the goal names it) of each pick-and-place predicate ``(On|In obj
    target)`` of the task's goal, in the task file's order; a region names its body (None: a region of the
    table)."""
    goals = []
    for predicate in inner.parsed_problem["goal_state"]:
        if predicate[0].lower() not in ("on", "in") or len(predicate) != 3:
            raise ValueError(f"the LIBERO expert handles On/In goals; this task's goal has {predicate}")
        _, obj, target = predicate
        body = next((body for body in inner.obj_body_id if target == body or target.startswith(f"{body}_")), None)
        if body is None and target not in inner.object_sites_dict:  # a region of the table has no body
            raise ValueError(f"no body or region for the goal's target {target!r}; bodies: {sorted(inner.obj_body_id)}")
        goals.append((obj, body, target))
    return goals


class LiberoPickPlaceExpert(ScriptedExpert):
    """Pick the goal's object and put it on or in the goal's target (``reset`` after every ``env.reset``)."""

    # ----------------------------------------------------------------- privileged state
    @property
    def _site(self) -> int:
        return int(self.env.libero_env.robots[0].eef_site_id["right"])

    def _eef(self) -> np.ndarray:
        return self.env.data.site_xpos[self._site].copy()

    def _box(self, name: str) -> Box:
        inner = self.env.libero_env
        return collision_box(self.env.model, self.env.data, inner.obj_body_id[name])

    def _subtree_boxes(self, name: str) -> list[Box]:
        """Bounds of each collision geom of ``name``'s body and the bodies below it (a fixture's parts)."""
        model, data = self.env.model, self.env.data
        root = self.env.libero_env.obj_body_id[name]
        return [
            box
            for body in range(model.nbody)
            if body == root or _descends_from(model, body, root)
            for box in body_boxes(model, data, body, np.zeros(3))
        ]

    def _base(self, name: str | None) -> float:
        """Height (m) of the lowest collision geom of ``name`` and its parts (None: the goal's table region)."""
        if name is None:
            return float(self._place_centre()[2])
        return min(box.lo[2] for box in self._subtree_boxes(name))

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode: read the goals from the task and the first grasp from the current state."""
        super().reset(seed)
        self.start_orientation = self.env.data.site_xmat[self._site].reshape(3, 3).copy()
        self._gripper = self._gripper_parts()  # as at the start: fingers open, the hand upright
        self.goals = goals_of(self.env.libero_env)
        self.goal_index = 0
        self._start_goal()

    def _start_goal(self) -> None:
        """Plan the pick and place of goal ``goal_index`` from the current state."""
        self.sequence = PhaseSequence(PHASE_TIMEOUT)
        self.orientation = self.start_orientation
        inner = self.env.libero_env
        self.obj, self.target, region = self.goals[self.goal_index]
        # A region of a fixture (a stove's cook region, a cabinet's top) is a site: the object goes there.
        table_region = self.target is None
        self.place_site = region if table_region or (region != self.target and self.target in inner.fixtures_dict) else None
        self.is_bowl = "bowl" in self.obj or "mug" in self.obj  # gripped by the wall
        # A bowl raised in or on a fixture (a cabinet) leaves no room beside it for a finger along y: turn the
        # gripper a quarter about the vertical and grip the wall that faces the robot instead.
        self.turned = self.is_bowl and self._box(self.obj).lo[2] > self._base(self.target) + RAISED
        self.axis = 0 if self.turned else 1  # a bowl's fingers close along world y, or along x once turned
        self.side = float(np.sign(self._eef()[self.axis] - self._box(self.obj).centre[self.axis]) or -1.0)
        self._neighbours = self._neighbour_parts()
        if self.is_bowl and not self.turned:
            # The wall on the gripper's side, unless a finger there would land on a neighbour (a ramekin
            # beside the bowl) and the far wall is clear.
            if not self._clear(self._grasp_point(), 0.0, 0.0) and self._clear(self._grasp_point(-self.side), 0.0, 0.0):
                self.side = -self.side
        # Another object is gripped across its narrow side, the gripper turned as little as keeps its hand
        # and fingers clear of the objects around (a box lying flat beside a tall can: the hand, 20 cm along
        # the closing axis, would land on the can).
        self.yaw = np.pi / 2 if self.turned else 0.0 if self.is_bowl else self._grasp_yaw()
        if self.yaw:
            self.orientation = Rotation.from_euler("z", self.yaw).as_matrix() @ self.orientation

    def _place_centre(self) -> np.ndarray:
        """Where the held object's centre goes (x, y) and the height of the surface there (z): the goal's
        region of a fixture (its site; the fixture's highest collision geom under it), else the target's
        collision bounds (centre, top)."""
        if self.place_site is None:
            box = self._box(self.target)
            return np.array([*box.centre[:2], box.hi[2]])
        model, data = self.env.model, self.env.data
        site = data.site_xpos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, self.place_site)]
        if self.target is None:  # a region of the table: its site lies on the table
            return site.copy()
        under = [
            box.hi[2]
            for box in self._subtree_boxes(self.target)
            if np.all(box.lo[:2] <= site[:2]) and np.all(site[:2] <= box.hi[:2])
        ]
        return np.array([site[0], site[1], max(under) if under else site[2]])

    def _gripper_parts(self) -> list[Box]:
        """Bounds of the hand's and fingers' collision geoms relative to the grip site, as they are now."""
        model, data, hand = self.env.model, self.env.data, self.env._hand_body
        site = self._eef()
        return [
            box
            for body in range(model.nbody)
            if body == hand or _descends_from(model, body, hand)
            for box in body_boxes(model, data, body, site)
        ]

    def _neighbour_parts(self) -> list[Box]:
        """Bounds of the collision geoms of every object and fixture but the gripped one (their bodies and
        those below them: a cabinet's drawers)."""
        names = [name for name in self.env.libero_env.obj_body_id if name != self.obj]
        return [box for name in names for box in self._subtree_boxes(name)]

    def _clear(self, grasp: np.ndarray, yaw: float, clearance: float) -> bool:
        """Whether the gripper, its site at ``grasp`` (3,) and turned by ``yaw``, stays ``clearance`` from
        every object other than the one it grips."""
        turn = Rotation.from_euler("z", yaw).as_matrix()
        return not any(
            grasp[2] + part.lo[2] < other.hi[2]
            and rectangle_meets_box(grasp[:2] + (turn @ part.centre)[:2], (part.hi - part.lo)[:2] / 2 + clearance, yaw, other)
            for part in self._gripper
            for other in self._neighbours
        )

    def _grasp_yaw(self) -> float:
        """The first turn of :data:`GRASP_YAWS` whose closing line spans at most :data:`MAX_SPAN` of the
        object and whose gripper stays :data:`CLEARANCE` (then 0) from every other object; 0 if none does."""
        model, data, inner = self.env.model, self.env.data, self.env.libero_env
        grasp = self._grasp_point()
        for clearance in (CLEARANCE, 0.0):
            for yaw in GRASP_YAWS:
                closing = Rotation.from_euler("z", yaw).as_matrix()[:, 1]
                if span_along(model, data, inner.obj_body_id[self.obj], grasp, closing, PAD_HALF_WIDTH) > MAX_SPAN:
                    continue
                if self._clear(grasp, yaw, clearance):
                    return float(yaw)
        return 0.0

    def _grasp_point(self, side: float | None = None) -> np.ndarray:
        """Where the grip site closes: a bowl's wall on ``side`` (default: the chosen one) of its closing
        axis, or an object's centre near its top."""
        box = self._box(self.obj)
        height = box.hi[2] - box.lo[2]
        if self.is_bowl:  # the wall across the fingers' closing axis
            model, data = self.env.model, self.env.data
            body = self.env.libero_env.obj_body_id[self.obj]
            walls = np.flatnonzero((model.geom_bodyid == body) & (model.geom_group == 0))
            side = self.side if side is None else side
            wall = walls[np.argmax(side * data.geom_xpos[walls, self.axis])]
            return np.array([data.geom_xpos[wall, 0], data.geom_xpos[wall, 1], box.hi[2] - 0.012])
        return np.array([box.centre[0], box.centre[1], max(box.hi[2] - 0.03, box.lo[2] + 0.4 * height)])

    def _phases(self) -> list[Phase]:
        grasp = self._grasp_point()
        obj_box = self._box(self.obj)
        offset = grasp[:2] - obj_box.centre[:2]  # grip site relative to the object's centre, held fixed
        hold_height = grasp[2] - obj_box.lo[2]  # grip site above the object's bottom
        target_top = self._place_centre()[2]
        carry_z = max(target_top, obj_box.hi[2]) + hold_height + 0.08
        place_z = target_top + hold_height + (0.02 if self.is_bowl else 0.03)

        def over_target(z: float):
            return lambda: np.array([*(self._place_centre()[:2] + offset), z])

        above_grasp = grasp + np.array([0.0, 0.0, 0.10])
        return [
            Phase(lambda: above_grasp, OPEN, tolerance=0.015),
            Phase(lambda: grasp, OPEN, tolerance=0.006, min_steps=3),
            Phase(lambda: grasp, CLOSED, tolerance=None, min_steps=18),
            Phase(lambda: np.array([*grasp[:2], carry_z]), CLOSED, tolerance=0.03),
            Phase(over_target(carry_z), CLOSED, tolerance=0.015),
            Phase(over_target(place_z), CLOSED, tolerance=0.01),
            Phase(over_target(place_z), OPEN, tolerance=None, min_steps=10),
            Phase(over_target(carry_z), OPEN, tolerance=0.02),
        ]

    # ----------------------------------------------------------------- acting
    def act(self, obs: object = None) -> np.ndarray:
        """Next action (7,) in the controller's units."""
        phase, target = self.sequence.advance(self._phases, self._eef)
        if self.sequence.finished and self.goal_index < len(self.goals) - 1:  # placed: on to the next goal
            self.goal_index += 1
            self._start_goal()
            phase, target = self.sequence.advance(self._phases, self._eef)
        translation = (target - self._eef()) / TRANSLATION_SCALE
        if self.noise_std > 0:
            translation = translation + self.rng.normal(0.0, self.noise_std, size=3)
        translation = np.clip(translation, -MAX_TRANSLATION, MAX_TRANSLATION)
        current = self.env.data.site_xmat[self._site].reshape(3, 3)
        rotation = Rotation.from_matrix(self.orientation @ current.T).as_rotvec() / ROTATION_SCALE
        return np.array([*translation, *np.clip(rotation, -1.0, 1.0), phase.gripper], dtype=np.float32)


def libero_experts() -> dict[str, type]:
    """task id (``<suite>/<index>`` and ``<suite>/<name>``) -> expert class, for the suites with experts."""
    from envs.libero.suites import suite_tasks

    experts: dict[str, type] = {}
    for suite in SUITES_WITH_EXPERTS + tuple(PICK_PLACE_TASKS):
        for task in suite_tasks(suite):
            if suite in SUITES_WITH_EXPERTS or task.name in PICK_PLACE_TASKS[suite]:
                experts[task.task_id] = experts[f"{suite}/{task.name}"] = LiberoPickPlaceExpert
    return experts
