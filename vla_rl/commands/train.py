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
    from vla_rl.config.loading import load_config
    from vla_rl.stages.pipeline import check_resumable, check_train_plan, run_experiment
    from vla_rl.stages.run_plan import read_run_plan

    cfg = load_config(train_overrides(list(args.overrides)))
    run = read_run_plan(cfg)
    check_train_plan(run)
    if run.trainer.resume:  # before the record: a refused resume leaves the folder as it was
        check_resumable(run)
    with recording(args, cfg, run, "train", resume=run.trainer.resume) as record:
        run_experiment(run, record)
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
