"""`vla-rl bench env | policy | rollout`: speed benchmarks that print one JSON object."""

from __future__ import annotations

import argparse
import json
import sys


def cmd_bench(args: argparse.Namespace) -> int:
    if args.target == "env":
        from envs.registry import registered, resolve

        if args.task and ("/" in args.task or ":" in args.task):
            env_id = args.task
        else:
            env_id = f"{args.env}/{args.task}" if args.task else args.env
        entry, task = resolve(env_id)
        measure = entry.load_benchmark()
        if measure is None:
            with_benchmark = sorted(name for name, e in registered().items() if e.benchmark is not None)
            print(f"vla-rl bench env: env {entry.name!r} has no benchmark; available for: "
                  f"{', '.join(with_benchmark)}. Register one with register(..., benchmark='pkg.module:measure') "
                  "or set a `benchmark` attribute on the factory", file=sys.stderr)  # fmt: skip
            return 2
        result = measure(task=task, num_steps=args.steps, seed=args.seed)
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
    bench.add_argument("--task", default=None, help="task, or NAME/TASK (bench env; default: the env's default task)")
    bench.add_argument("--steps", type=int, default=2000, help="env steps per measurement (bench env)")
    bench.add_argument("--batch-size", type=int, default=32, help="batch size (bench policy)")
    bench.add_argument("--seed", type=int, default=0)
    bench.set_defaults(func=cmd_bench)
