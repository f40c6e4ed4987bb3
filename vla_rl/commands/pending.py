"""Commands whose issue has not landed yet: each says so plainly and exits with status 2."""

from __future__ import annotations

import argparse

from vla_rl.commands.common import OVERRIDES_HELP, not_available

PENDING = {
    "train": ("run an experiment: collect demos, SFT, RL, evaluate",
              "the trainer (Ray worker groups, FSDP2 actors, PPO/GRPO fit loop) lands with issue 5"),
    "eval": ("evaluate a policy or checkpoint, with videos",
             "evaluation with videos and eval_info.json lands with issue 6"),
    "sft": ("behaviour-cloning pre-training on demonstrations", "behaviour-cloning pre-training lands with issue 7"),
}  # fmt: skip


def register(commands: argparse._SubParsersAction, names: tuple[str, ...] = tuple(PENDING)) -> None:
    for name in names:
        summary, reason = PENDING[name]
        sub = commands.add_parser(name, help=summary, description=f"{summary}. (Not available yet: {reason}.)")
        sub.add_argument("overrides", nargs="*", help=OVERRIDES_HELP)
        sub.set_defaults(func=lambda args, name=name, reason=reason: not_available(name, reason))
