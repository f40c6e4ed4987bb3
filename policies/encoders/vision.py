"""Vision encoders: timm backbones (CNNs and ViTs) with FiLM, for one or several cameras.

Backbones are always built with ``pretrained=False`` (nothing is downloaded); a local
checkpoint file initialises them through timm's own loader, which drops a classifier
that the encoder does not use.

The default backbone is a narrow timm ``resnet10t`` (channels 16-32-64-128, stem width 16)
with ``GroupNorm1`` instead of BatchNorm: batch statistics would make the log-probability
of an action depend on the rest of the batch (PPO recomputes it on other mini-batches). It is small
enough for RL on a CPU; ``python -m policies.benchmark`` times it against others (docs/results.md).

ViT backbones need their image geometry in ``backbone_kwargs`` (e.g. ``{"img_size": 64,
"patch_size": 8}``); FiLM then goes into every transformer block.
"""

from __future__ import annotations

from pathlib import Path

import timm
import torch
from torch import nn

from policies.config import VisionConfig
from policies.encoders.film import FiLMLayers, install_film
from policies.encoders.spatial_pooling import SPATIAL_POOLINGS, build_spatial_pooling

DEFAULT_IMAGE_MEAN = (0.5, 0.5, 0.5)
DEFAULT_IMAGE_STD = (0.5, 0.5, 0.5)


def create_timm_backbone(config: VisionConfig) -> nn.Module:
    """A timm model without classifier: ``(N, 3, H, W)`` float -> pooled features ``(N, F)``.

    With a pooling of :data:`SPATIAL_POOLINGS` (``vision.global_pool``), timm does not pool: the model
    returns its final feature map ``(N, F, h, w)`` for that pooling.
    """
    kwargs = dict(config.backbone_kwargs)
    for key, value in kwargs.items():  # JSON turns tuples into lists; timm wants tuples
        if isinstance(value, list):
            kwargs[key] = tuple(value)
    checkpoint = config.checkpoint_path
    if checkpoint is not None and not Path(checkpoint).is_file():
        raise FileNotFoundError(
            f"vision.checkpoint_path {checkpoint!r} does not exist; give a local timm checkpoint "
            f"(.safetensors, .pth or .bin) or set it to null for random initialisation"
        )
    if checkpoint is not None:
        # With a local file, timm's loader reads only that file (no hub access).
        kwargs["pretrained_cfg_overlay"] = {"file": str(checkpoint)}
    if not timm.is_model(config.backbone):
        raise ValueError(f"unknown timm backbone {config.backbone!r} (vision.backbone); see timm.list_models()")
    try:
        return timm.create_model(
            config.backbone,
            pretrained=checkpoint is not None,
            num_classes=0,
            global_pool="" if config.global_pool in SPATIAL_POOLINGS else config.global_pool,
            **kwargs,
        )
    except RuntimeError as error:
        if checkpoint is None:
            raise
        raise RuntimeError(
            f"cannot load vision checkpoint {checkpoint!r} into timm model {config.backbone!r} "
            f"with {config.backbone_kwargs}: {error}"
        ) from error


class CameraBackbone(nn.Module):
    """One backbone (optionally FiLM-conditioned) and its pooling: uint8 images -> features.

    ``forward(images (N, H, W, 3) uint8, condition (N, E) or None) -> (N, F)``; FiLM modulates the
    backbone's stages, the pooling (timm's, or a spatial one) reads the last, modulated, feature map.
    """

    def __init__(self, config: VisionConfig, condition_dim: int | None) -> None:
        super().__init__()
        self.model = create_timm_backbone(config)
        self.pool = build_spatial_pooling(config.global_pool, self.model.num_features, config.num_keypoints)
        self.output_dim: int = self.model.num_features if self.pool is None else self.pool.output_dim
        pretrained_cfg = getattr(self.model, "pretrained_cfg", None) or {}
        mean = pretrained_cfg.get("mean", DEFAULT_IMAGE_MEAN)
        std = pretrained_cfg.get("std", DEFAULT_IMAGE_STD)
        self.register_buffer("image_mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("image_std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)
        self.film: FiLMLayers | None = install_film(self.model, condition_dim) if condition_dim else None

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 ``(N, H, W, 3)`` -> normalised float ``(N, 3, H, W)``."""
        pixels = images.permute(0, 3, 1, 2).to(self.image_mean.dtype) / 255.0
        return (pixels - self.image_mean) / self.image_std

    def forward(self, images: torch.Tensor, condition: torch.Tensor | None = None) -> torch.Tensor:
        pixels = self.preprocess(images)
        if self.film is None:
            features = self.model(pixels)
        elif condition is None:
            raise ValueError("this backbone is FiLM-conditioned: pass the language embedding (N, E)")
        else:
            with self.film.conditioned(condition):
                features = self.model(pixels)
        return features if self.pool is None else self.pool(features)


class VisionEncoder(nn.Module):
    """All cameras -> one feature vector.

    ``forward(images {camera: uint8 (B, H, W, 3)}, condition (B, E)) -> (B, num_cameras * F)``,
    cameras concatenated in ``camera_names`` order.

    Args:
        config: the vision config.
        camera_names: the cameras, in order.
        condition_dim: size of the language embedding FiLM conditions on (ignored without FiLM).
    """

    def __init__(self, config: VisionConfig, camera_names: tuple[str, ...], condition_dim: int) -> None:
        super().__init__()
        self.camera_names = tuple(camera_names)
        film_dim = condition_dim if config.film else None
        self.shared = config.shared_across_cameras
        if self.shared:
            self.backbone = CameraBackbone(config, film_dim)
            feature_dim = self.backbone.output_dim
        else:
            for name in self.camera_names:
                if "." in name or not name:
                    raise ValueError(f"camera name {name!r} cannot name a per-camera encoder; use shared encoders")
            self.backbones = nn.ModuleDict({name: CameraBackbone(config, film_dim) for name in self.camera_names})
            feature_dim = self.backbones[self.camera_names[0]].output_dim
        self.output_dim = feature_dim * len(self.camera_names)

    def forward(self, images: dict[str, torch.Tensor], condition: torch.Tensor) -> torch.Tensor:
        batch_size = condition.shape[0]
        if self.shared:
            # Cameras are stacked along the batch: row n * B + b is camera n of sample b.
            stacked = torch.cat([images[name] for name in self.camera_names], dim=0)
            features = self.backbone(stacked, condition.repeat(len(self.camera_names), 1))
            return features.view(len(self.camera_names), batch_size, -1).transpose(0, 1).reshape(batch_size, -1)
        return torch.cat([self.backbones[name](images[name], condition) for name in self.camera_names], dim=-1)
