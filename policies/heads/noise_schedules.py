"""Schedules of a head's hyper-parameters over RL training steps (noise-level annealing)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinearSchedule:
    """``start`` at step 0, linearly to ``end`` at step ``num_steps``, then constant ``end``.

    ``num_steps=0`` means ``end`` from the first step on.
    """

    start: float
    end: float
    num_steps: int

    def __post_init__(self) -> None:
        if self.num_steps < 0:
            raise ValueError(f"LinearSchedule: num_steps={self.num_steps} must be >= 0")

    def value(self, step: int) -> float:
        if self.num_steps == 0:
            return self.end
        fraction = min(max(step, 0) / self.num_steps, 1.0)
        return self.start + fraction * (self.end - self.start)
