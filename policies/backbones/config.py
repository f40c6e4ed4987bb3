"""Config of the VLM-backbone policy (``policies.backbones.vlm_policy``): the backbone, then the sections it
shares with the compact policy (state, head, value, normalisation, rl_vision; see ``policies.config``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from policies.config import (
    ActionChunkConfig,
    HeadConfig,
    NormalizationConfig,
    RLVisionConfig,
    StateConfig,
    ValueConfig,
)

TRAIN_MODES = ("frozen", "lora", "full")
POOLING = ("mean", "last")


@dataclass
class VLMBackboneConfig:
    """A Hugging Face vision-language model (``policies.backbones.hf_vlm``).

    Attributes:
        source: a local model folder (config.json, weights, tokenizer), or ``package:<module>`` for an installed
            package with ``get_model_path()``; with network access, download a hub model into a folder first
            (``huggingface-cli download ORG/NAME --local-dir DIR``). Nothing is downloaded at run time.
        train: "frozen" (the backbone is fixed), "lora" (peft LoRA adapters train) or "full".
        lora_rank, lora_alpha: LoRA's rank r and scale alpha (the update is alpha / r * B A).
        lora_targets: module names that get adapters (the attention projections of both towers by default).
        pooling: "mean" over the valid tokens, or the "last" valid token.
        max_length: instruction token limit.
    """

    source: str = ""
    train: str = "frozen"
    lora_rank: int = 8
    lora_alpha: int = 16
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "out_proj"])
    pooling: str = "mean"
    max_length: int = 32

    def __post_init__(self) -> None:
        if self.train not in TRAIN_MODES:
            raise ValueError(f"backbone.train={self.train!r}; allowed: {', '.join(TRAIN_MODES)}")
        if self.pooling not in POOLING:
            raise ValueError(f"backbone.pooling={self.pooling!r}; allowed: {', '.join(POOLING)}")
        for name in ("lora_rank", "lora_alpha", "max_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"backbone.{name}={value!r} must be a positive integer")
        if not self.source:
            raise ValueError("backbone.source is empty: give a local model folder (policy.backbone.source=DIR)")


@dataclass
class VLMPolicyConfig(ActionChunkConfig):
    """The VLM-backbone policy: ``backbone`` encodes cameras and instruction; ``embedding_dim`` is the size of the
    projected embedding the head and critic read."""

    backbone: VLMBackboneConfig = field(default_factory=VLMBackboneConfig)
    state: StateConfig = field(default_factory=StateConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    value: ValueConfig = field(default_factory=ValueConfig)
    normalization: NormalizationConfig = field(default_factory=NormalizationConfig)
    rl_vision: RLVisionConfig = field(default_factory=RLVisionConfig)
    embedding_dim: int = 128


@dataclass
class PrefixedVLAConfig(ActionChunkConfig):
    """What both VLA families (:mod:`policies.backbones.token_vla`, :mod:`policies.backbones.expert_vla`) configure
    alike: the backbone, the critic, normalisation, whether the state enters (one token), and whether act /
    evaluate / value compute each sample as in any batch (:mod:`policies.backbones.batch_invariant`: the rollout's
    log-probs come back bit for bit in the update)."""

    backbone: VLMBackboneConfig = field(default_factory=VLMBackboneConfig)
    value: ValueConfig = field(default_factory=ValueConfig)
    normalization: NormalizationConfig = field(default_factory=NormalizationConfig)
    use_state: bool = True
    batch_invariant: bool = True
