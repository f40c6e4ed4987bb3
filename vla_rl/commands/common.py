"""What the command modules share."""

from __future__ import annotations

OVERRIDES_HELP = "Hydra config overrides, e.g. env.tasks=[lift] seed=3 (see configs/)"

