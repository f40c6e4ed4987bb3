"""Language encoders: a list of instructions -> one embedding per instruction ``(B, E)``.

Two kinds behind one interface (:class:`policies.encoders.language_base.LanguageEncoder`), chosen by
``LanguageConfig.kind`` through :data:`LANGUAGE_ENCODERS`:

- ``"hashed_bow"`` (:class:`HashedBagOfWordsEncoder`): small and trainable, needs no weights.
- ``"pretrained"`` (:class:`policies.encoders.pretrained_language.PretrainedTextEncoder`):
  a Hugging Face encoder from a local folder or an installed package, frozen by default.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence

import torch
from torch import nn

from policies.config import LanguageConfig
from policies.encoders.language_base import LanguageEncoder
from policies.encoders.pretrained_language import PretrainedTextEncoder

_WORD = re.compile(r"[a-z0-9]+")


def hashed_tokens(text: str, num_buckets: int) -> list[int]:
    """Bucket ids of the lower-cased words and word bigrams of ``text``.

    Bigrams keep some word order ("red on blue" differs from "blue on red"). crc32 is
    stable across processes, unlike Python's salted ``hash``.
    """
    words = _WORD.findall(text.lower())
    grams = words + [f"{first} {second}" for first, second in zip(words, words[1:], strict=False)]
    return [zlib.crc32(gram.encode()) % num_buckets for gram in grams]


class HashedBagOfWordsEncoder(LanguageEncoder):
    """Mean of hashed word and bigram embeddings, then an MLP. Trainable from scratch.

    Args:
        embedding_dim: output size E.
        num_buckets: hash buckets (collisions are rare for a task suite's small vocabulary).
    """

    _MAX_CACHED = 100_000

    def __init__(self, embedding_dim: int = 64, num_buckets: int = 4096) -> None:
        super().__init__()
        self.num_buckets = num_buckets
        self.output_dim = embedding_dim
        self.embedding = nn.EmbeddingBag(num_buckets, embedding_dim, mode="mean")
        self.mlp = nn.Sequential(
            nn.Linear(embedding_dim, embedding_dim), nn.GELU(), nn.Linear(embedding_dim, embedding_dim)
        )
        self._token_cache: dict[str, list[int]] = {}

    def tokens(self, text: str) -> list[int]:
        cached = self._token_cache.get(text)
        if cached is None:
            if len(self._token_cache) >= self._MAX_CACHED:
                self._token_cache.clear()
            cached = self._token_cache[text] = hashed_tokens(text, self.num_buckets)
        return cached

    def forward(self, instructions: Sequence[str]) -> torch.Tensor:
        device = self.embedding.weight.device
        token_lists = [self.tokens(text) for text in instructions]
        flat = torch.tensor([token for tokens in token_lists for token in tokens], dtype=torch.long, device=device)
        lengths = torch.tensor([0] + [len(tokens) for tokens in token_lists[:-1]], dtype=torch.long)
        offsets = torch.cumsum(lengths, 0).to(device)
        return self.mlp(self.embedding(flat, offsets))  # an empty instruction embeds as mlp(0)

    @classmethod
    def from_config(cls, config: LanguageConfig) -> HashedBagOfWordsEncoder:
        return cls(embedding_dim=config.embedding_dim, num_buckets=config.num_buckets)


#: kind -> factory(config). A new encoder kind registers itself here.
LANGUAGE_ENCODERS: dict[str, Callable[[LanguageConfig], LanguageEncoder]] = {
    "hashed_bow": HashedBagOfWordsEncoder.from_config,
    "pretrained": PretrainedTextEncoder.from_config,
}


def build_language_encoder(config: LanguageConfig) -> LanguageEncoder:
    if config.kind not in LANGUAGE_ENCODERS:
        raise ValueError(f"unknown language.kind {config.kind!r}; choose one of {sorted(LANGUAGE_ENCODERS)}")
    return LANGUAGE_ENCODERS[config.kind](config)
