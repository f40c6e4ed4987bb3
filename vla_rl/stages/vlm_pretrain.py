"""Pretrain a tiny Idefics3 captioner on captioned frames: a backbone for the VLM policy that has seen the scene.

The model is the architecture of :mod:`policies.backbones.tiny` (an ``Idefics3ForConditionalGeneration``:
SigLIP-style vision tower, pixel-shuffle connector, Llama-style language model and LM head), its word-level
tokenizer extended by the words of the data. One training sequence is exactly the policy's input followed by
the caption::

    [image token] x (tokens per image x cameras) + tokens(instruction) + tokens(caption)

with the cameras normalised as the policy normalises them (:func:`policies.backbones.hf_vlm.camera_pixels`),
and the loss is next-token cross-entropy on the caption's tokens only (the first one predicted from the
instruction's last token). What a caption says is the data's business: :mod:`envs.builtin.captions` writes
where the instruction's object and the gripper are.

The caption's position words are predicted at the caption's own positions, which the policy never feeds the
model; the policy reads the mean of the last hidden states over the image and instruction tokens. So a second
loss (``readout_weight``) asks exactly that mean to tell the caption: one linear head per slot (the words the
image must tell: object x, drawer, gripper z, ...) classifies the slot's word from it. The heads are discarded
after pretraining; the folder holds only the model. (In a causal model the hidden states of the image and
instruction tokens do not depend on the caption after them, so that mean is the policy's pooled feature.)

:func:`caption_accuracy` scores each slot of the captions (a word the image must tell) by teacher-forced argmax
over the whole vocabulary, beside two chances: uniform over the words that slot takes, and always the slot's
most frequent training word.

:func:`save_captioner` writes a Hugging Face folder (weights, tokenizer, ``preprocessor_config.json``) that
``policy=vlm policy.backbone.source=DIR`` loads through ``AutoModel.from_pretrained`` (without the LM head).
Everything is seeded: the same data, config and thread count give the same weights.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from policies.backbones.architectures import architecture_for
from policies.backbones.hf_vlm import camera_pixels, quiet_transformers
from policies.backbones.tiny import IMAGE_TOKEN_ID, make_tokenizer, tiny_config, vocabulary
from vla_rl.algos.lr_schedules import warmup_cosine_factor

IMAGE_MEAN = (0.5, 0.5, 0.5)
IMAGE_STD = (0.5, 0.5, 0.5)


class Captioned(Protocol):
    """What the captioner trains on (:class:`envs.builtin.captions.CaptionedFrames` is one): ``images``
    {camera: uint8 (N, H, W, 3)}, ``instructions`` [N], ``captions`` [N] (lists of words), ``slots`` [N] (per
    caption word a slot name, or None for words the instruction or the format gives away)."""

    images: dict[str, np.ndarray]
    instructions: list[str]
    captions: list[list[str]]
    slots: list[list[str | None]]


@dataclass
class PretrainConfig:
    """How the captioner is built and trained.

    Attributes:
        steps: optimiser steps (0 writes the initial, random model).
        batch_size: frames per step (sampled with replacement by a seeded generator).
        lr: peak AdamW learning rate, after ``warmup_steps`` of linear warm-up, cosine-decayed to a tenth.
        weight_decay: AdamW weight decay.
        warmup_steps: linear warm-up steps.
        seed: the weights' initialisation and the batches.
        hidden_size: width of both towers.
        num_layers: transformer blocks of each tower.
        image_size: the vision tower's side (the policy resizes its cameras to it).
        patch_size: vision patch side; ``(image_size / patch_size / 2) ** 2`` tokens per camera after the
            pixel shuffle.
        cameras: the camera names, in the policy's order.
        readout_weight: weight of the slot readout's cross-entropy on the pooled policy input (0: captions only).
    """

    steps: int = 2000
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 0.01
    warmup_steps: int = 100
    seed: int = 0
    hidden_size: int = 64
    num_layers: int = 2
    image_size: int = 64
    patch_size: int = 8
    cameras: tuple[str, ...] = ("front", "wrist")
    readout_weight: float = 1.0

    def __post_init__(self) -> None:
        for name in ("batch_size", "hidden_size", "num_layers", "image_size", "patch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"pretrain {name}={value!r} must be a positive integer")
        if self.steps < 0 or self.warmup_steps < 0:
            raise ValueError(f"pretrain steps={self.steps}, warmup_steps={self.warmup_steps} must be >= 0")
        if self.lr <= 0 or self.readout_weight < 0:
            raise ValueError(f"pretrain lr={self.lr} must be positive and readout_weight={self.readout_weight} >= 0")
        if self.image_size % (2 * self.patch_size):
            raise ValueError(f"pretrain image_size={self.image_size} must be a multiple of 2 * patch_size "
                             f"({2 * self.patch_size}): the connector merges 2x2 patches")  # fmt: skip
        self.cameras = tuple(self.cameras)


def build_captioner(config: PretrainConfig, words: Sequence[str]) -> tuple[nn.Module, Any]:
    """``(model, tokenizer)``: a random tiny ``Idefics3ForConditionalGeneration`` (seeded) whose word-level
    vocabulary is the base one followed by ``words`` (base ids unchanged)."""
    from transformers import AutoModelForImageTextToText

    tokenizer = make_tokenizer(words)
    model_config = tiny_config("idefics3", config.image_size, config.hidden_size, config.num_layers,
                               patch_size=config.patch_size, vocab_size=len(vocabulary(words)))  # fmt: skip
    torch.manual_seed(config.seed)
    model = AutoModelForImageTextToText.from_config(model_config)
    return model, tokenizer


def _word_ids(tokenizer: Any, texts: Sequence[str] | Sequence[Sequence[str]], what: str) -> list[list[int]]:
    """Token ids of each text (a string or a list of words); an unknown word is an error that names it."""
    unknown_id = tokenizer.unk_token_id
    result = []
    for text in texts:
        string = text if isinstance(text, str) else " ".join(text)
        ids = tokenizer(string, add_special_tokens=False)["input_ids"]
        if unknown_id in ids:
            words = [w for w in string.lower().split() if tokenizer.convert_tokens_to_ids(w) == unknown_id]
            raise ValueError(f"{what} {string!r}: word(s) {words} are not in the vocabulary; pass them in "
                             f"the words of build_captioner")  # fmt: skip
        result.append(ids)
    return result


class CaptionBatches:
    """The frames as tensors, tokenised once; :meth:`batch` assembles the model inputs of some frames."""

    def __init__(
        self, frames: Captioned, tokenizer: Any, model: nn.Module, cameras: Sequence[str],
        slot_words: dict[str, list[str]] | None = None,
    ) -> None:  # fmt: skip
        self.architecture = architecture_for(model.model)
        missing = [camera for camera in cameras if camera not in frames.images]
        if missing:
            raise ValueError(f"camera(s) {missing} not in the frames' images {sorted(frames.images)}")
        self.cameras = list(cameras)
        self.images = {camera: torch.from_numpy(np.ascontiguousarray(frames.images[camera])) for camera in cameras}
        self.instruction_ids = _word_ids(tokenizer, frames.instructions, "instruction")
        self.caption_ids = _word_ids(tokenizer, frames.captions, "caption")
        self.slots = [list(slots) for slots in frames.slots]
        self.captions = [list(words) for words in frames.captions]
        for words, slots, ids in zip(self.captions, self.slots, self.caption_ids, strict=True):
            if not len(words) == len(slots) == len(ids):
                raise ValueError(f"caption {words}: {len(slots)} slots and {len(ids)} tokens for {len(words)} words")
        self.image_tokens = self.architecture.tokens_per_image * len(self.cameras)
        self.slot_words = slot_words if slot_words is not None else words_by_slot(frames)
        self.slot_targets = {slot: torch.full((len(self),), -100, dtype=torch.long) for slot in self.slot_words}
        for i, (words, slots) in enumerate(zip(self.captions, self.slots, strict=True)):
            for word, slot in zip(words, slots, strict=True):
                if slot in self.slot_words and word in self.slot_words[slot]:
                    self.slot_targets[slot][i] = self.slot_words[slot].index(word)
        self.mean = torch.tensor(IMAGE_MEAN).view(1, 1, 3, 1, 1)
        self.std = torch.tensor(IMAGE_STD).view(1, 1, 3, 1, 1)

    def __len__(self) -> int:
        return len(self.caption_ids)

    def batch(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        """``pixel_values (B, C, 3, S, S)``, ``input_ids``/``attention_mask (B, T)`` (right-padded),
        ``targets (B, T)``: the token to predict from each position (-100 where nothing is), ``policy_mask (B, T)``:
        1 on the tokens the policy feeds (image and instruction), and ``slot:<name> (B,)``: the index of each
        slot's word in ``slot_words`` (-100 where the caption has no such slot)."""
        index = torch.as_tensor(list(indices), dtype=torch.long)
        images = {camera: stack[index] for camera, stack in self.images.items()}
        pixels = camera_pixels(images, self.cameras, self.architecture.image_size, self.mean, self.std)
        rows = [[IMAGE_TOKEN_ID] * self.image_tokens + self.instruction_ids[i] + self.caption_ids[i] for i in indices]
        length = max(len(row) for row in rows)
        input_ids = torch.zeros(len(rows), length, dtype=torch.long)
        mask = torch.zeros(len(rows), length, dtype=torch.long)
        targets = torch.full((len(rows), length), -100, dtype=torch.long)
        policy_mask = torch.zeros(len(rows), length, dtype=torch.long)
        for row, (i, ids) in enumerate(zip(indices, rows, strict=True)):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            mask[row, : len(ids)] = 1
            start = self.image_tokens + len(self.instruction_ids[i])  # the first caption token
            targets[row, start - 1 : len(ids) - 1] = torch.tensor(self.caption_ids[i])
            policy_mask[row, :start] = 1
        slots = {f"slot:{slot}": targets_[index] for slot, targets_ in self.slot_targets.items()}
        return {"pixel_values": pixels, "input_ids": input_ids, "attention_mask": mask, "targets": targets,
                "policy_mask": policy_mask, **slots}  # fmt: skip


def words_by_slot(frames: Captioned) -> dict[str, list[str]]:
    """Each slot's words (sorted), as the frames' captions use them."""
    seen: dict[str, set[str]] = defaultdict(set)
    for words, slots in zip(frames.captions, frames.slots, strict=True):
        for word, slot in zip(words, slots, strict=True):
            if slot is not None:
                seen[slot].add(word)
    return {slot: sorted(seen[slot]) for slot in sorted(seen)}


class SlotReadout(nn.Module):
    """One linear head per caption slot on the pooled policy-input hidden states ``(B, E)``: the auxiliary
    objective (see the module docstring). Not saved with the model."""

    def __init__(self, hidden_size: int, slot_words: dict[str, list[str]]) -> None:
        super().__init__()
        self.heads = nn.ModuleDict({slot: nn.Linear(hidden_size, len(words)) for slot, words in slot_words.items()})

    def loss(self, pooled: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean over slots of the cross-entropy of the frames that have the slot."""
        losses = []
        for slot, head in self.heads.items():
            target = batch[f"slot:{slot}"]
            if (target != -100).any():
                losses.append(F.cross_entropy(head(pooled), target, ignore_index=-100))
        return torch.stack(losses).mean() if losses else pooled.sum() * 0.0


def last_hidden_states(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The base model's last hidden states ``(B, T, E)`` (``model.model``: what the policy loads)."""
    output = model.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         pixel_values=batch["pixel_values"], use_cache=False)  # fmt: skip
    return output.last_hidden_state


def pooled_policy_input(hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean of ``hidden`` ``(B, T, E)`` over the policy's tokens -> ``(B, E)`` (the policy's mean pooling)."""
    weights = batch["policy_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1)


def caption_logits(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Next-token logits ``(B, T, V)``."""
    return model.lm_head(last_hidden_states(model, batch)).float()


def pretraining_loss(
    model: nn.Module, readout: SlotReadout | None, batch: dict[str, torch.Tensor], readout_weight: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(total, caption cross-entropy, slot readout cross-entropy)``."""
    hidden = last_hidden_states(model, batch)
    logits = model.lm_head(hidden).float()
    caption = F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten(), ignore_index=-100)
    if readout is None or readout_weight == 0:
        return caption, caption, torch.zeros(())
    slots = readout.loss(pooled_policy_input(hidden.float(), batch), batch)
    return caption + readout_weight * slots, caption, slots


def pretrain_captioner(
    frames: Captioned, config: PretrainConfig, words: Sequence[str], log_every: int = 100, log=print
) -> tuple[nn.Module, Any, list[dict[str, float]]]:
    """Train :func:`build_captioner`'s model (and the discarded slot readout) on ``frames``; returns ``(model,
    tokenizer, history)``, ``history`` holding the mean caption and readout losses of every ``log_every`` steps
    (and of the first step)."""
    model, tokenizer = build_captioner(config, words)
    data = CaptionBatches(frames, tokenizer, model, config.cameras)
    readout = SlotReadout(int(model.config.text_config.hidden_size), data.slot_words)
    parameters = [*model.parameters(), *readout.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, weight_decay=config.weight_decay)
    decay_steps = max(1, config.steps - config.warmup_steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: warmup_cosine_factor(step, config.warmup_steps, decay_steps, 0.1)
    )
    generator = torch.Generator().manual_seed(config.seed)
    history: list[dict[str, float]] = []
    losses: list[tuple[float, float]] = []
    start = time.perf_counter()
    model.train()
    for step in range(config.steps):
        indices = torch.randint(len(data), (config.batch_size,), generator=generator).tolist()
        loss, caption, slots = pretraining_loss(model, readout, data.batch(indices), config.readout_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        schedule.step()
        losses.append((caption.item(), slots.item()))
        if step == 0 or (step + 1) % log_every == 0 or step + 1 == config.steps:
            means = np.mean(losses, axis=0)
            entry = {"step": step + 1, "caption_loss": round(float(means[0]), 5),
                     "readout_loss": round(float(means[1]), 5), "seconds": round(time.perf_counter() - start, 1)}  # fmt: skip
            history.append(entry)
            losses = []
            if log is not None:
                log(f"step {entry['step']}/{config.steps} caption loss {entry['caption_loss']:.4f} readout loss "
                    f"{entry['readout_loss']:.4f} ({entry['seconds']} s)")
    model.eval()
    return model, tokenizer, history


@torch.no_grad()
def caption_accuracy(
    model: nn.Module, tokenizer: Any, frames: Captioned, train_frames: Captioned, cameras: Sequence[str],
    batch_size: int = 128,
) -> dict[str, Any]:  # fmt: skip
    """Per slot of ``frames``' captions: the teacher-forced argmax accuracy (over the whole vocabulary), the
    uniform chance over the words that slot takes in ``train_frames`` and the accuracy of always answering the
    slot's most frequent training word; ``all`` pools the slots. Also the held-out caption loss."""
    data = CaptionBatches(frames, tokenizer, model, cameras)
    seen: dict[str, Counter] = defaultdict(Counter)
    for words, slots in zip(train_frames.captions, train_frames.slots, strict=True):
        for word, slot in zip(words, slots, strict=True):
            if slot is not None:
                seen[slot][word] += 1
    hits: dict[str, list[bool]] = defaultdict(list)
    majority_hits: dict[str, list[bool]] = defaultdict(list)
    uniform: dict[str, list[float]] = defaultdict(list)
    losses, counts = [], []
    was_training = model.training
    model.eval()
    for begin in range(0, len(data), batch_size):
        indices = list(range(begin, min(begin + batch_size, len(data))))
        batch = data.batch(indices)
        logits = caption_logits(model, batch)
        valid = batch["targets"] != -100
        losses.append(float(F.cross_entropy(logits[valid], batch["targets"][valid], reduction="sum")))
        counts.append(int(valid.sum()))
        predicted = logits.argmax(-1)
        for row, i in enumerate(indices):
            positions = valid[row].nonzero().flatten().tolist()
            for position, word, slot in zip(positions, data.captions[i], data.slots[i], strict=True):
                if slot is None:
                    continue
                hits[slot].append(int(predicted[row, position]) == int(batch["targets"][row, position]))
                common = seen[slot].most_common(1)[0][0] if seen[slot] else None
                majority_hits[slot].append(word == common)
                uniform[slot].append(1.0 / max(1, len(seen[slot])))
    model.train(was_training)
    result: dict[str, Any] = {"held_out_caption_loss": round(sum(losses) / max(1, sum(counts)), 5), "slots": {}}
    for slot in sorted(hits):
        result["slots"][slot] = {"n": len(hits[slot]), "accuracy": round(float(np.mean(hits[slot])), 4),
                                 "chance_uniform": round(float(np.mean(uniform[slot])), 4),
                                 "chance_majority": round(float(np.mean(majority_hits[slot])), 4)}  # fmt: skip
    pooled = [hit for slot in hits for hit in hits[slot]]
    result["all"] = {"n": len(pooled), "accuracy": round(float(np.mean(pooled)), 4) if pooled else math.nan,
                     "chance_uniform": round(float(np.mean([u for s in uniform for u in uniform[s]])), 4),
                     "chance_majority": round(float(np.mean([h for s in majority_hits for h in majority_hits[s]])), 4)}  # fmt: skip
    return result


def save_captioner(folder: str | Path, model: nn.Module, tokenizer: Any, record: dict[str, Any] | None = None) -> Path:
    """A Hugging Face folder: weights (safetensors), tokenizer, ``preprocessor_config.json`` (the image mean and
    std of the policy's normalisation) and, with ``record``, ``pretraining.json``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(
        json.dumps({"image_mean": list(IMAGE_MEAN), "image_std": list(IMAGE_STD)}) + "\n"
    )
    if record is not None:
        (folder / "pretraining.json").write_text(json.dumps(record, indent=2) + "\n")
    return folder


def config_record(config: PretrainConfig) -> dict[str, Any]:
    return {**asdict(config), "cameras": list(config.cameras)}
