"""`vla-rl sft`: behaviour-cloning pre-training of the configured policy on collected demonstrations."""

from __future__ import annotations

import argparse
import sys

from vla_rl.commands.common import add_config_arguments, recording


def cmd_sft(args: argparse.Namespace) -> int:
    from pathlib import Path

    from vla_rl.config.loading import load_config
    from vla_rl.stages.run_plan import read_run_plan
    from vla_rl.stages.sft import training
    from vla_rl.stages.sft.batches import DatasetError

    cfg = load_config(args.overrides)
    run = read_run_plan(cfg)
    plan = run.sft_plan()
    try:
        with recording(args, cfg, run, "sft", resume=plan.sft.resume) as record:
            result = training.run(plan, Path(plan.output))
            record.add_output("policy", result.policy_dir)
            record.add_output("metrics", result.metrics_path)
    except DatasetError as error:
        print(f"vla-rl sft: {error}", file=sys.stderr)
        return 2
    best = "none (no validation split)" if result.best_valid_loss is None else f"{result.best_valid_loss:.4f}"
    print(f"policy:       {result.policy_dir}")
    print(f"last policy:  {result.last_dir}")
    print(f"metrics:      {result.metrics_path}")
    print(f"steps: {result.num_steps}, final train loss {result.train_losses[-1]:.4f}, best valid loss {best}, "
          f"{result.samples_per_second:.0f} samples/s, {result.seconds:.0f} s")  # fmt: skip
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    sft = commands.add_parser(
        "sft",
        help="behaviour-cloning pre-training on demonstrations",
        description="Train the policy group's policy by behaviour cloning on the demos in sft.dataset "
        "(default: collect.output; make them with `vla-rl collect`). Writes the best-validation and the "
        "last policy (save_pretrained folders) and sft_metrics.jsonl into sft.output.",
    )
    add_config_arguments(sft)
    sft.set_defaults(func=cmd_sft)
