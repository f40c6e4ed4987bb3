"""The observation prefix both VLA families put in front of their actions, and the policy plumbing they share.

:class:`VLMPrefix` loads a Hugging Face ``...ForConditionalGeneration`` checkpoint (offline), keeps its base model
(vision tower, projector, language model) and reads its output embeddings once (the action-token policy starts its
action readout from them). Per sample it lays out::

    [image token] x (tokens per image x cameras) | instruction, right-padded to max_length | [state]      (P tokens)

as input embeddings ``(B, P, E)``: the word embeddings of the image and instruction ids, and (with a state) one
token ``W s`` from a linear map of the normalised state, as OpenVLA-OFT feeds proprioception. The instruction is
always padded to ``backbone.max_length`` tokens, so the layout, and every position, is the same for a sample whatever
batch it is in. The model merges the image features at the image-token positions itself (it finds them by their
embedding). Behind the prefix, a family appends its own suffix (action tokens, or the expert's queries).

:class:`PrefixedVLAPolicy` holds what the families share with :class:`policies.vla.VLAPolicy`: the io spec, the
normaliser and its statistics, observation checking, the env's action bounds, and ``save_pretrained``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from policies.backbones.architectures import architecture_for
from policies.backbones.config import VLMBackboneConfig
from policies.backbones.hf_vlm import apply_lora, camera_pixels, image_normalization, quiet_transformers
from policies.config import PolicyIOSpec
from policies.encoders.pretrained_language import resolve_model_path
from policies.normalization import Normalizer
from policies.vla import VLAPolicy


def load_generative_backbone(config: VLMBackboneConfig) -> tuple[nn.Module, torch.Tensor, object, Path]:
    """``(base model, output embeddings (V, E), tokenizer, folder)`` of the checkpoint in ``config.source``."""
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    folder = resolve_model_path(config.source)
    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        full = AutoModelForImageTextToText.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
    output_embeddings = full.get_output_embeddings().weight.detach().clone()
    return full.model, output_embeddings, tokenizer, folder


#: The names of the embedding modules FSDP2 shards as units of their own (Idefics3, SmolVLM and PaliGemma).
EMBEDDING_NAMES = ("embeddings", "embed_tokens")


class VLMPrefix(nn.Module):
    """The backbone and the prefix layout (module docstring); ``hidden_size`` is the language model's width E."""

    def __init__(self, config: VLMBackboneConfig, camera_names: Sequence[str], state_dim: int) -> None:
        super().__init__()
        model, output_embeddings, self.tokenizer, folder = load_generative_backbone(config)
        self.config = config
        self.camera_names = list(camera_names)
        self.architecture = architecture_for(model)
        self.text_config = model.config.text_config
        self.hidden_size = int(self.text_config.hidden_size)
        self.vocab_size = int(self.text_config.vocab_size)
        self.output_embeddings = output_embeddings  # a plain tensor (not a weight): read once, at construction
        if config.train in ("frozen", "lora"):
            model.requires_grad_(False)
        if config.train == "lora":
            model = apply_lora(model, config)
        self.backbone = model
        mean, std = image_normalization(folder)
        self.register_buffer("pixel_mean", torch.tensor(mean).view(1, 1, 3, 1, 1), persistent=False)
        self.register_buffer("pixel_std", torch.tensor(std).view(1, 1, 3, 1, 1), persistent=False)
        self.state_token = nn.Linear(state_dim, self.hidden_size) if state_dim else None
        self.image_tokens = self.architecture.tokens_per_image * len(self.camera_names)
        self.length = self.image_tokens + config.max_length + (1 if state_dim else 0)

    def word_embeddings(self) -> nn.Embedding:
        return self.backbone.get_input_embeddings()

    def fsdp_blocks(self) -> list[nn.Module]:
        """FSDP2's units of the backbone: each transformer block of both towers (every ``...layers`` module list),
        then the embeddings by name (the vision tower's ``embeddings``, the language model's ``embed_tokens``)."""
        named = list(self.backbone.named_modules())
        blocks = [block for name, module in named if isinstance(module, nn.ModuleList) and name.endswith("layers")
                  for block in module]  # fmt: skip
        embeddings = [module for name, module in named if name.rpartition(".")[2] in EMBEDDING_NAMES]
        return [*blocks, *embeddings]

    def language_model_blocks(self) -> list[nn.Module]:
        """The language model's transformer blocks, in order (the ``layers`` list beside the word embeddings)."""
        embedding_name = next(name for name, module in self.backbone.named_modules() if module is self.word_embeddings())
        owner = embedding_name.rpartition(".")[0]
        return list(self.backbone.get_submodule(owner + ".layers"))

    def pixels(self, images: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Cameras uint8 ``(B, H, W, 3)`` -> ``(B, C, 3, S, S)``, normalised, in the backbone's dtype."""
        pixels = camera_pixels(images, self.camera_names, self.architecture.image_size, self.pixel_mean, self.pixel_std)
        return pixels.to(self.word_embeddings().weight.dtype)

    def embed(
        self, state: torch.Tensor | None, instructions: Sequence[str], device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(embeddings (B, P, E), attention mask (B, P))`` of the prefix (image tokens still unmerged)."""
        text = self.tokenizer(
            list(instructions), padding="max_length", truncation=True, max_length=self.config.max_length,
            return_tensors="pt",
        )  # fmt: skip
        batch = len(instructions)
        image_ids = torch.full((batch, self.image_tokens), self.architecture.image_token_id, dtype=torch.long)
        ids = torch.cat([image_ids, text["input_ids"]], dim=1).to(device)
        mask = torch.cat([torch.ones(batch, self.image_tokens, dtype=torch.long), text["attention_mask"]], 1).to(device)
        embeddings = self.word_embeddings()(ids)
        if self.state_token is not None:
            if state is None:
                raise ValueError("this policy was built with a state; the observation has none")
            embeddings = torch.cat([embeddings, self.state_token(state).unsqueeze(1).to(embeddings.dtype)], dim=1)
            mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype, device=device)], dim=1)
        return embeddings, mask

    def model_inputs(self, pixels: torch.Tensor, sequence_length: int, suffix_start: int) -> dict[str, Any]:
        """The image keyword arguments for a sequence of ``sequence_length`` whose positions from ``suffix_start`` on
        are a causal suffix (PaliGemma's token types; other architectures are causal throughout)."""
        placeholder_ids = torch.zeros(pixels.shape[0], sequence_length, dtype=torch.long, device=pixels.device)
        return self.architecture.suffix_inputs(self.architecture.image_inputs(pixels, placeholder_ids), suffix_start)


class PrefixedVLAPolicy(nn.Module):
    """The io spec, the normaliser, observation checks, action bounds and saving, shared by both VLA families."""

    rl_only_config_keys: tuple[str, ...] = ("value",)

    def __init__(self, config: Any, io_spec: Any, stats: Mapping[str, Any] | None, action_mode: str, state_mode: str):
        super().__init__()
        self.config = config
        self.io_spec = io_spec if isinstance(io_spec, PolicyIOSpec) else PolicyIOSpec.from_spec(io_spec)
        spec = self.io_spec
        modes = {"action": action_mode}
        sizes = {"action": spec.action_dim, "state": spec.state_dim}
        if spec.state_dim > 0:
            modes["state"] = state_mode
        self.normalizer = Normalizer(stats, modes, sizes)
        self.register_buffer("action_low", torch.tensor(spec.action_low, dtype=torch.float32), persistent=False)
        self.register_buffer("action_high", torch.tensor(spec.action_high, dtype=torch.float32), persistent=False)

    _tensor = VLAPolicy._tensor
    expert_actions = VLAPolicy.expert_actions
    prepare_observation = VLAPolicy.prepare_observation
    save_pretrained = VLAPolicy.save_pretrained

    @property
    def stats(self) -> dict[str, dict[str, list[float]]]:
        return self.normalizer.stats

    @property
    def device(self) -> torch.device:
        return self.action_low.device

    def to_env_units(self, normalized: torch.Tensor) -> torch.Tensor:
        """Normalised chunk ``(B, H, A)`` -> env units, clipped to the env's bounds."""
        actions = self.normalizer.unnormalize("action", normalized)
        return torch.maximum(torch.minimum(actions, self.action_high), self.action_low)
