"""How each Hugging Face vision-language architecture takes camera images: a registry by ``config.model_type``.

A VLM reads its image tokens at the positions of a special image token in ``input_ids``; how many tokens one
image becomes and how ``pixel_values`` are laid out differ by architecture. A new architecture adds a class
here with ``@register_architecture("model_type", ...)``; nothing else changes.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

_ARCHITECTURES: dict[str, type[VLMArchitecture]] = {}


def register_architecture(*model_types: str):
    def decorate(cls: type[VLMArchitecture]) -> type[VLMArchitecture]:
        for model_type in model_types:
            _ARCHITECTURES[model_type] = cls
        return cls

    return decorate


def architecture_for(model: nn.Module) -> VLMArchitecture:
    """The adapter of ``model`` (a transformers base model) by its ``config.model_type``."""
    model_type = str(getattr(model.config, "model_type", ""))
    if model_type not in _ARCHITECTURES:
        raise ValueError(
            f"backbone model_type {model_type!r} is not supported; supported: {sorted(_ARCHITECTURES)} "
            f"(add one in policies/backbones/architectures.py)"
        )
    return _ARCHITECTURES[model_type](model)


class VLMArchitecture:
    """``image_size``: the vision tower's input side; ``tokens_per_image``; ``image_token_id``."""

    def __init__(self, model: nn.Module) -> None:
        self.config = model.config
        self.model = model

    @property
    def image_size(self) -> int:
        return int(self.config.vision_config.image_size)

    @property
    def image_token_id(self) -> int:
        return int(self.config.image_token_id)

    @property
    def tokens_per_image(self) -> int:
        raise NotImplementedError

    def image_inputs(self, pixels: torch.Tensor, input_ids: torch.Tensor) -> dict[str, Any]:
        """Model keyword arguments for ``pixels`` ``(B, C, 3, S, S)`` (C cameras, normalised)."""
        raise NotImplementedError

    def suffix_inputs(self, inputs: dict[str, Any], suffix_start: int) -> dict[str, Any]:
        """``inputs`` (of :meth:`image_inputs`) for a sequence whose positions from ``suffix_start`` on attend
        causally and are not attended to by the prefix; architectures that are causal throughout change nothing."""
        return inputs


@register_architecture("idefics3", "smolvlm")
class Idefics3Architecture(VLMArchitecture):
    """SmolVLM / Idefics3: ``pixel_values`` ``(B, num_images, 3, S, S)``; one image is ``image_seq_len`` tokens
    (its patches after the pixel shuffle). One tile per camera: no image splitting."""

    @property
    def tokens_per_image(self) -> int:
        return int(self.model.image_seq_len)

    def image_inputs(self, pixels: torch.Tensor, input_ids: torch.Tensor) -> dict[str, Any]:
        return {"pixel_values": pixels}


@register_architecture("paligemma")
class PaliGemmaArchitecture(VLMArchitecture):
    """PaliGemma (SigLIP + Gemma): ``pixel_values`` ``(B * C, 3, S, S)``, one image is ``num_image_tokens`` tokens;
    ``token_type_ids`` of 0 make the whole sequence a prefix that attends both ways."""

    @property
    def tokens_per_image(self) -> int:
        return int(self.config.text_config.num_image_tokens)

    def image_inputs(self, pixels: torch.Tensor, input_ids: torch.Tensor) -> dict[str, Any]:
        return {"pixel_values": pixels.flatten(0, 1), "token_type_ids": torch.zeros_like(input_ids)}

    def suffix_inputs(self, inputs: dict[str, Any], suffix_start: int) -> dict[str, Any]:
        """Token type 1 (causal, after the bidirectional prefix) on the suffix."""
        token_types = inputs["token_type_ids"].clone()
        token_types[:, suffix_start:] = 1
        return {**inputs, "token_type_ids": token_types}
