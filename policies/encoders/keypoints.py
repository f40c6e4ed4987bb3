"""A small keypoint encoder that only RL trains: camera images -> image coordinates of learned keypoints.

Few-shot SFT leaves the main encoders blind to where the objects are: with 10 demonstrations per task a
linear probe reads the target block's position from the SFT embedding no better than its mean position
(README, Results). RL heads that keep the SFT flow frozen (the residual head) cannot fix this by training
the shared encoders, because the flow reads them too. This encoder is a separate branch for them: a
two-layer CNN per camera, on images average-pooled by ``downsample``, ending in a spatial softmax over
standardised maps (:class:`~policies.encoders.spatial_pooling.SpatialSoftmax`, Levine et al. 2016), so that its features
are image coordinates, the quantity a correction of the arm's motion needs. Nothing else reads it: SFT
never computes it, and training it in RL cannot move the frozen flow.

Cost on the project's 2-core CPU (``vla-rl bench policy``, ``flow_residual_update``; batch 32, two 64x64
cameras): a PPO update of the residual head trains 837 samples/s with these keypoints, 5,424 without
them (the stored embedding only), and 251 when it re-encodes the images with the main encoders.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from policies.config import RLVisionConfig
from policies.encoders.spatial_pooling import SpatialSoftmax


class CameraKeypoints(nn.Module):
    """``forward(images (N, H, W, 3) uint8) -> keypoints (N, 2K)`` in [-1, 1], ordered x_1, y_1, ..., x_K, y_K."""

    def __init__(self, config: RLVisionConfig) -> None:
        super().__init__()
        first, second = config.channels
        self.downsample = nn.AvgPool2d(config.downsample) if config.downsample > 1 else nn.Identity()
        # GroupNorm, not BatchNorm: a sample's log-prob must not depend on the rest of its batch.
        self.features = nn.Sequential(
            nn.Conv2d(3, first, kernel_size=3, stride=2, padding=1),
            nn.GroupNorm(1, first),
            nn.GELU(),
            nn.Conv2d(first, second, kernel_size=3, padding=1),
            nn.GroupNorm(1, second),
            nn.GELU(),
        )
        # On standardised maps a temperature of 0.1 puts a quarter to a half of each keypoint's attention on
        # its strongest cell at initialisation (1.0 would spread it over the whole map).
        self.keypoints = SpatialSoftmax(second, config.num_keypoints, standardize=True, init_temperature=0.1)
        self.output_dim = self.keypoints.output_dim

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        pixels = images.permute(0, 3, 1, 2).float() / 127.5 - 1.0
        return self.keypoints(self.features(self.downsample(pixels)))


class KeypointEncoder(nn.Module):
    """``forward(images {camera: uint8 (B, H, W, 3)}) -> (B, num_cameras * 2K)``, cameras in ``camera_names`` order.

    One network per camera: the views differ (front: where things are on the table; wrist: where they are
    relative to the gripper), and the cost is the same as one shared network.
    """

    def __init__(
        self, config: RLVisionConfig, camera_names: Sequence[str], image_size: Sequence[int] | None = None
    ) -> None:
        super().__init__()  # image_size: unused (the spatial softmax works at any size); the registry passes it
        self.camera_names = tuple(camera_names)
        for name in self.camera_names:
            if "." in name or not name:
                raise ValueError(f"camera name {name!r} cannot name a module; rename the camera in the env spec")
        self.cameras = nn.ModuleDict({name: CameraKeypoints(config) for name in self.camera_names})
        self.output_dim = self.feature_dim(config, self.camera_names)

    @staticmethod
    def feature_dim(config: RLVisionConfig, camera_names: Sequence[str]) -> int:
        """The width of the output, known before the encoder is built: (x, y) of each keypoint of each camera."""
        return 2 * config.num_keypoints * len(camera_names)

    def forward(self, images: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([self.cameras[name](images[name]) for name in self.camera_names], dim=-1)
