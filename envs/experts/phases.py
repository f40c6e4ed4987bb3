"""Scripted experts as sequences of phases: move the end effector to a target with a gripper command.

A phase ends when the end effector is within ``tolerance`` of its target (after ``min_steps``), at
once when ``tolerance`` is None, or after ``timeout`` steps (a target that cannot be reached must not
stall the expert). Targets are callables, evaluated every step, so phases follow objects that move.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class Phase:
    target: Callable[[], np.ndarray]
    gripper: float
    tolerance: float | None = 0.015
    min_steps: int = 0


class PhaseSequence:
    """Where an expert is in its list of phases; ``advance`` is called once per action."""

    def __init__(self, timeout: int):
        self.timeout = timeout
        self.reset()

    def reset(self) -> None:
        self.index = 0
        self.steps_in_phase = 0
        self.phases: list | None = None
        self.finished = False

    def _done(self, phase: Phase, target: np.ndarray, position: np.ndarray) -> bool:
        if self.steps_in_phase >= self.timeout:
            return True
        if self.steps_in_phase < phase.min_steps:
            return False
        if phase.tolerance is None:
            return True
        return bool(np.linalg.norm(position - target) < phase.tolerance)

    def advance(self, build: Callable[[], list], position: Callable[[], np.ndarray]):
        """The phase to act in now and its target, moving past finished phases (``build`` makes the list once)."""
        if self.phases is None:
            self.phases = build()
        phase = self.phases[self.index]
        target = phase.target()
        while self._done(phase, target, position()) and self.index < len(self.phases) - 1:
            self.index += 1
            self.steps_in_phase = 0
            phase = self.phases[self.index]
            target = phase.target()
        #: On the last phase, and done with it: an expert with more to do may start its next sequence.
        self.finished = self.index == len(self.phases) - 1 and self._done(phase, target, position())
        self.steps_in_phase += 1
        return phase, target
