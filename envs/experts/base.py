"""What every scripted expert starts from: the env, its ``noise_std`` and a seeded generator of the noise."""

from __future__ import annotations

from typing import Any

import numpy as np


class ScriptedExpert:
    """Base of the scripted experts: ``env`` (unwrapped), ``noise_std`` and the generator ``rng`` of the noise.

    Subclasses extend :meth:`reset` to plan an episode (calling this one first) and implement ``act(obs)``.
    """

    def __init__(self, env: Any, noise_std: float = 0.0, seed: int | None = None) -> None:
        self.env = env.unwrapped
        self.noise_std = float(noise_std)
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode (call after ``env.reset``); ``seed`` re-seeds this episode's noise."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
