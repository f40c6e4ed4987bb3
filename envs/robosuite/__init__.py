"""robosuite tasks as vla-rl envs: ``make("robosuite/Lift")`` or ``make_robosuite_env(task="Lift")``.

Importing this package is cheap (robosuite itself is imported when the first env is built), but
it raises ImportError when robosuite is not installed, so the registry leaves ``robosuite`` out.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("robosuite") is None:
    raise ImportError("robosuite is not installed: pip install 'robosuite>=1.5.1,<1.6' 'mujoco>=3.3,<3.10'")

from envs.robosuite.env import RobosuiteEnv, make_robosuite_env  # noqa: E402
from envs.robosuite.tasks import ROBOSUITE_TASKS, TASKS, RobosuiteTask  # noqa: E402

__all__ = ["ROBOSUITE_TASKS", "TASKS", "RobosuiteEnv", "RobosuiteTask", "make_robosuite_env"]
