"""Starting (or joining) Ray for one experiment."""

from __future__ import annotations

import os

import ray

from vla_rl.runtime.process_env import DEFAULTS

# Variables every worker process must see (offline hubs, headless GL, malloc settings, import paths).
FORWARDED_VARIABLES = (*DEFAULTS, "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "PYTHONPATH", "VLA_RL_DEVICE")


# Ray's GCS keeps the events of the last 100k tasks for its dashboard by default: ~115 MiB/h of growth in a
# one-hour run (docs/results.md). A run submits a few tasks per iteration and never reads them back.
# Ray starts its workers at nice 15 by default; here they do the run's work (simulation, inference, the
# update), so at that priority any other process of the machine, the driver included, starves them.
LOCAL_SYSTEM_CONFIG = {"task_events_max_num_task_in_gcs": 2000, "worker_niceness": 0}


def init_ray(num_cpus: float | None = None, address: str | None = None, temp_dir: str | None = None) -> None:
    """Start a local Ray instance (or join ``address``) unless one is running.

    ``num_cpus`` is the number of logical CPU slots; it may exceed the physical cores, since
    env, rollout and actor workers mostly take turns. Defaults to max(8, os.cpu_count()): every worker holds
    one slot for its life, so a run whose training workers fill the slots would wait forever for those of its
    periodic evaluation (a 2-core machine with 4 slots: 2 env workers, rollout, actor, then 2 eval workers).
    """
    if ray.is_initialized():
        return
    from vla_rl.runtime.process_env import apply_runtime_defaults

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
        ray.init(
            num_cpus=num_cpus or max(8, os.cpu_count() or 1), _temp_dir=temp_dir,
            _system_config=LOCAL_SYSTEM_CONFIG, **kwargs,
        )  # fmt: skip
        _start_reaper_once()
    _end_like_ctrl_c_on_sigterm()


def _end_like_ctrl_c_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt in the driver, so ``finally`` blocks shut the worker groups and Ray
    down. Set after ``ray.init``, whose own SIGTERM handler would abort the driver without cleaning up."""
    import signal
    import threading

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


_reaper = None


def _start_reaper_once() -> None:
    """Ray processes of this driver die with it, even after ``kill -9`` (:mod:`vla_rl.runtime.reaper`)."""
    global _reaper
    if _reaper is None or _reaper.poll() is not None:
        from vla_rl.runtime.reaper import start_reaper

        _reaper = start_reaper(os.getpid())


def shutdown_ray() -> None:
    if ray.is_initialized():
        ray.shutdown()
