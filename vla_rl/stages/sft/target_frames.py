"""Target frames: observations at seeded resets, each with the position of its task's target.

Few demonstrations show few targets. Ten reach demonstrations are ten goals, and an encoder trained on them
learns where a goal is only as far as ten examples go (docs/results.md: MetaWorld MT10's reach, 5 of 50
from images, 50 of 50 with the goal in the state). A reset needs no expert, so many resets can teach the
encoder to read the target from its images: :func:`collect_target_frames` records the first observation of
``frames_per_task`` seeded resets per task together with the target there, which the env factory's
``target`` reader gives (``factory.target = "pkg.module:function"``, ``function(env, reset_info) -> (D,)``,
privileged simulator state). SFT regresses the target from the policy's observation embedding beside the
behaviour-cloning loss (:class:`TargetRegression`, ``sft.target_loss_weight``). The target is used in
training only: the policy still acts from its observations.

``target_frames.hdf5`` (beside ``demos.hdf5``): ``images/<camera>`` uint8 ``(N, H, W, 3)``, ``state``
float32 ``(N, S)``, ``target`` float32 ``(N, D)``, ``instruction`` and ``task`` strings ``(N,)``,
``seed`` int64 ``(N,)``; attribute ``settings``: JSON of the env id, env kwargs, frames per task and seed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from contract.import_path import import_object
from envs.registry import make, resolve
from vla_rl.stages.sft.batches import ShuffledBatches, ShuffledIndices

TARGET_FRAMES_FILE = "target_frames.hdf5"


def target_reader(env_id: str) -> Callable[[Any, dict], np.ndarray]:
    """The ``target`` reader of ``env_id``'s factory.

    Raises:
        ValueError: the factory has none, with what to add.
    """
    entry, _ = resolve(env_id)
    reader = getattr(entry.load_factory(), "target", None)
    if reader is None:
        raise ValueError(
            f"env {env_id!r} has no target reader, which collect.target_frames_per_task needs: give its factory "
            "a `target` attribute, 'pkg.module:function' with function(env, reset_info) -> the target's position"
        )
    return import_object(reader, "target reader") if isinstance(reader, str) else reader


def frame_seed(base_seed: int, task: str, index: int) -> int:
    """The reset seed of target frame ``index`` of ``task`` (hashed apart from demonstration and evaluation seeds)."""
    digest = hashlib.sha256(f"target-frames/{base_seed}/{task}/{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def _settings(env_id: str, env_kwargs: dict[str, Any], frames_per_task: int, seed: int) -> dict[str, Any]:
    return json.loads(json.dumps({"env_id": env_id, "env_kwargs": env_kwargs,
                                  "frames_per_task": frames_per_task, "seed": seed}))  # fmt: skip


def _recorded_settings(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    with h5py.File(path, "r") as file:
        return json.loads(file.attrs.get("settings", "null"))


def collect_target_frames(
    env_id: str,
    tasks: Sequence[str],
    env_kwargs: dict[str, Any],
    output: str | Path,
    frames_per_task: int,
    seed: int = 0,
    show_progress: bool = True,
    reader: Callable[[Any, dict], np.ndarray] | None = None,
) -> Path:
    """Write ``output/target_frames.hdf5`` (see the module docstring) and return its path.

    ``reader(env, reset_info) -> (D,)`` gives the target (default: the env factory's, :func:`target_reader`).

    A file with the same settings (env, env kwargs, frames per task, seed) is kept; otherwise the frames are
    recorded anew (they are a deterministic function of the settings) and written through a temporary name.
    """
    path = Path(output) / TARGET_FRAMES_FILE
    settings = _settings(env_id, env_kwargs, frames_per_task, seed)
    if _recorded_settings(path) == settings:
        return path
    reader = reader or target_reader(env_id)
    columns: dict[str, list] = {"state": [], "target": [], "instruction": [], "task": [], "seed": []}
    images: dict[str, list[np.ndarray]] = {}
    progress = tqdm(total=frames_per_task * len(tasks), desc="target frames", unit="frame", disable=not show_progress)
    for task in tasks:
        env = make(f"{env_id}/{task}", **env_kwargs)
        try:
            for index in range(frames_per_task):
                reset_seed = frame_seed(seed, task, index)
                observation, info = env.reset(seed=reset_seed)
                for camera, image in observation["images"].items():
                    images.setdefault(camera, []).append(np.asarray(image, dtype=np.uint8))
                columns["state"].append(np.asarray(observation["state"], dtype=np.float32))
                columns["target"].append(np.asarray(reader(env, info), dtype=np.float32))
                columns["instruction"].append(str(observation["instruction"]))
                columns["task"].append(task)
                columns["seed"].append(reset_seed)
                progress.update(1)
        finally:
            env.close()
    progress.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with h5py.File(temporary, "w") as file:
        for camera, frames in images.items():
            file.create_dataset(f"images/{camera}", data=np.stack(frames), compression="gzip", compression_opts=1)
        file.create_dataset("state", data=np.stack(columns["state"]))
        file.create_dataset("target", data=np.stack(columns["target"]))
        file.create_dataset("seed", data=np.asarray(columns["seed"], dtype=np.int64))
        for key in ("instruction", "task"):
            file.create_dataset(key, data=np.asarray(columns[key], dtype=object), dtype=h5py.string_dtype())
        file.attrs["settings"] = json.dumps(settings)
    os.replace(temporary, path)
    return path


def load_target_frames(path: str | Path) -> dict[str, Any]:
    """``{"images": {camera: uint8 (N, H, W, 3)}, "state", "target", "instruction", "task", "seed"}`` of a file
    :func:`collect_target_frames` wrote."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"target frames {path} do not exist; collect them with collect.target_frames_per_task=N (N > 0) "
            "in the same data folder, or set sft.target_loss_weight=0"
        )
    with h5py.File(path, "r") as file:
        return {
            "images": {camera: file["images"][camera][()] for camera in file["images"]},
            "state": file["state"][()],
            "target": file["target"][()],
            "instruction": list(file["instruction"].asstr()[()]),
            "task": list(file["task"].asstr()[()]),
            "seed": file["seed"][()],
        }


def frame_batch(frames: dict[str, Any], indices: Sequence[int], cameras: Sequence[str]) -> dict[str, Any]:
    """Frames ``indices`` as the policy's observation batch (``{"images", "state", "instruction"}``) and ``target``."""
    rows = np.asarray(indices)
    return {
        "images": {camera: torch.from_numpy(frames["images"][camera][rows]) for camera in cameras},
        "state": torch.from_numpy(frames["state"][rows]),
        "instruction": [frames["instruction"][i] for i in rows],
        "target": torch.from_numpy(frames["target"][rows]),
    }


def shuffled_frame_batches(
    frames: dict[str, Any], indices: Sequence[int], batch_size: int, cameras: Sequence[str], generator: torch.Generator
) -> ShuffledBatches:
    """Endless batches of ``batch_size`` frames (fewer when ``indices`` is smaller), each epoch a new permutation."""
    indices = list(indices)
    return ShuffledBatches(ShuffledIndices(len(indices), batch_size, generator),
                           lambda order: frame_batch(frames, [indices[i] for i in order], cameras))  # fmt: skip


class TargetRegression(nn.Module):
    """Predicts the target's position from the observation embedding: a two-layer MLP on standardised targets.

    ``embedding`` ``(B, E)`` -> ``(B, D)``. ``mean`` and ``std`` ``(D,)`` standardise the targets (from the
    training frames), so that the loss weighs every axis alike and its weight does not depend on units.
    """

    def __init__(self, embedding_dim: int, mean: np.ndarray, std: np.ndarray, hidden_dim: int = 256):
        super().__init__()
        target_dim = len(mean)
        self.net = nn.Sequential(nn.Linear(embedding_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, target_dim))
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(np.maximum(std, 1e-6), dtype=torch.float32))

    def forward(self, embedding: torch.Tensor) -> torch.Tensor:
        """The predicted target, in the target's units ``(B, D)``."""
        return self.net(embedding) * self.std + self.mean

    def loss(self, embedding: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean squared error of the standardised prediction (a scalar)."""
        return ((self.net(embedding) - (target - self.mean) / self.std) ** 2).mean()

    def distance(self, embedding: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Euclidean distance between prediction and target ``(B,)``, in the target's units."""
        return torch.linalg.vector_norm(self(embedding) - target, dim=-1)


class TargetLoss:
    """The target loss of an SFT run: its frames (a tenth held out, drawn with the run's seed), batches and head.

    ``loss(policy)`` is the regression loss on the next training batch; ``held_out_distance(policy)`` the mean
    distance (target units) between prediction and target on the held-out frames, and ``distance_of_mean``
    that of predicting the training frames' mean target (what a prediction must beat to have read anything).
    """

    def __init__(self, path: str | Path, policy: Any, cameras: Sequence[str], batch_size: int, seed: int):
        if not hasattr(policy, "embed"):
            raise ValueError(
                f"sft.target_loss_weight needs a policy with an observation embedding (embed); "
                f"{type(policy).__name__} has none: set sft.target_loss_weight=0"
            )
        frames = load_target_frames(path)
        missing = [camera for camera in cameras if camera not in frames["images"]]
        if missing:
            raise ValueError(
                f"target frames {path} have cameras {sorted(frames['images'])} but the policy needs {list(cameras)} "
                f"(missing: {missing}); collect them again with the policy's env settings"
            )
        generator = torch.Generator().manual_seed(seed)
        order = torch.randperm(len(frames["target"]), generator=generator).tolist()
        held_out = max(1, len(order) // 10) if len(order) > 1 else 0
        self.valid_indices, self.train_indices = order[:held_out], order[held_out:]
        train_targets = frames["target"][self.train_indices]
        self.frames, self.cameras, self.batch_size = frames, list(cameras), batch_size
        self.batches = shuffled_frame_batches(frames, self.train_indices, batch_size, cameras, generator)
        with torch.no_grad():
            embedding_dim = policy.embed(frame_batch(frames, self.train_indices[:1], cameras)).shape[-1]
        self.head = TargetRegression(embedding_dim, train_targets.mean(0), train_targets.std(0)).to(policy.device)
        held_out_targets = frames["target"][self.valid_indices]
        self.distance_of_mean = (
            float(np.linalg.norm(held_out_targets - train_targets.mean(0), axis=1).mean()) if self.valid_indices else None
        )

    def state_dict(self) -> dict[str, Any]:
        """The head's weights and where the batches stand (what a resumed SFT run restores)."""
        return {"head": self.head.state_dict(), "batches": self.batches.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.head.load_state_dict(state["head"])
        self.batches.load_state_dict(state["batches"])

    def loss(self, policy: Any) -> torch.Tensor:
        batch = next(self.batches)
        return self.head.loss(policy.embed(batch), batch["target"].to(policy.device))

    @torch.no_grad()
    def held_out_distance(self, policy: Any) -> float | None:
        if not self.valid_indices:
            return None
        was_training = policy.training
        policy.eval()
        total = 0.0
        for start in range(0, len(self.valid_indices), self.batch_size):
            batch = frame_batch(self.frames, self.valid_indices[start : start + self.batch_size], self.cameras)
            total += float(self.head.distance(policy.embed(batch), batch["target"].to(policy.device)).sum())
        policy.train(was_training)
        return total / len(self.valid_indices)
