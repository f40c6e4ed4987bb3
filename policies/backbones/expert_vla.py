"""The action-expert VLA (pi0 / SmolVLA style): a flow-matching action expert reads the VLM's cached prefix.

Per observation the VLM runs once over the prefix (images and instruction, :mod:`policies.backbones.prefix`),
bidirectional where the architecture has a prefix mask (PaliGemma, as pi0) and causal otherwise; its keys and values
of every layer form the :class:`~policies.backbones.action_expert.PrefixContext` that the action expert
(:mod:`policies.backbones.action_expert`) attends to at every denoising step, together with the robot state as one
suffix token. The denoising chain is the flow head's (:class:`policies.heads.flow.FlowHead`): flow matching for SFT
(pi0's time distribution), Euler ODE for evaluation, Flow-SDE or Flow-Noise (piRL) kernels for RL with the exact
chain log-probs of :mod:`policies.heads.chain`, and the noise-level schedule. Only its velocity network is the
expert instead of the compact denoiser: :class:`ExpertFlowHead` reads the prefix context bound for the call
(:meth:`ExpertFlowHead.attending`), and the head's ``embedding`` ``(B, E)`` is the mean of the prefix's last hidden
states over its valid tokens, which Flow-Noise's std network and the critic read.

Factory: ``policies.backbones.expert_vla:build_policy`` (``policy=expert_vla``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from policies.backbones.action_expert import ActionExpert, ExpertConfig, PrefixContext
from policies.backbones.batch_invariant import batch_invariant_method
from policies.backbones.config import PrefixedVLAConfig
from policies.backbones.prefix import PrefixedVLAPolicy, VLMPrefix
from policies.heads.flow import FlowHead, FlowHeadConfig
from policies.value import ValueHead


def gather_before_backward(block: nn.Module, *tensors: torch.Tensor) -> None:
    """Unshard the FSDP2 unit ``block`` when the gradient reaches any of ``tensors`` (computed inside it, and read
    outside it other than through its output); nothing for a module FSDP2 does not shard. ``unshard`` is what FSDP2's
    own hook on a unit's output does; the unit reshards after its backward, as usual."""
    from torch.distributed.fsdp import FSDPModule

    if not isinstance(block, FSDPModule):
        return
    for tensor in tensors:
        if tensor.requires_grad:
            tensor.register_hook(lambda grad: block.unshard())


class ExpertVelocity(nn.Module):
    """The flow head's velocity network: ``forward(noisy (B, H, A), network time, embedding, condition_offset=None)``
    runs the action expert on the prefix context its head has bound (the embedding is not read)."""

    def __init__(self, expert: ActionExpert) -> None:
        super().__init__()
        self.expert = expert
        self.context: PrefixContext | None = None

    def forward(
        self, noisy: torch.Tensor, network_time: torch.Tensor, embedding: torch.Tensor,
        condition_offset: torch.Tensor | None = None,
    ) -> torch.Tensor:  # fmt: skip
        if self.context is None:
            raise RuntimeError("the action expert needs the observation's prefix: call it inside head.attending()")
        if condition_offset is not None:
            raise ValueError("the action expert reads no RL-only features")
        return self.expert(noisy, network_time, self.context)


class ExpertFlowHead(FlowHead):
    """:class:`FlowHead` whose velocity is the action expert's (module docstring)."""

    def __init__(self, embedding_dim: int, chunk_size: int, action_dim: int, config: FlowHeadConfig,
                 expert: ActionExpert) -> None:  # fmt: skip
        super().__init__(embedding_dim, chunk_size, action_dim, config)
        self.denoiser = ExpertVelocity(expert)  # replaces the compact denoiser FlowHead built

    @contextlib.contextmanager
    def attending(self, context: PrefixContext) -> Iterator[None]:
        """Bind ``context`` for the sampling, log-prob or SFT calls inside the block."""
        self.denoiser.context = context
        try:
            yield
        finally:
            self.denoiser.context = None


@dataclass
class ExpertVLAConfig(PrefixedVLAConfig):
    """The action-expert VLA: the sections of :class:`PrefixedVLAConfig` (the state, where used, is one expert
    token), the expert and the flow chain (``FlowHeadConfig`` options except the compact denoiser's size)."""

    expert: ExpertConfig = field(default_factory=ExpertConfig)
    flow: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.flow_config()

    def flow_config(self) -> FlowHeadConfig:
        """The flow chain's options; an unknown one is a ValueError that lists the valid ones."""
        valid = {f.name for f in dataclasses.fields(FlowHeadConfig)} - {"hidden_dim", "num_blocks"}
        unknown = sorted(set(self.flow) - valid)
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} in policy.flow; valid options: {sorted(valid)}")
        if self.flow.get("initial_noise", "sample") != "sample" or self.flow.get("detach_embedding", False):
            raise ValueError("policy.flow: the action expert supports initial_noise='sample' and detach_embedding=false")
        return FlowHeadConfig(**self.flow)


class ExpertVLAPolicy(PrefixedVLAPolicy):
    """A VLM prefix and a flow-matching action expert behind the policy protocol (module docstring)."""

    def __init__(self, config: ExpertVLAConfig, io_spec: Any, stats: Mapping[str, Any] | None = None) -> None:
        super().__init__(config, io_spec, stats, config.normalization.action, config.normalization.state)
        spec = self.io_spec
        self.prefix = VLMPrefix(config.backbone, spec.camera_names, 0)
        self.prefix.output_embeddings = None
        state_dim = spec.state_dim if config.use_state else 0
        expert = ActionExpert(self.prefix.text_config, config.chunk_size, spec.action_dim, state_dim, config.expert)
        hidden = self.prefix.hidden_size
        self.head = ExpertFlowHead(hidden, config.chunk_size, spec.action_dim, config.flow_config(), expert)
        self.value_head = ValueHead(hidden, config.value.hidden_dims, config.value.detach_input)

    @property
    def expert(self) -> ActionExpert:
        return self.head.denoiser.expert

    def fsdp_blocks(self) -> list[nn.Module]:
        """FSDP2's units: each block of the vision tower, of the language model and of the expert, the word
        embeddings, then the head and the critic. The expert reads the language model's keys and values, which leave
        a block through the cache and not through its output, where FSDP2 hooks the gather before backward:
        :meth:`prefix_context` gathers a sharded block when the gradient reaches its keys or values."""
        return [*self.prefix.fsdp_blocks(), *self.expert.layers, self.head, self.value_head]

    # ----------------------------------------------------------------------------- the prefix
    def prefix_context(self, obs: Mapping[str, Any]) -> tuple[PrefixContext, torch.Tensor]:
        """``(context, embedding (B, E))``: the VLM's keys and values of every layer over the prefix, and the mean of
        its last hidden states over the valid prefix tokens."""
        images, state, instructions = self.prepare_observation(obs)
        pixels = self.prefix.pixels(images)
        embeddings, mask = self.prefix.embed(None, instructions, pixels.device)
        length = embeddings.shape[1]
        output = self.prefix.backbone(
            inputs_embeds=embeddings, attention_mask=mask, use_cache=True,
            **self.prefix.model_inputs(pixels, length, length),
        )  # fmt: skip
        layers = output.cache.layers
        if torch.is_grad_enabled():
            for block, layer in zip(self.prefix.language_model_blocks(), layers, strict=True):
                gather_before_backward(block, layer.keys, layer.values)
        context = PrefixContext([layer.keys for layer in layers], [layer.values for layer in layers], mask,
                                state if self.config.use_state else None)  # fmt: skip
        weights = mask.unsqueeze(-1).float()
        embedding = (output.last_hidden_state.float() * weights).sum(1) / weights.sum(1)
        return context, embedding

    # ----------------------------------------------------------------------------- protocol
    @batch_invariant_method
    @torch.no_grad()
    def act(
        self, obs: Mapping[str, Any], deterministic: bool = False, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Denoise a chunk from the prefix computed once; ``actions`` ``(B, H, A)`` in env units, clipped; extras:
        ``log_prob`` ``(B, H, A)``, ``value`` ``(B,)``, ``action_normalized`` and the chain's ``replay.*``."""
        context, embedding = self.prefix_context(obs)
        with self.head.attending(context):
            normalized, replay = self.head.sample(embedding, deterministic=deterministic, generator=generator)
        replay = dict(replay)
        extras = {
            "log_prob": replay.pop("log_prob"),
            "value": self.value_head(embedding),
            "action_normalized": normalized,
            **{"replay." + name: tensor for name, tensor in replay.items()},
        }
        return self.to_env_units(normalized), extras

    @batch_invariant_method
    def evaluate(
        self, obs: Mapping[str, Any], extras: Mapping[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """``(log_prob (B, H, A), entropy (B, H, A) or None, value (B,))`` of the stored chain, with gradients."""
        if "action_normalized" not in extras.keys():
            raise KeyError("extras lack 'action_normalized'; pass the extras that act() returned")
        replay = {key[len("replay."):]: self._tensor(extras[key]) for key in extras.keys() if key.startswith("replay.")}
        actions = self._tensor(extras["action_normalized"], torch.float32)
        context, embedding = self.prefix_context(obs)
        with self.head.attending(context):
            log_prob, entropy = self.head.log_prob(embedding, actions, replay)
        return log_prob, entropy, self.value_head(embedding)

    @batch_invariant_method
    def value(self, obs: Mapping[str, Any]) -> torch.Tensor:
        """State value ``(B,)``."""
        return self.value_head(self.prefix_context(obs)[1])

    def bc_loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """Flow matching on the expert chunk (``batch["action"]`` ``(B, H, A)`` in env units), masked by
        ``batch["action_mask"]`` ``(B, H)``."""
        normalized, mask = self.expert_actions(batch)
        context, embedding = self.prefix_context(batch)
        with self.head.attending(context):
            return self.head.bc_loss(embedding, normalized, mask)


def validate_policy_config(config: Mapping[str, Any]) -> None:
    """Keys and values (no model is loaded)."""
    ExpertVLAConfig.from_dict(dict(config))


def build_policy(config: Mapping[str, Any], io_spec: Any, stats: Mapping[str, Any] | None) -> ExpertVLAPolicy:
    """The factory: an :class:`ExpertVLAPolicy` from its config dict (``ExpertVLAConfig`` fields)."""
    return ExpertVLAPolicy(ExpertVLAConfig.from_dict(dict(config)), io_spec, stats)
