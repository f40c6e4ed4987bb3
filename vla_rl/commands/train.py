"""`vla-rl train`: run an experiment (collect, SFT, RL, evaluation: the stages of ``experiment.stages``)."""

from __future__ import annotations

import argparse

from vla_rl.commands.common import OVERRIDES_HELP


def cmd_train(args: argparse.Namespace) -> int:
    from vla_rl.config import load_config
    from vla_rl.pipeline import run_experiment

    overrides = list(args.overrides)
    if not any(o.lstrip("+~").startswith("experiment=") for o in overrides):
        overrides.insert(0, "experiment=default")  # `vla-rl train` alone runs the default experiment
    run_experiment(load_config(overrides))
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train",
        help="run an experiment: collect demos, SFT, RL (PPO/GRPO on Ray + FSDP2), evaluate",
        description="Run the stages of experiment.stages with the composed config. Examples: "
        "`vla-rl train` (the default experiment), `vla-rl train algo=grpo trainer.iterations=50`, "
        "`vla-rl train run_dir=outputs/my_run trainer.resume=true` (continue from the latest checkpoint).",
    )
    train.add_argument("overrides", nargs="*", help=OVERRIDES_HELP)
    train.set_defaults(func=cmd_train)
