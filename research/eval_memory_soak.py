"""The driver's memory across repeated in-process evaluations: RSS after each call.

    python research/eval_memory_soak.py 30            # 30 evaluations with the same weights
    python research/eval_memory_soak.py 30 trace      # and the 8 biggest tracemalloc growths from call 5 on
    python research/eval_memory_soak.py 30 fresh      # a fresh copy of the weights for each call, as the trainer's

Builds the trainer's :class:`PeriodicEvaluation` for ``experiment=rl_only`` (2 episodes per task, videos as
configured) in a temporary run folder and calls it with one set of weights; prints the RSS in MiB after each
call and, last, the list as JSON. Run it with and without the malloc variables of docs/platform.md.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path

import psutil

from vla_rl.config import load_config
from vla_rl.logging.trackers import make_trackers
from vla_rl.stages.rl.experiment import PeriodicEvaluation, plan_rl_run
from vla_rl.stages.run_plan import read_run_plan


def main() -> int:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    trace = len(sys.argv) > 2 and sys.argv[2] == "trace"
    fresh = len(sys.argv) > 2 and sys.argv[2] == "fresh"
    run = Path(tempfile.mkdtemp())
    cfg = load_config(["experiment=rl_only", f"run_dir={run}", "eval.num_envs=4", "trainer.eval_episodes_per_task=2"])
    plan = plan_rl_run(read_run_plan(cfg))
    tracker = make_trackers(["jsonl"], run, {}, project="eval-memory-soak")
    evaluation = PeriodicEvaluation(plan, run, tracker)
    weights = evaluation.policy.state_dict()
    rss, first = [], None
    for call in range(calls):
        if trace and call == 5:
            tracemalloc.start(25)
            first = tracemalloc.take_snapshot()
        evaluation({k: v.clone() for k, v in weights.items()} if fresh else weights, call)
        gc.collect()
        rss.append(round(psutil.Process().memory_info().rss / 2**20, 1))
        print("call", call, "rss_mib", rss[-1], flush=True)
    if first is not None:
        for stat in tracemalloc.take_snapshot().compare_to(first, "traceback")[:8]:
            print(stat)
            print("\n".join(stat.traceback.format()[-6:]))
    evaluation.close()
    tracker.close()
    print(json.dumps(rss))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
