"""The local Ray instance the tests share (``ray_session`` in tests/conftest.py, and module-scoped fixtures)."""

NUM_CPUS = 6  # logical slots: env, rollout and actor workers of a tiny run, with room for a second actor rank


def start_shared_ray() -> None:
    """Start the shared local Ray unless one is running."""
    from vla_rl.runtime.ray_cluster import init_ray

    init_ray(num_cpus=NUM_CPUS)
