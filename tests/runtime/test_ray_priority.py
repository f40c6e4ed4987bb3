"""Ray workers run at the driver's priority: the work of a run (simulation, inference, the update) happens in them,
so Ray's default of nice 15 would let any other process of the machine, the driver included, starve them."""

from __future__ import annotations

import os

import ray


def test_ray_workers_run_at_the_priority_of_the_driver(ray_session):
    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == os.nice(0)
