"""Poolings of a CNN feature map that keep where things are (timm's global pools average it away).

``vision.global_pool`` names one of :data:`SPATIAL_POOLINGS` to use it; any other name goes to timm.

- ``spatial_softmax``: learned keypoints (Levine et al. 2016, "End-to-End Training of Deep
  Visuomotor Policies"; the ResNet encoder of Diffusion Policy / robomimic). A 1x1 convolution makes
  K keypoint maps; a softmax over each map's positions (with a learned temperature) gives an
  attention distribution, and the keypoint is its expected image coordinate in [-1, 1]. The
  features are ``(x_1, y_1, ..., x_K, y_K)``: localisation survives pooling, and the map can be as
  small as 2x2 because the expectation interpolates between positions.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class SpatialSoftmax(nn.Module):
    """``forward(features (N, C, h, w)) -> keypoints (N, 2K)``, ordered ``x_1, y_1, ..., x_K, y_K``.

    x grows to the right (width axis) and y downwards (height axis); a cell's coordinate is that of its
    centre with the map spanning [-1, 1]: ``(2 i + 1) / w - 1`` (a 1x1 map gives 0, a 2x2 one +-0.5).

    Args:
        in_channels: C, channels of the feature map.
        num_keypoints: K; 0 uses the C channels themselves as keypoint maps (no projection).
        standardize: standardise each keypoint map over its positions before the softmax, so that the
            learned temperature alone sets how sharp the attention is. A freshly initialised network's
            maps vary by a few hundredths across positions: without this its keypoints all sit at the
            image centre and barely move with the image.
        init_temperature: the softmax temperature before training.
    """

    def __init__(
        self, in_channels: int, num_keypoints: int, standardize: bool = False, init_temperature: float = 1.0
    ) -> None:
        super().__init__()
        if num_keypoints < 0:
            raise ValueError(f"vision.num_keypoints must be >= 0 (0: one keypoint per channel), got {num_keypoints}")
        self.projection = nn.Conv2d(in_channels, num_keypoints, kernel_size=1) if num_keypoints else nn.Identity()
        self.num_keypoints = num_keypoints or in_channels
        self.standardize = standardize
        # softmax(logits / temperature); log-parametrised so that it stays positive. Shape (1,), not a
        # scalar: FSDP2's fully_shard refuses scalar parameters.
        if init_temperature <= 0:
            raise ValueError(f"spatial softmax: init_temperature={init_temperature} must be > 0")
        self.log_temperature = nn.Parameter(torch.full((1,), math.log(init_temperature)))
        self.output_dim = 2 * self.num_keypoints

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if features.dim() != 4:
            raise ValueError(
                f"spatial_softmax pooling needs a CNN feature map (N, C, h, w), got shape {tuple(features.shape)}; "
                f"use a CNN backbone or a timm pooling (vision.global_pool: avg, token, ...) for a ViT"
            )
        maps = self.projection(features)
        batch, keypoints, height, width = maps.shape
        logits = maps.flatten(2)  # (N, K, h*w)
        if self.standardize:
            logits = (logits - logits.mean(-1, keepdim=True)) / (logits.std(-1, keepdim=True) + 1e-5)
        attention = torch.softmax(logits / self.log_temperature.exp(), dim=-1)
        ys = (2 * torch.arange(height, device=maps.device, dtype=maps.dtype) + 1) / height - 1
        xs = (2 * torch.arange(width, device=maps.device, dtype=maps.dtype) + 1) / width - 1
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
        expected_x = attention @ grid_x.reshape(-1, 1)  # (N, K, 1)
        expected_y = attention @ grid_y.reshape(-1, 1)
        return torch.cat([expected_x, expected_y], dim=-1).reshape(batch, 2 * keypoints)


# name -> class(in_channels, num_keypoints) with ``output_dim``
SPATIAL_POOLINGS: dict[str, type[nn.Module]] = {"spatial_softmax": SpatialSoftmax}


def build_spatial_pooling(name: str, in_channels: int, num_keypoints: int) -> nn.Module | None:
    """The pooling registered as ``name``, or None when ``name`` is one of timm's own poolings."""
    pooling = SPATIAL_POOLINGS.get(name)
    return None if pooling is None else pooling(in_channels, num_keypoints)
