"""The knobs of behaviour-cloning pre-training (:func:`vla_rl.stages.sft.training.run_sft`): the ``sft`` config section."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class SFTConfig:
    """Knobs of :func:`run_sft` (the ``sft`` config section, less ``dataset`` and ``output``).

    batch_size: samples (observation + action chunk) per step.
    max_steps: optimiser steps at most. epochs: passes over the train split at most (None: no limit);
        training stops at whichever limit comes first.
    learning_rate: peak AdamW learning rate; weight_decay: AdamW decay of weight matrices (not of
        biases, norms or other 1-d parameters).
    warmup_steps: linear warmup from 0; then cosine decay to ``min_learning_rate_ratio * learning_rate``.
    grad_clip_norm: clip the global gradient norm to this (0 or None: no clipping).
    valid_every: steps between validations (also validated at the last step).
    early_stopping_patience: stop after this many validations in a row without a new best validation
        loss (None: train to the end); the best policy is kept either way.
    augment: random-shift augmentation of the training images (DrQ, Kostrikov et al. 2020): each
        image of each sample moves by its own random offset of up to ``augment_shift_pixels`` pixels in
        each direction, edge pixels repeated (the same as pad-by-replication then random crop).
        Validation images are not augmented.
    augment_shift_pixels: the largest shift (pixels) of ``augment``.
    log_every: steps between ``train`` lines in ``sft_metrics.jsonl``.
    num_threads: torch CPU threads (0: every CPU this process may use).
    device: "auto" (the ``VLA_RL_DEVICE`` variable, else CUDA if available, else CPU), "cpu", "cuda:N".
    show_progress: draw a tqdm progress bar with the current loss.
    """

    batch_size: int = 64
    max_steps: int = 2000
    epochs: float | None = None
    learning_rate: float = 3e-4
    weight_decay: float = 0.01
    warmup_steps: int = 100
    min_learning_rate_ratio: float = 0.1
    grad_clip_norm: float | None = 1.0
    valid_every: int = 250
    early_stopping_patience: int | None = None
    augment: bool = True
    augment_shift_pixels: int = 4
    log_every: int = 10
    num_threads: int = 0
    device: str = "auto"
    show_progress: bool = True

    def __post_init__(self) -> None:
        positive = {"batch_size": self.batch_size, "max_steps": self.max_steps, "valid_every": self.valid_every,
                    "log_every": self.log_every}  # fmt: skip
        for name, value in positive.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.epochs is not None and not float(self.epochs) > 0:
            raise ValueError(f"epochs must be > 0 or null (no limit), got {self.epochs!r}")
        if not float(self.learning_rate) > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if float(self.weight_decay) < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {self.warmup_steps!r}")
        if not 0.0 <= float(self.min_learning_rate_ratio) <= 1.0:
            raise ValueError(f"min_learning_rate_ratio must lie in [0, 1], got {self.min_learning_rate_ratio!r}")
        if self.grad_clip_norm is not None and float(self.grad_clip_norm) < 0:
            raise ValueError(f"grad_clip_norm must be >= 0 or null, got {self.grad_clip_norm!r}")
        patience = self.early_stopping_patience
        if patience is not None and (not isinstance(patience, int) or isinstance(patience, bool) or patience < 1):
            raise ValueError(f"early_stopping_patience must be a positive integer or null (no early stopping), "
                             f"got {patience!r}")  # fmt: skip
        shift = self.augment_shift_pixels
        if not isinstance(shift, int) or isinstance(shift, bool) or shift < 0:
            raise ValueError(f"augment_shift_pixels must be an integer >= 0, got {shift!r}")
        if not isinstance(self.num_threads, int) or self.num_threads < 0:
            raise ValueError(f"num_threads must be an integer >= 0 (0: all CPUs), got {self.num_threads!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SFTConfig:
        """Build from a plain mapping; an unknown key is a ValueError that lists the known ones."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown sft keys {unknown}; known keys: {', '.join(known)}")
        return cls(**dict(data))
