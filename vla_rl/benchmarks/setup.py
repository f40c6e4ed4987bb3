"""What the trainer benchmarks share besides the run plan (:func:`vla_rl.stages.rl.experiment.plan_rl_run`): free CPUs
and a wall clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def fits_at_once(num_cpus: float) -> bool:
    """Whether Ray has ``num_cpus`` logical CPUs free now (else workers started together would wait for each other)."""
    import ray

    return ray.available_resources().get("CPU", 0.0) >= num_cpus


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock seconds of one call, and its result."""
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result
