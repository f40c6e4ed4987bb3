"""MetaWorld's fixed goal variations: the placements its benchmarks train and evaluate on.

MetaWorld's MT1/MT10/MT50 benchmarks do not draw a fresh placement per episode: each task has 50
placement vectors (``rand_vec``: the initial object and goal positions), generated once from the
benchmark's seed, and episodes of training and of evaluation draw from those 50 (MetaWorld's
``RandomTaskSelectWrapper`` and ``evaluation``). RLinf's MetaWorld env, whose numbers piRL reports,
builds each task as ``Meta-World/MT1`` with one seed, so these are its placements too. With a finite
list, a placement seen in training is seen again at evaluation, and a hidden goal can be told from the
visible object; an env without the list (vla-rl's default) asks for unseen placements instead.
"""

from __future__ import annotations

import functools
import pickle

import numpy as np


@functools.cache
def mt1_variations(task: str, seed: int) -> np.ndarray:
    """The placement vectors of ``metaworld.MT1(task, seed=seed)``'s training tasks, in its order.

    Returns:
        float64 array (50, D): D is the task's ``rand_vec`` size (6 for reach-v3: object xyz, goal xyz).
        Read-only; cached per process (MetaWorld builds the task's env and resets it 50 times, ~1-3 s).
    """
    import metaworld  # the env module has already named the install if it is missing

    tasks = metaworld.MT1(task, seed=int(seed)).train_tasks
    table = np.array([pickle.loads(t.data)["rand_vec"] for t in tasks], dtype=float)
    table.setflags(write=False)
    return table
