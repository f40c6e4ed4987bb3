"""Behaviour-cloning pre-training (SFT) of a VLA policy on collected demonstrations.

:func:`run_sft` is the whole loop, top to bottom:

1. read ``demos.hdf5`` (its ``train`` and ``valid`` splits drawn with the run's seed) and ``stats.json``
   beside it; check that the demos fit the policy's io spec (cameras, image size, state and action dims of the env);
2. build the policy with the dataset statistics (its normaliser; ``save_pretrained`` stores them);
3. AdamW on seeded, shuffled mini-batches of :class:`~vla_rl.stages.sft.demos.ChunkDataset`; the loss is the
   policy's ``bc_loss``, so every action head (gaussian, diffusion, flow) trains the same way;
   linear warmup then cosine decay of the learning rate; gradient-norm clipping; training images
   randomly shifted by a few pixels (``augment``, :func:`vla_rl.stages.sft.batches.augment_batch`);
   with ``target_loss_weight`` > 0, plus that weight times the target loss on a batch of target frames
   (:class:`~vla_rl.stages.sft.target_frames.TargetLoss`: the task target's position regressed from the
   observation embedding);
4. every ``valid_every`` steps (and at the end) the mean loss on the ``valid`` split, with a fixed
   seed for the noise a diffusion or flow loss draws, so that the numbers are comparable; training
   stops early after ``early_stopping_patience`` validations without a new best;
5. every ``checkpoint_every`` steps the whole training state to ``<output>/checkpoint/``
   (:mod:`vla_rl.stages.sft.checkpoint`), which a resumed run (``resume``) continues from exactly;
6. the best-validation policy goes to ``<output>/best``, the final one to ``<output>/last``
   (``save_pretrained`` writes through a temporary name), metrics to ``<output>/sft_metrics.jsonl``;
   where the best validation loss still fell by more than ``UNDERTRAINED_DROP`` over the second half of
   training, a line says the policy is likely undertrained (:func:`second_half_drop`).

``sft_metrics.jsonl`` holds one JSON object per line: ``{"split": "train", "step", "loss", "lr",
"grad_norm", "samples_per_s", "time"}`` (averages over the last ``log_every`` steps; ``loss`` is the
behaviour-cloning loss, ``target_loss`` the target loss where there is one), ``{"split": "valid", "step",
"loss", "best", "time"}`` (plus ``target_distance``, the held-out target frames' mean prediction error in
the target's units), and a final ``{"split": "summary", ...}`` (with ``target_distance`` and
``target_distance_of_mean``, the error of predicting the mean target, to compare it with).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from contract.import_path import import_object
from vla_rl.algos.lr_schedules import warmup_cosine_factor
from vla_rl.runtime.device import resolve_device
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.sft import checkpoint
from vla_rl.stages.sft.batches import (
    DatasetError,
    augment_batch,
    check_episodes_fit_policy,
    dataset_files,
    ordered_batches,
    shuffled_batches,
)
from vla_rl.stages.sft.config import SFTConfig, SFTPlan
from vla_rl.stages.sft.datasets import load_demonstrations, load_statistics
from vla_rl.stages.sft.demos import ChunkDataset
from vla_rl.stages.sft.target_frames import TARGET_FRAMES_FILE, TargetLoss
from vla_rl.workers.policy_factory import DEFAULT_POLICY_FACTORY, PolicySpec

METRICS_FILE = "sft_metrics.jsonl"
#: A best validation loss that fell more than this over the second half of training says "train longer".
UNDERTRAINED_DROP = 0.10
BEST_DIR, LAST_DIR = "best", "last"


@dataclass
class SFTResult:
    """What :func:`run_sft` produced.

    policy_dir: the policy to use next (``best`` when there was a validation split, else ``last``).
    train_losses: the loss of every step, in order (``train_losses[i]`` is step ``i + 1``).
    valid_losses: ``(step, mean validation loss)`` of every validation (empty without a valid split).
    samples_per_second: training throughput, validation and saving excluded.
    """

    policy_dir: Path
    last_dir: Path
    best_dir: Path | None
    metrics_path: Path
    train_losses: list[float]
    valid_losses: list[tuple[int, float]]
    best_valid_loss: float | None
    num_steps: int
    num_train_samples: int
    num_valid_samples: int
    samples_per_second: float
    seconds: float


def total_training_steps(config: SFTConfig, num_samples: int) -> int:
    """``max_steps``, or fewer when ``epochs`` passes of ``num_samples`` take fewer batches."""
    if config.epochs is None:
        return config.max_steps
    batches_per_epoch = max(1, num_samples // config.batch_size)  # full batches only (see shuffled_batches)
    return max(1, min(config.max_steps, math.ceil(float(config.epochs) * batches_per_epoch)))


def second_half_drop(valid_losses: list[tuple[int, float]]) -> float | None:
    """How much the best validation loss fell over the second half of training, as a fraction.

    ``valid_losses``: ``(step, loss)`` in order. Returns ``(b - B) / b``, where ``b`` is the best loss
    of the validations at or before half the last validation's step and ``B`` the best of all; None with
    fewer than two validations or none in the first half. A cosine schedule flattens the last
    validations whatever the model could still learn, so the best loss of each half is compared, not the
    last few.
    """
    if len(valid_losses) < 2:
        return None
    midpoint = valid_losses[-1][0] / 2
    first_half = [loss for step, loss in valid_losses if step <= midpoint]
    if not first_half or min(first_half) <= 0:
        return None
    before = min(first_half)
    return (before - min(loss for _, loss in valid_losses)) / before


@contextlib.contextmanager
def torch_threads(num_threads: int) -> Iterator[int]:
    """Use ``num_threads`` torch threads (0: every CPU this process may use) inside the block."""
    previous = torch.get_num_threads()
    wanted = num_threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        torch.set_num_threads(previous)


def make_optimizer(policy: torch.nn.Module, config: SFTConfig) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices and kernels only (biases, norms and 1-d parameters are not decayed)."""
    trainable = [p for p in policy.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in trainable if p.dim() >= 2], "weight_decay": float(config.weight_decay)},
        {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=float(config.learning_rate))


@torch.no_grad()
def validation_loss(policy: Any, dataset: ChunkDataset, batch_size: int, cameras: list[str], seed: int) -> float:
    """Mean ``bc_loss`` over ``dataset`` (weighted by batch size), with the noise of the loss drawn from ``seed``."""
    was_training = policy.training
    policy.eval()
    total, count = 0.0, 0
    devices = [policy.device] if policy.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        for batch in ordered_batches(dataset, batch_size, cameras):
            size = len(batch["instruction"])
            total += float(policy.bc_loss(batch)) * size
            count += size
    policy.train(was_training)
    return total / count


class MetricsWriter:
    """``sft_metrics.jsonl``: one JSON object per line, flushed at once (a crash keeps what was written).

    ``keep_bytes``: continue a resumed run's file after its first ``keep_bytes`` bytes (what it held at the
    checkpoint); None starts a new file.
    """

    def __init__(self, path: Path, keep_bytes: int | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        if keep_bytes is None:
            self._file = path.open("w", encoding="utf-8")
        else:
            with path.open("r+b") as file:
                file.truncate(keep_bytes)
            self._file = path.open("a", encoding="utf-8")

    def write(self, **record: Any) -> None:
        self._file.write(json.dumps({**record, "time": time.time()}) + "\n")
        self._file.flush()

    @property
    def size(self) -> int:
        """Bytes written so far."""
        return self._file.tell()

    def close(self) -> None:
        self._file.close()


def run(plan: SFTPlan, run_dir: Path, resume: bool = False) -> SFTResult:
    """The SFT stage as ``plan`` says, into ``run_dir`` (``vla-rl sft`` and the experiment's sft stage pass
    ``sft.output``): :func:`run_sft`; ``resume`` (or ``sft.resume``) continues from its checkpoint."""
    config = dataclasses.replace(plan.sft, resume=True) if resume else plan.sft
    return run_sft(plan.policy, plan.env.id, plan.env.kwargs, plan.dataset, run_dir, config, plan.seed)


def run_sft(
    policy_config: Mapping[str, Any],
    env_id: str,
    env_kwargs: Mapping[str, Any],
    dataset: str | Path,
    output_dir: str | Path,
    sft_config: SFTConfig | Mapping[str, Any] | None = None,
    seed: int = 0,
) -> SFTResult:
    """Behaviour-clone a policy on the demos in ``dataset``; see the module docstring.

    Args:
        policy_config: the ``policy`` config section as a dict (``PolicyConfig`` fields, plus an optional
            ``factory`` import path).
        env_id, env_kwargs: the env whose spec (cameras, image size, state and action dims) the policy is
            built for; the demos must match it.
        dataset: the folder ``vla-rl collect`` wrote (or its ``demos.hdf5``), with ``stats.json`` beside it.
        output_dir: receives ``best/``, ``last/``, ``sft_metrics.jsonl`` and, while training, ``checkpoint/``.
        sft_config: an :class:`SFTConfig` or its dict form (default: ``SFTConfig()``).
        seed: seeds the train/valid split, the policy's initialisation, the shuffling and the noise of the losses.

    Raises:
        MissingDatasetError: ``demos.hdf5`` or ``stats.json`` does not exist (run ``vla-rl collect``).
        DatasetError: the demos do not fit the policy (the message names the camera or dimension).
        ConfigError: ``resume`` and the checkpoint was written with other settings (names them).
    """
    config = sft_config if isinstance(sft_config, SFTConfig) else SFTConfig.from_dict(sft_config or {})
    demos_path, stats_path = dataset_files(dataset)
    output_dir = Path(output_dir)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch_threads(config.num_threads))
        # 1. data. The policy's modules are imported before the env renders: importing torchvision (through
        # timm) after MuJoCo rendered through EGL in the same process segfaults on this platform.
        policy_spec = PolicySpec(config={k: v for k, v in policy_config.items() if k != "factory"}, io_spec={},
                                 stats=None, factory=str(policy_config.get("factory") or DEFAULT_POLICY_FACTORY),
                                 seed=seed)  # fmt: skip
        import_object(policy_spec.factory, "policy factory")
        from policies.config import PolicyIOSpec
        from policies.factory import chunk_size_of, save_policy

        io_spec = PolicyIOSpec.from_spec(env_io_spec(env_id, None, dict(env_kwargs)))
        # The split is drawn with this run's seed, not read from the file that the experiment's runs share.
        train_episodes, attrs = load_demonstrations(demos_path, split="train", split_seed=seed)
        valid_episodes, _ = load_demonstrations(demos_path, split="valid", split_seed=seed)
        if not train_episodes:
            raise DatasetError(f"dataset {demos_path} has no demos in its 'train' split; collect more episodes")
        for episodes in (train_episodes, valid_episodes):
            if episodes:
                check_episodes_fit_policy(episodes, io_spec, str(demos_path), env_id)
        stats = load_statistics(stats_path)

        # 2. policy
        device = resolve_device(None if config.device == "auto" else config.device)
        features = {feature: stats[feature] for feature in ("action", "state")}
        policy = dataclasses.replace(policy_spec, io_spec=io_spec.to_dict(), stats=features).build(device)
        policy.train()
        chunk_size = chunk_size_of(policy)
        cameras = list(io_spec.camera_names)
        train_set = ChunkDataset(train_episodes, chunk_size)
        valid_set = ChunkDataset(valid_episodes, chunk_size) if valid_episodes else None
        if valid_set is None:
            print(f"sft: dataset {demos_path} has an empty 'valid' split: no validation loss, and the last "
                  f"policy is the result (collect more episodes or raise collect.valid_fraction to validate)")

        target_weight = float(config.target_loss_weight)
        targets = None
        if target_weight > 0:
            targets = TargetLoss(demos_path.with_name(TARGET_FRAMES_FILE), policy, cameras, config.batch_size, seed)

        # 3. optimisation
        total_steps = total_training_steps(config, len(train_set))
        optimizer = make_optimizer(policy, config)
        trained = list(policy.parameters())
        if targets is not None:  # before the schedule, which takes one factor per parameter group
            optimizer.add_param_group({"params": list(targets.head.parameters()),
                                       "weight_decay": float(config.weight_decay)})  # fmt: skip
            trained += list(targets.head.parameters())
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda step: warmup_cosine_factor(step, config.warmup_steps, max(1, total_steps - config.warmup_steps - 1),
                                              float(config.min_learning_rate_ratio)),
        )  # fmt: skip
        shuffle_generator = torch.Generator().manual_seed(seed)
        batches = shuffled_batches(train_set, config.batch_size, cameras, shuffle_generator)
        augment_generator = torch.Generator().manual_seed(seed + 1)
        clip = float(config.grad_clip_norm) if config.grad_clip_norm else math.inf

        settings = checkpoint.fingerprint(config, policy_config, env_id, env_kwargs, demos_path, seed)
        state = checkpoint.TrainingState(policy, optimizer, schedule, batches, augment_generator, targets, device)
        resumed = checkpoint.load_checkpoint(output_dir, settings) if config.resume else None
        if resumed is None:
            if config.resume:
                print(f"sft: no checkpoint in {checkpoint.checkpoint_path(output_dir)}; training from the start")
            checkpoint.delete_checkpoint(output_dir)  # a new run in an old folder must not resume the old one
            done = {"step": 0, "train_losses": [], "valid_losses": [], "best_valid": math.inf, "best_saved": False,
                    "validations_since_best": 0, "train_seconds": 0.0, "samples_seen": 0,
                    "window": {"loss": 0.0, "target_loss": 0.0, "grad_norm": 0.0, "samples": 0, "seconds": 0.0,
                               "steps": 0}}  # fmt: skip
        else:
            done = state.restore(resumed)
            print(f"sft: resumed from step {done['step']} ({checkpoint.checkpoint_path(output_dir)})")
        metrics = stack.enter_context(contextlib.closing(
            MetricsWriter(output_dir / METRICS_FILE, keep_bytes=None if resumed is None else done["metrics_bytes"])))
        train_losses: list[float] = list(done["train_losses"])
        valid_losses: list[tuple[int, float]] = [(int(step), float(loss)) for step, loss in done["valid_losses"]]
        best_valid, validations_since_best = float(done["best_valid"]), int(done["validations_since_best"])
        best_dir = output_dir / BEST_DIR if done["best_saved"] else None
        train_seconds, samples_seen = float(done["train_seconds"]), int(done["samples_seen"])
        window: dict[str, float] = dict(done["window"])
        progress = tqdm(total=total_steps, initial=int(done["step"]), desc="sft", unit="step",
                        disable=not config.show_progress)  # fmt: skip
        try:
            for step in range(int(done["step"]) + 1, total_steps + 1):
                step_started = time.perf_counter()
                batch = next(batches)
                if config.augment:
                    batch = augment_batch(batch, config.augment_shift_pixels, augment_generator)
                loss = policy.bc_loss(batch)
                target_loss = targets.loss(policy) if targets is not None else torch.zeros(())
                optimizer.zero_grad(set_to_none=True)
                (loss + target_weight * target_loss).backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(trained, clip))
                learning_rate = optimizer.param_groups[0]["lr"]
                optimizer.step()
                schedule.step()
                loss_value = float(loss.detach())
                if not math.isfinite(loss_value):
                    raise FloatingPointError(
                        f"sft loss became {loss_value} at step {step}; lower sft.learning_rate "
                        f"(now {config.learning_rate}) or check the dataset statistics in {stats_path}"
                    )
                seconds = time.perf_counter() - step_started
                size = len(batch["instruction"])
                train_losses.append(loss_value)
                train_seconds += seconds
                samples_seen += size
                for key, value in (("loss", loss_value), ("target_loss", float(target_loss.detach())),
                                   ("grad_norm", grad_norm), ("samples", size), ("seconds", seconds), ("steps", 1)):  # fmt: skip
                    window[key] += value
                if step % config.log_every == 0 or step == total_steps:
                    extra = {"target_loss": window["target_loss"] / window["steps"]} if targets is not None else {}
                    metrics.write(split="train", step=step, loss=window["loss"] / window["steps"], lr=learning_rate,
                                  grad_norm=window["grad_norm"] / window["steps"],
                                  samples_per_s=window["samples"] / max(window["seconds"], 1e-9), **extra)  # fmt: skip
                    window = dict.fromkeys(window, 0.0)

                # 4. validation and the best checkpoint
                if valid_set is not None and (step % config.valid_every == 0 or step == total_steps):
                    valid_loss = validation_loss(policy, valid_set, config.batch_size, cameras, seed)
                    valid_losses.append((step, valid_loss))
                    improved = valid_loss < best_valid
                    validations_since_best = 0 if improved else validations_since_best + 1
                    if improved:
                        best_valid = valid_loss
                        best_dir = save_policy(policy, output_dir / BEST_DIR)
                    extra = {"target_distance": targets.held_out_distance(policy)} if targets is not None else {}
                    metrics.write(split="valid", step=step, loss=valid_loss, best=improved, **extra)
                    progress.set_postfix(loss=f"{loss_value:.4f}", valid=f"{valid_loss:.4f}", refresh=False)
                    patience = config.early_stopping_patience
                    if patience is not None and validations_since_best >= patience and step < total_steps:
                        print(f"sft: early stop at step {step}: no better validation loss in the last {patience} "
                              f"validations (best {best_valid:.4f}); the best policy is in {best_dir}")
                        progress.update(1)
                        break
                else:
                    progress.set_postfix(loss=f"{loss_value:.4f}", refresh=False)
                progress.update(1)

                # 5. the resumable state
                if config.checkpoint_every and step % config.checkpoint_every == 0 and step < total_steps:
                    checkpoint.save_checkpoint(output_dir, state.capture(settings, {
                        "step": step, "train_losses": train_losses, "valid_losses": valid_losses,
                        "best_valid": best_valid, "best_saved": best_dir is not None,
                        "validations_since_best": validations_since_best, "train_seconds": train_seconds,
                        "samples_seen": samples_seen, "window": window, "metrics_bytes": metrics.size}))  # fmt: skip
        except KeyboardInterrupt:
            progress.close()
            saved = save_policy(policy, output_dir / LAST_DIR)
            print(f"sft: interrupted at step {len(train_losses)}; the policy so far is in {saved}")
            raise
        finally:
            progress.close()

        # 6. the last policy and the summary
        last_dir = save_policy(policy, output_dir / LAST_DIR)
        checkpoint.delete_checkpoint(output_dir)
        samples_per_second = samples_seen / max(train_seconds, 1e-9)
        num_steps = len(train_losses)  # total_steps unless stopped early
        summary = {
            "num_steps": num_steps,
            "final_train_loss": train_losses[-1],
            "best_valid_loss": None if best_dir is None else best_valid,
            "samples_per_s": samples_per_second,
            "num_train_samples": len(train_set),
            "num_valid_samples": 0 if valid_set is None else len(valid_set),
            "dataset": str(demos_path),
            "dataset_env_id": str(attrs.get("env_id", "")),
        }
        drop = second_half_drop(valid_losses)
        summary["valid_loss_drop_second_half"] = drop
        if targets is not None:
            summary["target_distance"] = targets.held_out_distance(policy)
            summary["target_distance_of_mean"] = targets.distance_of_mean
        metrics.write(split="summary", step=num_steps, **summary)
        if drop is not None and drop > UNDERTRAINED_DROP:
            print(f"sft: the best validation loss fell {drop:.0%} over the second half of the {num_steps} steps "
                  f"(to {best_valid:.4f}): the policy is likely undertrained; more steps (sft.max_steps) may "
                  "give a better one")
    return SFTResult(
        policy_dir=best_dir if best_dir is not None else last_dir,
        last_dir=last_dir,
        best_dir=best_dir,
        metrics_path=metrics.path,
        train_losses=train_losses,
        valid_losses=valid_losses,
        best_valid_loss=summary["best_valid_loss"],
        num_steps=num_steps,
        num_train_samples=len(train_set),
        num_valid_samples=summary["num_valid_samples"],
        samples_per_second=samples_per_second,
        seconds=time.perf_counter() - started,
    )
