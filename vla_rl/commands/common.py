"""What the command modules share."""

from __future__ import annotations

import sys

OVERRIDES_HELP = "Hydra config overrides, e.g. env.tasks=[lift] seed=3 (see configs/)"


def not_available(command: str, reason: str) -> int:
    """A command whose issue has not landed says so plainly and exits with status 2."""
    print(f"vla-rl {command}: not available yet: {reason}.", file=sys.stderr)
    return 2
