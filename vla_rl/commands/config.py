"""`vla-rl config [--train] [overrides]`: print the composed config, as a command would run with it."""

from __future__ import annotations

import argparse

from vla_rl.commands.common import add_config_arguments


def cmd_config(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from vla_rl.commands.train import train_overrides
    from vla_rl.config import ConfigError
    from vla_rl.config.loading import load_config

    overrides = train_overrides(list(args.overrides)) if args.train else list(args.overrides)
    cfg = load_config(overrides)
    if args.train:
        from vla_rl.stages.pipeline import check_train_plan
        from vla_rl.stages.run_plan import read_run_plan

        check_train_plan(read_run_plan(cfg))
    node = cfg
    if args.section:
        node = OmegaConf.select(cfg, args.section, default=None)
        if node is None:
            raise ConfigError(f"--section {args.section!r}: the config has no such key; top-level keys: "
                              f"{', '.join(cfg.keys())}")  # fmt: skip
    print(OmegaConf.to_yaml(node, resolve=not args.unresolved) if OmegaConf.is_config(node) else node, end="")
    return 0


def register(commands: argparse._SubParsersAction) -> None:
    config = commands.add_parser(
        "config",
        help="print the composed config (YAML) for the given overrides",
        description="Compose and validate the config as eval, collect and sft do (with --train: as `vla-rl train` "
        "does, the default experiment unless experiment= is given) and print it. Examples: `vla-rl config "
        "env.id=my_pkg.my_env:make`, `vla-rl config --train experiment=flow_residual_ppo --section trainer`.",
    )
    config.add_argument("--train", action="store_true", help="compose as `vla-rl train` does")
    config.add_argument("--section", default=None, metavar="KEY", help="print only this key, e.g. env or trainer.iterations")
    config.add_argument("--unresolved", action="store_true", help="keep ${...} interpolations instead of their values")
    add_config_arguments(config)
    config.set_defaults(func=cmd_config)
