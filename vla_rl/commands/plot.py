"""`vla-rl plot RUN_DIR`: learning curves from a run's metrics.jsonl as PNG files."""

from __future__ import annotations

import argparse
import sys

from vla_rl.commands.common import add_config_dir_argument


def cmd_plot(args: argparse.Namespace) -> int:
    from vla_rl.logging.plotting import plot_run

    try:
        paths = plot_run(args.run_dir, args.output)
    except (FileNotFoundError, ValueError) as error:
        print(f"vla-rl plot: {error}", file=sys.stderr)
        return 2
    if not paths:
        print("vla-rl plot: no success, return, loss or timing metrics to draw", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    plot = commands.add_parser("plot", help="draw learning curves of a run as PNG files",
                               description="Draw success rate, return, losses and throughput from RUN_DIR/"
                               "metrics.jsonl (a `vla-rl train` run folder: RUN_DIR/rl/metrics.jsonl) into plots/ "
                               "beside it (or --output).")  # fmt: skip
    plot.add_argument("run_dir", help="a run folder holding metrics.jsonl or rl/metrics.jsonl (or the file itself)")
    plot.add_argument("--output", default=None, help="folder for the PNG files (default: plots/ beside metrics.jsonl)")
    add_config_dir_argument(plot)
    plot.set_defaults(func=cmd_plot)
