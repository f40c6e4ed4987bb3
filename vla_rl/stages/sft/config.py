"""The knobs of behaviour-cloning pre-training (:func:`vla_rl.stages.sft.training.run_sft`): the ``sft`` config section."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contract.config_reader import check_types, read_dataclass, require
from vla_rl.config import EnvConfig

#: Keys of the ``sft`` config section that are not :class:`SFTConfig` fields: the demonstrations and the output.
SECTION_PATH_KEYS = ("dataset", "output")


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
    num_threads: torch CPU threads (0: every CPU this process may use); one is fastest on 2 shared cores
        (docs/platform.md).
    device: "auto" (the ``VLA_RL_DEVICE`` variable, else CUDA if available, else CPU), "cpu", "cuda:N".
    show_progress: draw a tqdm progress bar with the current loss.
    target_loss_weight: weight of the target loss (0: none): each step also regresses the task target's
        position from the observation embedding of ``batch_size`` target frames (``target_frames.hdf5`` beside
        the demos, ``collect.target_frames_per_task``; :mod:`vla_rl.stages.sft.target_frames`), so that the
        encoder learns to see the target from many resets, not only from the demonstrations' few.
    checkpoint_every: steps between resumable checkpoints (``<output>/checkpoint/``,
        :mod:`vla_rl.stages.sft.checkpoint`; 0: none).
    resume: continue from the checkpoint in the output folder, as the uninterrupted run would (no checkpoint:
        train from the start); `vla-rl train` resumes its SFT stage with ``trainer.resume=true``.
    """

    batch_size: int = 64
    max_steps: int = 1000
    epochs: float | None = None
    learning_rate: float = 3e-4
    weight_decay: float = 0.01
    warmup_steps: int = 50
    min_learning_rate_ratio: float = 0.1
    grad_clip_norm: float | None = 1.0
    valid_every: int = 100
    early_stopping_patience: int | None = None
    augment: bool = True
    augment_shift_pixels: int = 4
    log_every: int = 10
    num_threads: int = 1
    device: str = "auto"
    show_progress: bool = True
    target_loss_weight: float = 0.0
    checkpoint_every: int = 500
    resume: bool = False

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("batch_size", "max_steps", "valid_every", "log_every", "early_stopping_patience"):
            require(self, name, low=1)
        for name in ("epochs", "learning_rate"):
            require(self, name, low=0, low_open=True)
        for name in ("weight_decay", "warmup_steps", "grad_clip_norm", "augment_shift_pixels", "num_threads",
                     "target_loss_weight", "checkpoint_every"):  # fmt: skip
            require(self, name, low=0)
        require(self, "min_learning_rate_ratio", low=0, high=1)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SFTConfig:
        """Read from a plain mapping (:func:`contract.config_reader.read_dataclass`); errors name the key ``sft.*``."""
        return read_dataclass(cls, dict(data), "sft")


def read_sft_section(section: Mapping[str, Any]) -> SFTConfig:
    """The knobs of the ``sft`` config section (all its keys but :data:`SECTION_PATH_KEYS`)."""
    return SFTConfig.from_dict({key: section[key] for key in section if key not in SECTION_PATH_KEYS})


@dataclass(frozen=True)
class SFTPlan:
    """What the SFT stage reads of the config (:meth:`vla_rl.stages.run_plan.RunPlan.sft_plan`).

    - ``policy``: the ``policy`` section (``PolicyConfig`` fields of its factory, and ``factory``).
    - ``env``: the env whose spec the policy is built for.
    - ``dataset``: the demonstrations (``sft.dataset``); ``output``: the folder that ``vla-rl sft`` and the sft
      stage run it into (``sft.output``); ``sft``: the knobs; ``seed``: the run's seed.
    """

    policy: dict[str, Any]
    env: EnvConfig
    dataset: str
    output: str
    sft: SFTConfig
    seed: int
