"""LIBERO's scripted experts on the official init states: success per task with 95% Wilson intervals.

Run: ``python scripts/libero_experts.py SUITE_OR_TASK... [--init-states N] [--output FILE]``, e.g.
``python scripts/libero_experts.py libero_spatial libero_object`` (every task, init states 0..49) or
``python scripts/libero_experts.py libero_object/1 --init-states 10``. Each episode is the evaluation's
(``vla-rl eval env=SUITE eval.policy=expert``): reset from official init state k (with its settle steps),
the expert acts until success or the suite's episode limit; no cameras are rendered (the expert reads the
simulator's state). Prints one line per episode and per task, and writes all of it as JSON to ``--output``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from envs.experts import get_expert
from envs.libero.env import make_libero_env
from envs.libero.suites import SUITES, get_task, suite_tasks
from vla_rl.stages.evaluation.metrics import wilson_interval


def resolve(names: list[str]) -> list[str]:
    """Suites expand to their tasks, in LIBERO's order; task ids are checked."""
    tasks: list[str] = []
    for name in names:
        if name in SUITES:
            tasks.extend(task.task_id for task in suite_tasks(name))
        else:
            tasks.append(get_task(name).task_id)
    return tasks


def run_task(task: str, init_states: range) -> dict:
    """Success and length of the expert's episode from each init state of ``task``."""
    env = make_libero_env(task=task, cameras=())
    try:
        episodes = []
        for index in init_states:
            env.reset(options={"init_state": index})
            expert = get_expert("libero", task, env)
            steps, done, info = 0, False, {}
            while not done:
                _, _, terminated, truncated, info = env.step(expert.act())
                steps, done = steps + 1, terminated or truncated
            episodes.append({"init_state": index, "success": bool(info["is_success"]), "steps": steps})
            print(task, episodes[-1], flush=True)
    finally:
        env.close()
    wins = sum(episode["success"] for episode in episodes)
    low, high = wilson_interval(wins, len(episodes))
    return {"task": task, "successes": wins, "episodes": len(episodes), "wilson_95": [low, high], "runs": episodes}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", help="suites (every task) or task ids <suite>/<index>")
    parser.add_argument("--init-states", type=int, default=50, help="official init states 0..N-1 of each task")
    parser.add_argument("--output", help="JSON file for the results (written to a temporary name, then renamed)")
    args = parser.parse_args(argv)
    results = []
    for task in resolve(args.tasks):
        start = time.process_time()
        row = run_task(task, range(args.init_states))
        row["cpu_s"] = time.process_time() - start
        results.append(row)
        low, high = row["wilson_95"]
        print(f"{task}: {row['successes']}/{row['episodes']} ({low:.3f}-{high:.3f})", flush=True)
        if args.output:
            partial = f"{args.output}.tmp"
            with open(partial, "w") as file:
                json.dump(results, file, indent=1)
            os.replace(partial, args.output)
    return results


if __name__ == "__main__":
    main()
