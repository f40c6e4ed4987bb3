"""The RL-only vision encoders (``policy.rl_vision.kind``), built by name.

Each class takes ``(config, camera_names, image_size)`` and has a static ``feature_dim(config,
camera_names)``: the policy sizes its heads before building the encoder. A new kind adds a file and an
entry in :data:`RL_VISION_ENCODERS`.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from policies.config import RLVisionConfig
from policies.encoders.keypoints import KeypointEncoder
from policies.encoders.pixels import PixelEncoder

RL_VISION_ENCODERS: dict[str, type[nn.Module]] = {
    "keypoints": KeypointEncoder,
    "pixels": PixelEncoder,
}


def _encoder_class(kind: str) -> type[nn.Module]:
    if kind not in RL_VISION_ENCODERS:
        raise ValueError(f"unknown policy.rl_vision.kind {kind!r}; valid kinds: {sorted(RL_VISION_ENCODERS)}")
    return RL_VISION_ENCODERS[kind]


def rl_vision_feature_dim(config: RLVisionConfig, camera_names: Sequence[str]) -> int:
    """F, the width of the features the encoder of ``config.kind`` makes."""
    return _encoder_class(config.kind).feature_dim(config, camera_names)


def build_rl_vision(config: RLVisionConfig, camera_names: Sequence[str], image_size: Sequence[int]) -> nn.Module:
    """``forward(images {camera: uint8 (B, H, W, 3)}) -> (B, F)``."""
    return _encoder_class(config.kind)(config, camera_names, image_size)
