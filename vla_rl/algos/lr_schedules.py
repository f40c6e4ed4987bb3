"""Learning-rate schedules, as multipliers of the peak rate per optimiser step (for ``LambdaLR``)."""

from __future__ import annotations

import math


def warmup_cosine_factor(step: int, warmup_steps: int, decay_steps: int, min_ratio: float) -> float:
    """Multiplier at optimiser step ``step`` (0-based): linear warmup, then cosine decay to ``min_ratio``.

    ``(step + 1) / warmup_steps`` during warmup; afterwards
    ``min_ratio + (1 - min_ratio) * (1 + cos(pi * p)) / 2`` with ``p = min(1, (step - warmup_steps) /
    decay_steps)``. SFT passes ``decay_steps = total - warmup - 1`` (its last step reaches the floor), the RL
    optimiser ``total - warmup`` (``optim.total_steps``).
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
