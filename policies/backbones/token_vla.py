"""The action-token VLA (OpenVLA / OpenVLA-OFT style): the language model predicts each action dimension as a token.

Sequence (:mod:`policies.backbones.prefix` for the prefix of P tokens)::

    prefix (images, instruction, state) | slot_0 ... slot_{N-1}          N = chunk_size x action_dim

Slot ``j`` predicts the bin of action dimension ``j`` (chunk step ``j // A``, dimension ``j % A``); its logits are
``readout(h_j)`` over the ``num_bins`` action tokens only (:mod:`policies.tokens`). Its input is the learned slot
embedding ``q_j`` plus:

- ``decoding="parallel"`` (OpenVLA-OFT, Kim et al. 2025, arXiv 2502.19645): nothing; all slots are placeholders and
  one forward pass predicts the whole chunk;
- ``decoding="autoregressive"`` (OpenVLA): the embedding of the token chosen for slot ``j - 1`` (slot 0: none), so
  slot ``j`` reads the tokens before it (teacher forcing in SFT and in ``evaluate``; one forward per slot in ``act``).

The suffix is causal and the prefix never attends to it. ``act`` decodes with full-length forward passes (no key/value
cache): the logits of slot ``j`` then come from the same computation, bit for bit, as in ``evaluate``'s one
teacher-forced pass, because the later slots only add exactly zero attention weights.

Action-token ids: the last ``num_bins`` ids of the vocabulary (``id_placement="last"``) or new ids after it
("added"). Their input embeddings (``action_embeddings``) and output rows (``readout``) are this policy's own,
trainable weights, initialised from the checkpoint's rows of those ids ("last": an OpenVLA checkpoint's action tokens
come back exactly) or at random ("added"), so that LoRA trains the adapters, these rows, the slots and the critic.

RL: rollouts sample each token from ``softmax(logits / temperature)``; ``log_prob`` ``(B, H, A)`` is the tempered
log-probability of each sampled token (one per action dimension: the ``dimension`` / ``action`` / ``chunk``
granularities of ``policies.heads.base.reduce_log_prob`` sum them), the entropy is the categorical one. Evaluation
(``deterministic=True``) takes the most likely bin, or (``tokens.deterministic_action="mean"``) the expected bin
centre. SFT is the cross-entropy on the action slots only (labels -100 elsewhere), masked by ``action_mask``. The
critic reads the hidden state of slot 0 (the whole prefix, no action).

Factory: ``policies.backbones.token_vla:build_policy`` (``policy=token_vla``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from policies.backbones.batch_invariant import batch_invariant_method
from policies.backbones.config import PrefixedVLAConfig
from policies.backbones.prefix import PrefixedVLAPolicy, VLMPrefix
from policies.tokens import ID_PLACEMENTS, ActionTokenizer
from policies.value import ValueHead

DECODINGS = ("parallel", "autoregressive")
DETERMINISTIC_ACTIONS = ("argmax", "mean")
#: Action normalisations that map the data into the tokenizer's [-1, 1].
BOUNDED_MODES = ("min_max", "quantile")
IGNORE_INDEX = -100


@dataclass
class ActionTokensConfig:
    """Action tokens.

    Attributes:
        num_bins: bins per action dimension (OpenVLA: 256).
        id_placement: "last" (the vocabulary's last ids) or "added" (new ids after the vocabulary).
        decoding: "parallel" (one forward per chunk) or "autoregressive" (one token after another).
        temperature: rollout sampling temperature; RL's log-probs are those of the tempered distribution.
        deterministic_action: the action ``act(deterministic=True)`` (evaluation) returns: "argmax", the most
            likely bin's centre (OpenVLA), or "mean", the expectation of the bin centres under the untempered
            softmax of each slot (a continuous value; with autoregressive decoding each slot reads the argmax
            tokens before it). Rollouts sample tokens either way.
    """

    num_bins: int = 256
    id_placement: str = "added"
    decoding: str = "parallel"
    temperature: float = 1.0
    deterministic_action: str = "argmax"

    def __post_init__(self) -> None:
        if self.id_placement not in ID_PLACEMENTS:
            raise ValueError(f"tokens.id_placement={self.id_placement!r}; allowed: {', '.join(ID_PLACEMENTS)}")
        if self.deterministic_action not in DETERMINISTIC_ACTIONS:
            raise ValueError(f"tokens.deterministic_action={self.deterministic_action!r}; allowed: "
                             f"{', '.join(DETERMINISTIC_ACTIONS)}")  # fmt: skip
        if self.decoding not in DECODINGS:
            raise ValueError(f"tokens.decoding={self.decoding!r}; allowed: {', '.join(DECODINGS)}")
        if not isinstance(self.num_bins, int) or self.num_bins < 2:
            raise ValueError(f"tokens.num_bins={self.num_bins!r} must be an integer >= 2")
        if not self.temperature > 0:
            raise ValueError(f"tokens.temperature={self.temperature!r} must be > 0")


@dataclass
class TokenVLAConfig(PrefixedVLAConfig):
    """The action-token VLA: the sections of :class:`PrefixedVLAConfig` (the state, where used, is one prefix
    token) and its action tokens."""

    tokens: ActionTokensConfig = field(default_factory=ActionTokensConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.normalization.action not in BOUNDED_MODES:
            raise ValueError(
                f"normalization.action={self.normalization.action!r}: action tokens bin [-1, 1], so the action "
                f"normalisation must map the data there; use one of {', '.join(BOUNDED_MODES)}"
            )


class TokenVLAPolicy(PrefixedVLAPolicy):
    """Action tokens from a VLM behind the policy protocol (module docstring)."""

    def __init__(self, config: TokenVLAConfig, io_spec: Any, stats: Mapping[str, Any] | None = None) -> None:
        super().__init__(config, io_spec, stats, config.normalization.action, config.normalization.state)
        spec = self.io_spec
        self.prefix = VLMPrefix(config.backbone, spec.camera_names, spec.state_dim if config.use_state else 0)
        hidden = self.prefix.hidden_size
        self.tokenizer = ActionTokenizer(config.tokens.num_bins, self.prefix.vocab_size, config.tokens.id_placement)
        self.num_slots = config.chunk_size * spec.action_dim
        words = self.prefix.word_embeddings().weight.detach()
        self.action_embeddings = nn.Embedding(config.tokens.num_bins, hidden)
        self.readout = nn.Linear(hidden, config.tokens.num_bins, bias=False)
        with torch.no_grad():
            if config.tokens.id_placement == "last":
                ids = self.tokenizer.token_ids(torch.arange(config.tokens.num_bins))
                self.action_embeddings.weight.copy_(words[ids])
                self.readout.weight.copy_(self.prefix.output_embeddings[ids])
            else:
                self.action_embeddings.weight.normal_(0.0, float(words.std()))
                self.readout.weight.normal_(0.0, float(self.prefix.output_embeddings.std()))
        self.prefix.output_embeddings = None  # only needed for the initialisation above
        self.slots = nn.Parameter(torch.zeros(self.num_slots, hidden))
        self.query = nn.Parameter(words.mean(0).clone())  # a well-scaled input that is no word
        self.value_head = ValueHead(hidden, config.value.hidden_dims, config.value.detach_input)

    def fsdp_blocks(self) -> list[nn.Module]:
        """FSDP2's units: each transformer block of the backbone, then the action rows and the critic."""
        rest = [self.action_embeddings, self.readout, self.value_head, self.prefix.state_token]
        return [*self.prefix.fsdp_blocks(), *(m for m in rest if m is not None)]

    # ----------------------------------------------------------------------------- the sequence
    def slot_inputs(self, previous_bins: torch.Tensor | None, batch: int) -> torch.Tensor:
        """Suffix input embeddings ``(B, N, E)``: slots + (autoregressive) the previous slot's token ``(B, N)``."""
        inputs = (self.query + self.slots).unsqueeze(0).expand(batch, -1, -1)
        if self.config.tokens.decoding == "parallel" or previous_bins is None:
            return inputs
        shifted = self.action_embeddings(previous_bins[:, :-1])
        return torch.cat([inputs[:, :1], inputs[:, 1:] + shifted], dim=1)

    def hidden_states(
        self, prefix: tuple[torch.Tensor, torch.Tensor, torch.Tensor], suffix: torch.Tensor
    ) -> torch.Tensor:
        """Last hidden states of the action slots ``(B, N, E)`` for prefix ``(embeddings, mask, pixels)``."""
        embeddings, mask, pixels = prefix
        length = embeddings.shape[1]
        sequence = torch.cat([embeddings, suffix.to(embeddings.dtype)], dim=1)
        full_mask = torch.cat([mask, mask.new_ones(mask.shape[0], suffix.shape[1])], dim=1)
        output = self.prefix.backbone(
            inputs_embeds=sequence, attention_mask=full_mask, use_cache=False,
            **self.prefix.model_inputs(pixels, sequence.shape[1], length),
        )  # fmt: skip
        return output.last_hidden_state[:, length:].float()

    def encode_prefix(self, obs: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        images, state, instructions = self.prepare_observation(obs)
        pixels = self.prefix.pixels(images)
        embeddings, mask = self.prefix.embed(state if self.config.use_state else None, instructions, pixels.device)
        return embeddings, mask, pixels

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Slot hidden states ``(B, N, E)`` -> action-token logits ``(B, N, num_bins)``."""
        return self.readout(hidden)

    def teacher_forced(self, obs: Mapping[str, Any], bins: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits (B, N, num_bins), slot hidden states (B, N, E))`` with ``bins`` ``(B, N)`` as the chosen tokens."""
        prefix = self.encode_prefix(obs)
        hidden = self.hidden_states(prefix, self.slot_inputs(bins, prefix[0].shape[0]))
        return self.logits(hidden), hidden

    def decode(
        self, obs: Mapping[str, Any], deterministic: bool, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(bins (B, N), tempered logits (B, N, num_bins), slot hidden states (B, N, E))``: all slots at once
        (parallel), or slot after slot, each from a full-length pass over the tokens chosen so far."""
        prefix = self.encode_prefix(obs)
        batch = prefix[0].shape[0]
        temperature = self.config.tokens.temperature
        if self.config.tokens.decoding == "parallel":
            hidden = self.hidden_states(prefix, self.slot_inputs(None, batch))
            logits = self.logits(hidden) / temperature
            return self.choose(logits, deterministic, generator), logits, hidden
        bins = torch.zeros(batch, self.num_slots, dtype=torch.long, device=prefix[0].device)
        for slot in range(self.num_slots):
            hidden = self.hidden_states(prefix, self.slot_inputs(bins, batch))
            logits = self.logits(hidden) / temperature
            bins[:, slot] = self.choose(logits[:, slot : slot + 1], deterministic, generator)[:, 0]
        return bins, logits, hidden

    @staticmethod
    def choose(logits: torch.Tensor, deterministic: bool, generator: torch.Generator | None) -> torch.Tensor:
        """Bins ``(B, K)`` from logits ``(B, K, num_bins)``: the most likely, or drawn from the softmax."""
        if deterministic:
            return logits.argmax(-1)
        probabilities = torch.softmax(logits.float(), dim=-1)
        flat = torch.multinomial(probabilities.flatten(0, 1), 1, generator=generator)
        return flat.view(logits.shape[:2])

    def per_dimension(self, values: torch.Tensor) -> torch.Tensor:
        """``(B, N)`` -> ``(B, H, A)``."""
        return values.view(values.shape[0], self.config.chunk_size, self.io_spec.action_dim)

    # ----------------------------------------------------------------------------- protocol
    @batch_invariant_method
    @torch.no_grad()
    def act(
        self, obs: Mapping[str, Any], deterministic: bool = False, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Decode a chunk; ``actions`` ``(B, H, A)`` in env units (bin centres, clipped; deterministic with
        ``tokens.deterministic_action="mean"``: the expected centres), extras: ``log_prob`` ``(B, H, A)``, ``value``
        ``(B,)``, ``action_bins`` ``(B, H, A)`` (the chosen tokens), ``action_normalized`` ``(B, H, A)``."""
        bins, logits, hidden = self.decode(obs, deterministic, generator)
        log_prob = torch.log_softmax(logits.float(), -1).gather(-1, bins.unsqueeze(-1)).squeeze(-1)
        if deterministic and self.config.tokens.deterministic_action == "mean":
            probabilities = torch.softmax(logits.float() * self.config.tokens.temperature, -1)  # untempered
            centres = self.tokenizer.centers(torch.arange(self.tokenizer.num_bins, device=bins.device))
            normalized = self.per_dimension(probabilities @ centres)
        else:
            normalized = self.per_dimension(self.tokenizer.centers(bins))
        extras = {
            "log_prob": self.per_dimension(log_prob),
            "value": self.value_head(hidden[:, 0]),
            "action_bins": self.per_dimension(bins),
            "action_normalized": normalized,
        }
        return self.to_env_units(normalized), extras

    def stored_bins(self, extras: Mapping[str, Any]) -> torch.Tensor:
        if "action_bins" not in extras.keys():
            raise KeyError("extras lack 'action_bins'; pass the extras that act() returned")
        bins = self._tensor(extras["action_bins"], torch.long)
        return bins.reshape(bins.shape[0], -1)

    @batch_invariant_method
    def evaluate(
        self, obs: Mapping[str, Any], extras: Mapping[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log_prob (B, H, A), entropy (B, H, A), value (B,))`` of the stored tokens, in one teacher-forced pass."""
        bins = self.stored_bins(extras)
        logits, hidden = self.teacher_forced(obs, bins)
        log_probs = torch.log_softmax(logits.float() / self.config.tokens.temperature, -1)
        log_prob = log_probs.gather(-1, bins.unsqueeze(-1)).squeeze(-1)
        entropy = -(log_probs.exp() * log_probs).sum(-1)
        return self.per_dimension(log_prob), self.per_dimension(entropy), self.value_head(hidden[:, 0])

    @batch_invariant_method
    def value(self, obs: Mapping[str, Any]) -> torch.Tensor:
        """State value ``(B,)`` (slot 0 reads no action token)."""
        prefix = self.encode_prefix(obs)
        return self.value_head(self.hidden_states(prefix, self.slot_inputs(None, prefix[0].shape[0]))[:, 0])

    def labels(self, normalized: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """SFT labels ``(B, N)``: the expert's bins, ``IGNORE_INDEX`` on the chunk steps ``mask`` ``(B, H)`` marks
        invalid."""
        bins = self.tokenizer.bins(normalized).reshape(normalized.shape[0], -1)
        if mask is None:
            return bins
        valid = mask.unsqueeze(-1).expand_as(normalized).reshape(bins.shape)
        return torch.where(valid, bins, torch.full_like(bins, IGNORE_INDEX))

    def bc_loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """Cross-entropy of the expert chunk's tokens (env units in ``batch["action"]`` ``(B, H, A)``), teacher-forced,
        on the action slots only."""
        normalized, mask = self.expert_actions(batch)
        labels = self.labels(normalized, mask)
        logits, _ = self.teacher_forced(batch, labels.clamp(min=0))
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)


def validate_policy_config(config: Mapping[str, Any]) -> None:
    """Keys and values (no model is loaded)."""
    TokenVLAConfig.from_dict(dict(config))


def build_policy(config: Mapping[str, Any], io_spec: Any, stats: Mapping[str, Any] | None) -> TokenVLAPolicy:
    """The factory: a :class:`TokenVLAPolicy` from its config dict (``TokenVLAConfig`` fields)."""
    return TokenVLAPolicy(TokenVLAConfig.from_dict(dict(config)), io_spec, stats)
