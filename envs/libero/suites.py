"""LIBERO's suites and tasks by vla-rl name: ``<suite>/<index>`` or ``<suite>/<task name>``.

Task order, language instructions, task files (BDDL) and the official init states are LIBERO's own,
read from the installed package (its benchmark's default task order).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: Episode limits in env steps (after the settle steps), as openpi's LIBERO evaluation sets them; the
#: longest demonstration of each suite is shorter (openpi's note: 193, 254, 270, 505, 373 steps).
MAX_EPISODE_STEPS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
SUITES = tuple(MAX_EPISODE_STEPS)
MAIN_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")


@dataclass(frozen=True)
class LiberoTask:
    """One LIBERO task: ``suite``, its ``index`` in the suite, LIBERO's ``name`` and ``instruction``."""

    suite: str
    index: int
    name: str
    instruction: str
    bddl_file: Path
    init_states_file: Path

    @property
    def task_id(self) -> str:
        return f"{self.suite}/{self.index}"

    @property
    def max_episode_steps(self) -> int:
        return MAX_EPISODE_STEPS[self.suite]


@cache
def suite_tasks(suite: str) -> tuple[LiberoTask, ...]:
    """Every task of ``suite`` in LIBERO's order."""
    if suite not in MAX_EPISODE_STEPS:
        raise ValueError(f"unknown LIBERO suite {suite!r}; available: {', '.join(SUITES)}")
    from libero.libero import get_libero_path
    from libero.libero.benchmark import get_benchmark_dict

    benchmark = get_benchmark_dict()[suite]()
    bddl_root, init_root = Path(get_libero_path("bddl_files")), Path(get_libero_path("init_states"))
    return tuple(
        LiberoTask(
            suite=suite,
            index=index,
            name=task.name,
            instruction=task.language,
            bddl_file=bddl_root / task.problem_folder / task.bddl_file,
            init_states_file=init_root / task.problem_folder / task.init_states_file,
        )
        for index, task in enumerate(benchmark.tasks)
    )


@cache
def task_ids() -> tuple[str, ...]:
    """``<suite>/<index>`` of every task, then ``<suite>/<name>`` of every task (both are accepted).

    Read from LIBERO's task map file itself: importing its ``benchmark`` package would import torch.
    """
    import importlib.util

    from envs.libero.install import libero_code_dir

    path = libero_code_dir() / "benchmark" / "libero_suite_task_map.py"
    spec = importlib.util.spec_from_file_location("_libero_suite_task_map", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    libero_task_map = module.libero_task_map
    by_index = [f"{suite}/{index}" for suite in SUITES for index in range(len(libero_task_map[suite]))]
    by_name = [f"{suite}/{name}" for suite in SUITES for name in libero_task_map[suite]]
    return tuple(by_index + by_name)


def get_task(task_id: str) -> LiberoTask:
    """The task ``<suite>/<index>`` or ``<suite>/<name>``.

    Raises:
        ValueError: an unknown suite, an index out of range or an unknown name, with what exists.
    """
    suite, sep, key = task_id.partition("/")
    if not sep or not key:
        raise ValueError(f"LIBERO task {task_id!r} must look like '<suite>/<index or name>', e.g. 'libero_spatial/0'")
    tasks = suite_tasks(suite)
    if key.isdigit():
        if int(key) >= len(tasks):
            raise ValueError(f"{suite} has tasks 0..{len(tasks) - 1}, not {key}")
        return tasks[int(key)]
    for task in tasks:
        if task.name == key:
            return task
    raise ValueError(f"{suite} has no task named {key!r}; its tasks: {', '.join(t.name for t in tasks)}")


@cache
def official_init_states(task_id: str):
    """The suite's official init states of the task: (N, state size) float64 MuJoCo states (N = 50)."""
    import numpy as np
    import torch

    task = get_task(task_id)
    states = torch.load(task.init_states_file, weights_only=False)
    return np.asarray(states, dtype=np.float64)
