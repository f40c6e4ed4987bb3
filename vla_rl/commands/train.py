"""`vla-rl train`: run an experiment (collect, SFT, RL, evaluation: the stages of ``experiment.stages``)."""

from __future__ import annotations

import argparse

from vla_rl.commands.common import add_config_arguments, recording


def train_overrides(overrides: list[str]) -> list[str]:
    """``overrides`` as `vla-rl train` composes them: without an ``experiment=``, the default experiment."""
    if any(o.lstrip("+~").startswith("experiment=") for o in overrides):
        return list(overrides)
    return ["experiment=default", *overrides]


def cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from vla_rl.config import load_config, validate_train_config
    from vla_rl.stages.pipeline import check_resumable, read_progress, run_experiment

    cfg = load_config(train_overrides(list(args.overrides)))
    validate_train_config(cfg)
    if bool(cfg.trainer.resume):  # before the record: a refused resume leaves the folder as it was
        check_resumable(Path(cfg.run_dir), read_progress(Path(cfg.run_dir)))
    with recording(args, cfg, "train", resume=bool(cfg.trainer.resume)) as record:
        run_experiment(cfg, record)
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
