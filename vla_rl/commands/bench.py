"""`vla-rl bench env | policy | rollout`: speed benchmarks that print one JSON object."""

from __future__ import annotations

import argparse
import json
import sys


def cmd_bench(args: argparse.Namespace) -> int:
    if args.target == "env":
        from envs.registry import resolve

        entry, task = resolve(args.task if "/" in args.task else f"{args.env}/{args.task}")
        if entry.name != "tabletop":
            print(f"vla-rl bench env: no benchmark for env {entry.name!r} yet; available for: tabletop",
                  file=sys.stderr)  # fmt: skip
            return 2
        from envs.builtin.benchmark import measure_env_speed

        result = measure_env_speed(task=task, num_steps=args.steps, seed=args.seed)
        result = {"env": entry.name, "task": task, **result}
    elif args.target == "policy":
        from policies.benchmark import run_policy_benchmark

        result = run_policy_benchmark(batch_size=args.batch_size)
    else:
        print(f"vla-rl bench {args.target}: not available yet: the rollout benchmark lands with issue 5.",
              file=sys.stderr)  # fmt: skip
        return 2
    print(json.dumps(result))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="speed benchmarks; print one JSON object as the last line")
    bench.add_argument("target", choices=["env", "policy", "rollout"], help="what to measure")
    bench.add_argument("--env", default="tabletop", help="env name (bench env)")
    bench.add_argument("--task", default="reach", help="task, or NAME/TASK (bench env)")
    bench.add_argument("--steps", type=int, default=2000, help="env steps per measurement (bench env)")
    bench.add_argument("--batch-size", type=int, default=32, help="batch size (bench policy)")
    bench.add_argument("--seed", type=int, default=0)
    bench.set_defaults(func=cmd_bench)
