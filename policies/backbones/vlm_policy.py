"""The VLM-backbone VLA: a Hugging Face vision-language model encodes the cameras and the instruction, and its
hidden states feed any action head of ``policies.heads`` and the value head, behind the same protocol as the
compact policy (``VLAPolicy``: act, evaluate, bc_loss, normalisation, save_pretrained).

Factory: ``policy.factory=policies.backbones.vlm_policy:build_policy`` (``policy=vlm`` in configs/policy/vlm.yaml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from policies.backbones.config import VLMPolicyConfig
from policies.backbones.hf_vlm import HFVLMEncoder
from policies.config import PolicyIOSpec
from policies.vla import VLAPolicy


class VLMPolicy(VLAPolicy):
    """:class:`VLAPolicy` with an :class:`HFVLMEncoder`; FSDP2 shards it per transformer block."""

    def __init__(self, config: VLMPolicyConfig, io_spec: Any, stats: Mapping[str, Any] | None = None) -> None:
        spec = io_spec if isinstance(io_spec, PolicyIOSpec) else PolicyIOSpec.from_spec(io_spec)
        encoder = HFVLMEncoder(config.backbone, spec.camera_names, spec.state_dim, config.state, config.embedding_dim)
        super().__init__(config, spec, stats, encoder=encoder)

    def fsdp_blocks(self) -> list[nn.Module]:
        """FSDP2's units: each transformer block of the backbone (vision and language towers), then the other
        modules with parameters (projection, state MLP, head, critic); the root takes what is left."""
        encoder = self.encoder
        rest = [module for module in (encoder.projection, encoder.state, self.head, self.value_head, self.rl_vision)
                if module is not None]  # fmt: skip
        return [*encoder.fsdp_blocks(), *rest]


def validate_policy_config(config: Mapping[str, Any]) -> None:
    """Keys, backbone options, head name and options (no model is loaded)."""
    from policies.heads import head_config

    policy_config = VLMPolicyConfig.from_dict(dict(config))
    head_config(policy_config.head.name, **policy_config.head.options)


def build_policy(config: Mapping[str, Any], io_spec: Any, stats: Mapping[str, Any] | None) -> VLMPolicy:
    """The factory: a :class:`VLMPolicy` from its config dict (``VLMPolicyConfig`` fields)."""
    return VLMPolicy(VLMPolicyConfig.from_dict(dict(config)), io_spec, stats)
