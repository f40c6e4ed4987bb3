"""Action tokenizer: each normalised action dimension becomes one of ``num_bins`` tokens (OpenVLA, Kim et al. 2024,
arXiv 2406.09246, section 3.2).

Actions are first normalised with the dataset statistics (``policies.normalization``, ``min_max`` or ``quantile``
map the data to [-1, 1]); [-1, 1] is cut into ``num_bins`` equal bins of width ``w = 2 / num_bins``, a value is
clipped to [-1, 1] and takes the bin it falls in, and a bin decodes to its centre ``-1 + (k + 1/2) w``. A value
inside [-1, 1] therefore comes back within ``w / 2``; one outside comes back as the nearest edge bin's centre.

Bins map onto token ids in one of two ways (``id_placement``):

- ``"last"``: the last ``num_bins`` ids of the vocabulary, the least used ones of a BPE vocabulary (as OpenVLA
  overwrites Llama's 256 least used tokens): bin ``k`` is id ``vocab_size - num_bins + k``;
- ``"added"``: ``num_bins`` new ids after the vocabulary, ``vocab_size + k`` (for a vocabulary too small to give
  up that many ids, such as the word-level tokenizers of the tiny test models).

The tokenizer is pure arithmetic on tensors: the policy owns the embeddings of these ids.
"""

from __future__ import annotations

import torch

ID_PLACEMENTS = ("last", "added")


class ActionTokenizer:
    """Normalised actions ``(..., A)`` in [-1, 1] <-> bins ``(..., A)`` in ``[0, num_bins)`` <-> token ids.

    Args:
        num_bins: bins per dimension (256 in OpenVLA).
        vocab_size: the language model's vocabulary size.
        id_placement: "last" or "added" (module docstring).

    Raises:
        ValueError: ``num_bins`` < 2, an unknown placement, or "last" with a vocabulary of at most ``num_bins``
            ids (it would take every id; use "added").
    """

    def __init__(self, num_bins: int, vocab_size: int, id_placement: str = "last") -> None:
        if not isinstance(num_bins, int) or num_bins < 2:
            raise ValueError(f"action tokens: num_bins={num_bins!r} must be an integer >= 2")
        if id_placement not in ID_PLACEMENTS:
            raise ValueError(f"action tokens: id_placement={id_placement!r}; allowed: {', '.join(ID_PLACEMENTS)}")
        if id_placement == "last" and vocab_size <= num_bins:
            raise ValueError(
                f"action tokens: the vocabulary has {vocab_size} ids, too few to give its last {num_bins} to action "
                "bins; use id_placement='added' (new ids after the vocabulary) or fewer bins"
            )
        self.num_bins = num_bins
        self.vocab_size = vocab_size
        self.id_placement = id_placement
        self.first_id = vocab_size - num_bins if id_placement == "last" else vocab_size

    @property
    def bin_width(self) -> float:
        return 2.0 / self.num_bins

    @property
    def total_vocab_size(self) -> int:
        """Ids the model must embed: the vocabulary, plus the added bins for "added"."""
        return self.vocab_size + (self.num_bins if self.id_placement == "added" else 0)

    def bins(self, normalized: torch.Tensor) -> torch.Tensor:
        """Normalised actions ``(..., A)`` -> bin indices ``(..., A)`` (long), clipped to the edge bins."""
        index = torch.floor((normalized.clamp(-1.0, 1.0) + 1.0) / self.bin_width).long()
        return index.clamp(0, self.num_bins - 1)

    def centers(self, bins: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Bin indices ``(..., A)`` -> normalised actions ``(..., A)``: the bins' centres."""
        if bins.numel() and (int(bins.min()) < 0 or int(bins.max()) >= self.num_bins):
            raise ValueError(f"bin indices must lie in [0, {self.num_bins}); got {int(bins.min())}..{int(bins.max())}")
        return -1.0 + (bins.to(dtype) + 0.5) * self.bin_width

    def token_ids(self, bins: torch.Tensor) -> torch.Tensor:
        """Bin indices -> token ids (same shape)."""
        return bins + self.first_id

    def bins_of_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """Token ids -> bin indices; an id that is no action token is a ValueError."""
        bins = ids - self.first_id
        if bins.numel() and (int(bins.min()) < 0 or int(bins.max()) >= self.num_bins):
            raise ValueError(
                f"token ids {int(ids.min())}..{int(ids.max())} are not all action tokens "
                f"({self.first_id}..{self.first_id + self.num_bins - 1})"
            )
        return bins

    def encode(self, normalized: torch.Tensor) -> torch.Tensor:
        """Normalised actions ``(..., A)`` -> token ids ``(..., A)``."""
        return self.token_ids(self.bins(normalized))

    def decode(self, ids: torch.Tensor) -> torch.Tensor:
        """Token ids ``(..., A)`` -> normalised actions ``(..., A)`` (bin centres)."""
        return self.centers(self.bins_of_ids(ids))


def encode_actions(tokenizer: ActionTokenizer, actions: torch.Tensor, normalizer) -> torch.Tensor:
    """Actions ``(..., A)`` in env units -> token ids ``(..., A)``, through ``normalizer``
    (a :class:`policies.normalization.Normalizer` with an ``"action"`` feature)."""
    return tokenizer.encode(normalizer.normalize("action", actions))


def decode_actions(tokenizer: ActionTokenizer, ids: torch.Tensor, normalizer) -> torch.Tensor:
    """Token ids ``(..., A)`` -> actions ``(..., A)`` in env units (bin centres unnormalised by ``normalizer``)."""
    return normalizer.unnormalize("action", tokenizer.decode(ids))
