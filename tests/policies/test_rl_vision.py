"""The RL-only vision encoders: the pooled-pixel encoder against an independent computation, the registry."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from policies.config import PolicyConfig, RLVisionConfig
from policies.encoders.keypoints import KeypointEncoder
from policies.encoders.pixels import PixelEncoder
from policies.encoders.rl_vision import build_rl_vision, rl_vision_feature_dim

CAMERAS = ("front", "wrist")


def random_images(batch: int, size: int, seed: int = 0) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    return {name: torch.from_numpy(rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8)) for name in CAMERAS}


def test_pixel_features_match_a_numpy_computation() -> None:
    config = RLVisionConfig(enabled=True, kind="pixels", downsample=4, feature_dim=5)
    torch.manual_seed(0)
    encoder = PixelEncoder(config, CAMERAS, (16, 16))
    images = random_images(3, 16)
    # block means of 4x4 pixels, channel-first, cameras in order, each scaled to [-1, 1]
    pooled = []
    for name in CAMERAS:
        pixels = images[name].numpy().astype(np.float64) / 127.5 - 1.0  # (B, 16, 16, 3)
        blocks = pixels.reshape(3, 4, 4, 4, 4, 3).mean(axis=(2, 4))  # (B, 4, 4, 3)
        pooled.append(blocks.transpose(0, 3, 1, 2).reshape(3, -1))
    pooled = np.concatenate(pooled, axis=1)
    np.testing.assert_allclose(encoder.pooled_pixels(images).numpy(), pooled, atol=1e-6)
    weight = encoder.projection.weight.detach().double().numpy()
    bias = encoder.projection.bias.detach().double().numpy()
    projected = pooled @ weight.T + bias
    expected = (projected - projected.mean(1, keepdims=True)) / np.sqrt(projected.var(1, keepdims=True) + 1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(encoder(images).numpy(), expected, atol=1e-4)


def test_pixel_features_see_a_moved_object_in_one_camera() -> None:
    config = RLVisionConfig(enabled=True, kind="pixels", downsample=4, feature_dim=8)
    encoder = PixelEncoder(config, CAMERAS, (16, 16))
    images = {name: torch.zeros(1, 16, 16, 3, dtype=torch.uint8) for name in CAMERAS}
    images["front"][0, 0:4, 0:4] = 255  # a white square in the top-left block
    moved = {name: image.clone() for name, image in images.items()}
    moved["front"] = torch.roll(moved["front"], shifts=4, dims=2)  # one block to the right
    pooled, pooled_moved = encoder.pooled_pixels(images), encoder.pooled_pixels(moved)
    changed = (pooled != pooled_moved).nonzero()[:, 1]
    assert changed.numel() == 2 * 3 and changed.max() < 3 * 4 * 4  # two front-camera blocks, 3 channels each
    with torch.no_grad():
        assert not torch.allclose(encoder(images), encoder(moved))


def test_registry_builds_each_kind_with_the_width_it_announces() -> None:
    images = random_images(2, 16)
    for config in (RLVisionConfig(enabled=True, kind="pixels", downsample=2, feature_dim=7),
                   RLVisionConfig(enabled=True, kind="keypoints", channels=[4, 8], num_keypoints=3)):  # fmt: skip
        encoder = build_rl_vision(config, CAMERAS, (16, 16))
        assert isinstance(encoder, {"pixels": PixelEncoder, "keypoints": KeypointEncoder}[config.kind])
        with torch.no_grad():
            assert encoder(images).shape == (2, rl_vision_feature_dim(config, CAMERAS))


def test_bad_rl_vision_settings_name_the_key() -> None:
    with pytest.raises(ValueError, match="unknown policy.rl_vision.kind 'edges'.*'keypoints', 'pixels'"):
        rl_vision_feature_dim(RLVisionConfig(kind="edges"), CAMERAS)
    with pytest.raises(ValueError, match="rl_vision.downsample=3 must divide the image size 16x16"):
        build_rl_vision(RLVisionConfig(kind="pixels", downsample=3), CAMERAS, (16, 16))
    with pytest.raises(ValueError, match="rl_vision.feature_dim"):
        PolicyConfig.from_dict({"rl_vision": {"feature_dim": 0}})
