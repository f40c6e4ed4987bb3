"""Starting (or joining) Ray for one experiment."""

from __future__ import annotations

import os

import ray

from vla_rl.runtime_env import DEFAULTS

# Variables every worker process must see (offline hubs, headless GL, malloc settings, import paths).
FORWARDED_VARIABLES = (*DEFAULTS, "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "PYTHONPATH", "VLA_RL_DEVICE")


def init_ray(num_cpus: float | None = None, address: str | None = None, temp_dir: str | None = None) -> None:
    """Start a local Ray instance (or join ``address``) unless one is running.

    ``num_cpus`` is the number of logical CPU slots; it may exceed the physical cores, since
    env, rollout and actor workers mostly take turns. Defaults to max(4, os.cpu_count()).
    """
    if ray.is_initialized():
        return
    from vla_rl.runtime_env import apply_runtime_defaults

    apply_runtime_defaults()
    env_vars = {key: os.environ[key] for key in FORWARDED_VARIABLES if key in os.environ}
    kwargs = dict(
        include_dashboard=False,
        log_to_driver=True,
        runtime_env={"env_vars": env_vars},
        configure_logging=False,
    )
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus or max(4, os.cpu_count() or 1), _temp_dir=temp_dir, **kwargs)


def shutdown_ray() -> None:
    if ray.is_initialized():
        ray.shutdown()
