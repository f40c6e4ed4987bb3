"""The subcommands of `vla-rl`: one module each, with a `register(subparsers)` function."""

from __future__ import annotations

# In the order `vla-rl --help` lists them.
COMMAND_MODULES = (
    "vla_rl.commands.train",
    "vla_rl.commands.eval",
    "vla_rl.commands.collect",
    "vla_rl.commands.sft",
    "vla_rl.commands.reproduce",
    "vla_rl.commands.bench",
    "vla_rl.commands.envs",
    "vla_rl.commands.env_server",
    "vla_rl.commands.policies",
    "vla_rl.commands.plot",
    "vla_rl.commands.config",
)
