"""The Ray session shared by the trainer tests."""

from __future__ import annotations

import pytest
import ray


@pytest.fixture(scope="module")
def ray_session():
    from vla_rl.runtime.ray_cluster import init_ray

    init_ray(num_cpus=6)
    yield
    ray.shutdown()
