"""MetaWorld v3 (MT10, MT50, single tasks) as vla-rl envs: ``make("metaworld/pick-place-v3")``.

Importing this package does not import metaworld; building an env without it raises ImportError
naming the ``pip install`` to run.
"""

from envs.metaworld.tasks import INSTRUCTIONS, METAWORLD_TASKS, MT10_TASKS

__all__ = ["INSTRUCTIONS", "METAWORLD_TASKS", "MT10_TASKS"]
