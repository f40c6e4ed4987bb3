"""What the command modules share."""

from __future__ import annotations

import argparse

OVERRIDES_HELP = "Hydra config overrides, e.g. env.tasks=[lift] seed=3 (see configs/)"
CONFIG_DIR_HELP = (
    "a folder of your own config groups (DIR/env/my_env.yaml is env=my_env, DIR/experiment/x.yaml is "
    "experiment=x), searched after vla-rl's configs/; repeatable. The environment variable VLA_RL_CONFIG_PATH "
    "(folders separated by ':') does the same"
)


def add_config_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--config-dir DIR`` (repeatable): every command takes it, as the README says."""
    parser.add_argument("--config-dir", action="append", default=[], metavar="DIR", help=CONFIG_DIR_HELP)


def add_config_arguments(parser: argparse.ArgumentParser, overrides_help: str = OVERRIDES_HELP) -> None:
    """The Hydra overrides (positional) and ``--config-dir`` of a command that composes the config."""
    add_config_dir_argument(parser)
    parser.add_argument("overrides", nargs="*", help=overrides_help)
