"""The `vla-rl` command: train | eval | collect | sft | reproduce | bench | envs | policies | plot | config.

Each subcommand lives in its own module under :mod:`vla_rl.commands`. Commands that take
a config accept Hydra overrides after their name, e.g.
``vla-rl collect env=tabletop_all collect.episodes_per_task=5``, and ``--config-dir DIR`` to find
config groups of your own (``DIR/env/my_env.yaml``: ``env=my_env``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from vla_rl.commands import COMMAND_MODULES
from vla_rl.commands.common import CONFIG_DIR_HELP
from vla_rl.config import ConfigError

#: Errors whose message says in full what a plug-in (an env, a policy) or a run did wrong: printed as one line, exit
#: status 1, no traceback. (module, class): an error of a module that was never imported cannot have been raised, so
#: the CLI imports none of them (policies would import torchvision, see docs/platform.md).
PLUGIN_ERRORS = (("policies.factory", "PolicyProtocolError"), ("vla_rl.workers.chunked_envs", "EnvOutputError"),
                 ("vla_rl.workers.chunked_envs", "PolicyOutputError"),
                 ("vla_rl.stages.rl.trainer", "NonFiniteLossError"))  # fmt: skip


def is_plugin_error(error: BaseException) -> bool:
    types = tuple(getattr(sys.modules[module], name) for module, name in PLUGIN_ERRORS if module in sys.modules)
    return isinstance(error, types)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vla-rl", description="Train vision-language-action robot policies with RL in simulation."
    )
    parser.add_argument("--config-dir", dest="global_config_dir", action="append", default=[], metavar="DIR",
                        help=CONFIG_DIR_HELP)  # also after the command's name
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from vla_rl.runtime.process_env import apply_runtime_defaults, limit_malloc_arenas

    apply_runtime_defaults()
    limit_malloc_arenas()
    from vla_rl.config.loading import searching_config_dirs
    from vla_rl.runtime.run_record import RecordError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    args.argv = argv  # for the run record (run.json)
    if extra and (any(a.startswith("-") for a in extra) or not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:  # overrides after an option (`--config-dir DIR`): argparse leaves them over
        args.overrides = [*args.overrides, *extra]
    try:
        with searching_config_dirs([*args.global_config_dir, *(getattr(args, "config_dir", None) or ())]):
            return args.func(args)
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    except RecordError as error:
        print(f"record error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        # Imported here, not above: torch's checkpoint module costs seconds that `envs`, `plot` and `config` skip.
        from vla_rl.runtime.checkpoint import CheckpointLoadError

        if isinstance(error, CheckpointLoadError):
            print(f"checkpoint error: {error}", file=sys.stderr)
            return 2
        if is_plugin_error(error):
            print(f"error: {error}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
