"""The resumable state of an SFT run: ``<output>/checkpoint/state.pt``, written every ``sft.checkpoint_every`` steps.

It holds everything the next step depends on, so that a run resumed from it (``trainer.resume=true`` of
`vla-rl train`, ``sft.resume=true`` of `vla-rl sft`) continues as the uninterrupted run would
(:class:`TrainingState` saves and restores it):

- the policy's weights (and the target head's), AdamW's moments, the learning-rate schedule's position;
- every random generator: torch's global one (the noise of the diffusion and flow losses), the shuffling's
  with where its epoch stands, the augmentation's, the target frames' batches, CUDA's on a GPU;
- the losses and validations so far, the best validation and the length ``sft_metrics.jsonl`` had then;
- the settings that shape training (:func:`fingerprint`): resuming with others is refused.

A checkpoint is written to a temporary name and renamed, so a run killed while writing one keeps the one
before. The finished run deletes it: its policies are ``best/`` and ``last/``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from vla_rl.config import ConfigError, dotted_leaves
from vla_rl.runtime.files import write_atomic
from vla_rl.stages.sft.config import SFTConfig

CHECKPOINT_DIR = "checkpoint"
STATE_FILE = "state.pt"
#: SFTConfig fields that do not change what training computes.
NOT_SHAPING = ("show_progress", "checkpoint_every", "resume")


def checkpoint_path(output_dir: Path) -> Path:
    return Path(output_dir) / CHECKPOINT_DIR / STATE_FILE


def fingerprint(config: SFTConfig, policy_config: Mapping[str, Any], env_id: str, env_kwargs: Mapping[str, Any],
                dataset: Path, seed: int) -> dict[str, Any]:  # fmt: skip
    """The settings a checkpoint must have been written with to resume this run, as plain JSON values."""
    sft = {key: value for key, value in dataclasses.asdict(config).items() if key not in NOT_SHAPING}
    settings = {"sft": sft, "policy": dict(policy_config), "env": {"id": env_id, "kwargs": dict(env_kwargs)},
                "dataset": str(dataset), "seed": seed}  # fmt: skip
    return json.loads(json.dumps(settings, sort_keys=True, default=str))


@dataclasses.dataclass
class TrainingState:
    """What an SFT step changes, and so what a checkpoint saves and a resumed run restores.

    ``targets`` is the :class:`~vla_rl.stages.sft.target_frames.TargetLoss` or None; ``progress`` the loop's
    bookkeeping (step, losses so far, best validation, metrics file length, ...), plain values.
    """

    policy: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler
    batches: Any
    augment_generator: torch.Generator
    targets: Any
    device: torch.device

    def capture(self, settings: dict[str, Any], progress: dict[str, Any]) -> dict[str, Any]:
        """The checkpoint's contents: every piece of state, the run's :func:`fingerprint` and ``progress``."""
        cuda = self.device.type == "cuda"
        return {"fingerprint": settings, "progress": progress, "policy": self.policy.state_dict(),
                "optimizer": self.optimizer.state_dict(), "schedule": self.schedule.state_dict(),
                "batches": self.batches.state_dict(), "augment_generator": self.augment_generator.get_state(),
                "targets": self.targets.state_dict() if self.targets is not None else None,
                "torch_rng": torch.get_rng_state(), "cuda_rng": torch.cuda.get_rng_state_all() if cuda else None}  # fmt: skip

    def restore(self, saved: dict[str, Any]) -> dict[str, Any]:
        """Load what :meth:`capture` saved into the freshly built pieces; returns its ``progress``. Torch's
        generators go last: building the pieces drew from them."""
        self.policy.load_state_dict(saved["policy"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.schedule.load_state_dict(saved["schedule"])
        self.batches.load_state_dict(saved["batches"])
        self.augment_generator.set_state(saved["augment_generator"])
        if self.targets is not None:
            self.targets.load_state_dict(saved["targets"])
        torch.set_rng_state(saved["torch_rng"])
        if self.device.type == "cuda":
            torch.cuda.set_rng_state_all(saved["cuda_rng"])
        return saved["progress"]


def save_checkpoint(output_dir: Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (tensors, numbers, strings, lists and dicts of them) to :func:`checkpoint_path`."""
    return write_atomic(checkpoint_path(output_dir), lambda staging: torch.save(state, staging))


def load_checkpoint(output_dir: Path, expected: dict[str, Any]) -> dict[str, Any] | None:
    """The checkpoint in ``output_dir`` (None when there is none), checked against the run's :func:`fingerprint`.

    Raises:
        ConfigError: it was written with other settings; names the first that differ.
    """
    path = checkpoint_path(output_dir)
    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    written, wanted = dotted_leaves(state["fingerprint"]), dotted_leaves(expected)
    differing = sorted(key for key in written.keys() | wanted.keys() if written.get(key) != wanted.get(key))
    if differing:
        shown = ", ".join(f"{key}={written.get(key)!r} (now {wanted.get(key)!r})" for key in differing[:3])
        raise ConfigError(
            f"SFT checkpoint {path} was written with other settings: {shown}; resume with the settings it was "
            f"written with, or delete {path.parent} to start SFT over"
        )
    return state


def delete_checkpoint(output_dir: Path) -> None:
    shutil.rmtree(Path(output_dir) / CHECKPOINT_DIR, ignore_errors=True)
