"""A pixel encoder that only RL trains: camera images, average-pooled small, through one linear layer.

The cheapest RL-only vision branch (``policy.rl_vision.kind=pixels``). Where the keypoint CNN
(:mod:`policies.encoders.keypoints`) has to learn to find the objects, coarse pixels already say where
they are: right after reset, a linear probe of both cameras average-pooled to 16x16 locates the target
block to 0.50 cm (reach) and 0.46 cm (lift), against 1.42 and 2.15 cm from the few-shot SFT embedding
and 2.23 and 2.43 cm from the block's mean position (``research/probe_embedding.py``; README, Results).
A learned linear map of the pooled pixels of every camera, layer-normalised so
that its scale matches whatever it is concatenated with, gives the residual policy and the critic that
information at the cost of one matrix product: nothing convolves in the PPO update.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from policies.config import RLVisionConfig


def pooled_pixels(images: dict[str, torch.Tensor], camera_names: Sequence[str], downsample: int) -> torch.Tensor:
    """``(B, num_cameras * 3 * H/d * W/d)``: each camera's uint8 ``(B, H, W, 3)`` image average-pooled by
    ``downsample`` (d), scaled to [-1, 1], channel-first and flattened; cameras in ``camera_names`` order."""
    pooled = [
        nn.functional.avg_pool2d(images[name].permute(0, 3, 1, 2).float() / 127.5 - 1.0, downsample)
        for name in camera_names
    ]
    return torch.cat([p.flatten(1) for p in pooled], dim=1)


class PixelEncoder(nn.Module):
    """``forward(images {camera: uint8 (B, H, W, 3)}) -> (B, feature_dim)``.

    Each camera's image is average-pooled by ``config.downsample`` to ``(H/d, W/d, 3)`` (H and W must be
    multiples of d), scaled to [-1, 1] and flattened; the cameras' pixels, in ``camera_names`` order,
    go through ``Linear -> LayerNorm``.
    """

    def __init__(self, config: RLVisionConfig, camera_names: Sequence[str], image_size: Sequence[int]) -> None:
        super().__init__()
        self.camera_names = tuple(camera_names)
        height, width = (int(v) for v in image_size)
        if height % config.downsample or width % config.downsample:
            raise ValueError(
                f"rl_vision.downsample={config.downsample} must divide the image size {height}x{width}; "
                "choose a divisor of both"
            )
        self.downsample = config.downsample
        pixels = len(self.camera_names) * 3 * (height // config.downsample) * (width // config.downsample)
        self.projection = nn.Linear(pixels, config.feature_dim)
        self.norm = nn.LayerNorm(config.feature_dim)
        self.output_dim = config.feature_dim

    @staticmethod
    def feature_dim(config: RLVisionConfig, camera_names: Sequence[str]) -> int:
        """The width of the output, known before the encoder is built."""
        return config.feature_dim

    def pooled_pixels(self, images: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(B, num_cameras * 3 * H/d * W/d)`` pooled pixels in [-1, 1] (:func:`pooled_pixels`)."""
        return pooled_pixels(images, self.camera_names, self.downsample)

    def forward(self, images: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.norm(self.projection(self.pooled_pixels(images)))
