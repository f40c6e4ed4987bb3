"""A Hugging Face vision-language model as the observation encoder of a VLA.

The backbone is loaded with ``AutoModel.from_pretrained(source, local_files_only=True)`` (the base model:
vision tower, projector, language model; a ``...ForConditionalGeneration`` checkpoint loads without its LM head)
and its tokenizer with ``AutoTokenizer``. Each call builds, per sample::

    [image token] x (tokens per image x cameras) + tokenizer(instruction)      (right-padded)

with the cameras resized to the vision tower's resolution (one tile per camera, no image splitting) and
normalised with the checkpoint's ``preprocessor_config.json`` mean and std (0.5 where absent). The last hidden
states ``(B, T, E)`` are mean-pooled over the valid tokens (or the last valid token is taken), projected, and
fused with the state features into the embedding ``(B, D)`` that the action head and the critic read.

Training modes (``backbone.train``): ``frozen`` (only the projection and what follows learn), ``lora``
(``peft`` LoRA adapters on the attention projections of both towers; B starts at zero, so the policy starts
equal to the frozen one) and ``full``. Every weight, the frozen backbone's included, is in ``state_dict()``, so a
``save_pretrained`` folder is self-contained for the weights; it needs ``source`` for the model's config and
tokenizer when loaded. Frozen parameters are left out of FSDP sharding, optimizers and (after the first)
weight syncs (see ``vla_rl.workers.weight_sync``).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from policies.backbones.architectures import architecture_for
from policies.backbones.config import VLMBackboneConfig
from policies.config import StateConfig
from policies.encoders.pretrained_language import resolve_model_path
from policies.encoders.state import StateEncoder


@contextlib.contextmanager
def quiet_transformers():
    """Loading a base model from a ``...ForConditionalGeneration`` checkpoint reports the unused LM head; no bars."""
    from transformers.utils import logging

    previous, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(previous)
        if bars:
            logging.enable_progress_bar()


def load_backbone(config: VLMBackboneConfig) -> tuple[nn.Module, object, Path]:
    """``(base model, tokenizer, folder)`` from ``config.source`` (a local folder; offline)."""
    from transformers import AutoModel, AutoTokenizer

    folder = resolve_model_path(config.source)
    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    return model, tokenizer, folder


def image_normalization(folder: Path) -> tuple[list[float], list[float]]:
    """``(mean, std)`` per channel from the checkpoint's ``preprocessor_config.json`` (0.5, 0.5 without one)."""
    path = folder / "preprocessor_config.json"
    if not path.is_file():
        return [0.5] * 3, [0.5] * 3
    data = json.loads(path.read_text())
    return list(data.get("image_mean", [0.5] * 3)), list(data.get("image_std", [0.5] * 3))


def camera_pixels(
    images: Mapping[str, torch.Tensor], camera_names: Sequence[str], size: int, mean: torch.Tensor, std: torch.Tensor
) -> torch.Tensor:
    """Cameras uint8 ``(B, H, W, 3)`` -> ``(B, C, 3, S, S)``: resized to side ``size`` (bilinear), scaled to [0, 1]
    and normalised with ``mean`` and ``std`` ``(1, 1, 3, 1, 1)``; what every VLM of the policy reads."""
    stacked = torch.stack([images[camera] for camera in camera_names], dim=1)  # (B, C, H, W, 3)
    batch, cameras = stacked.shape[:2]
    flat = stacked.flatten(0, 1).permute(0, 3, 1, 2).float() / 255.0
    if flat.shape[-2:] != (size, size):
        flat = F.interpolate(flat, size=(size, size), mode="bilinear", align_corners=False)
    return (flat.view(batch, cameras, 3, size, size) - mean) / std


def apply_lora(model: nn.Module, config: VLMBackboneConfig) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=0.0, target_modules=list(config.lora_targets)
    )
    with warnings.catch_warnings():  # peft asks transformers a question it has renamed (a FutureWarning, harmless)
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        return get_peft_model(model, lora)


class HFVLMEncoder(nn.Module):
    """``forward(images {camera: uint8 (B, H, W, 3)}, state (B, S) normalised or None, instructions [B])
    -> embedding (B, D)``."""

    def __init__(
        self, config: VLMBackboneConfig, camera_names: Sequence[str], state_dim: int, state: StateConfig,
        embedding_dim: int,
    ) -> None:  # fmt: skip
        super().__init__()
        model, self.tokenizer, folder = load_backbone(config)
        self.config = config
        self.camera_names = list(camera_names)
        self.architecture = architecture_for(model)
        if config.train == "frozen":
            model.requires_grad_(False)
        elif config.train == "lora":
            model.requires_grad_(False)
            model = apply_lora(model, config)
        self.backbone = model
        mean, std = image_normalization(folder)
        self.register_buffer("pixel_mean", torch.tensor(mean).view(1, 1, 3, 1, 1), persistent=False)
        self.register_buffer("pixel_std", torch.tensor(std).view(1, 1, 3, 1, 1), persistent=False)
        hidden = int(model.config.text_config.hidden_size)
        self.state = StateEncoder(state_dim, state.hidden_dims, state.output_dim) if state_dim and state.enabled else None
        state_features = self.state.output_dim if self.state is not None else 0
        self.projection = nn.Sequential(nn.Linear(hidden + state_features, embedding_dim), nn.LayerNorm(embedding_dim))
        self.output_dim = embedding_dim

    def fsdp_blocks(self) -> list[nn.Module]:
        """The transformer blocks of both towers (every ``...layers`` module list), FSDP's units."""
        return [
            block
            for name, module in self.backbone.named_modules()
            if isinstance(module, nn.ModuleList) and name.endswith("layers")
            for block in module
        ]

    def pixels(self, images: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Cameras uint8 ``(B, H, W, 3)`` -> ``(B, C, 3, S, S)`` at the vision tower's side ``S``, normalised."""
        return camera_pixels(images, self.camera_names, self.architecture.image_size, self.pixel_mean, self.pixel_std)

    def tokens(self, instructions: Sequence[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids (B, T), attention_mask (B, T))``: image tokens for every camera, then the instruction."""
        text = self.tokenizer(
            list(instructions), padding=True, truncation=True, max_length=self.config.max_length, return_tensors="pt"
        )
        count = self.architecture.tokens_per_image * len(self.camera_names)
        batch = len(instructions)
        image_ids = torch.full((batch, count), self.architecture.image_token_id, dtype=torch.long)
        input_ids = torch.cat([image_ids, text["input_ids"]], dim=1)
        mask = torch.cat([torch.ones(batch, count, dtype=text["attention_mask"].dtype), text["attention_mask"]], dim=1)
        return input_ids.to(device), mask.to(device)

    def hidden_states(self, images: Mapping[str, torch.Tensor], instructions: Sequence[str]) -> torch.Tensor:
        """Pooled last hidden states ``(B, E)``."""
        pixels = self.pixels(images)
        input_ids, mask = self.tokens(instructions, pixels.device)
        pixels = pixels.to(next(self.backbone.parameters()).dtype)
        output = self.backbone(
            input_ids=input_ids, attention_mask=mask, use_cache=False, **self.architecture.image_inputs(pixels, input_ids)
        )
        hidden = output.last_hidden_state.float()
        if self.config.pooling == "last":
            last = mask.sum(1) - 1
            return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(1) / weights.sum(1)

    def forward(
        self, images: Mapping[str, torch.Tensor], state: torch.Tensor | None, instructions: Sequence[str]
    ) -> torch.Tensor:
        features = [self.hidden_states(images, instructions)]
        if self.state is not None and state is not None:
            features.append(self.state(state))
        return self.projection(torch.cat(features, dim=-1))
