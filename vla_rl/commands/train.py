"""`vla-rl train`: run an experiment (collect, SFT, RL, evaluation: the stages of ``experiment.stages``)."""

from __future__ import annotations

import argparse

from vla_rl.commands.common import add_config_arguments


def train_overrides(overrides: list[str]) -> list[str]:
    """``overrides`` as `vla-rl train` composes them: without an ``experiment=``, the default experiment."""
    if any(o.lstrip("+~").startswith("experiment=") for o in overrides):
        return list(overrides)
    return ["experiment=default", *overrides]


def cmd_train(args: argparse.Namespace) -> int:
    from vla_rl.config import load_config, validate_train_config
    from vla_rl.stages.pipeline import run_experiment

    cfg = load_config(train_overrides(list(args.overrides)))
    validate_train_config(cfg)
    run_experiment(cfg)
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train",
        help="run an experiment: collect demos, SFT, RL (PPO/GRPO on Ray + FSDP2), evaluate",
        description="Run the stages of experiment.stages with the composed config. Examples: "
        "`vla-rl train` (the default experiment), `vla-rl train algo=grpo trainer.iterations=50`, "
        "`vla-rl train run_dir=outputs/my_run trainer.resume=true` (continue from the latest checkpoint).",
    )
    add_config_arguments(train)
    train.set_defaults(func=cmd_train)
