from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from policies.config import (
    HeadConfig,
    LanguageConfig,
    PolicyConfig,
    RLVisionConfig,
    StateConfig,
    ValueConfig,
    VisionConfig,
)
from policies.heads import HEADS
from policies.heads.gaussian import GaussianHead
from policies.normalization import MissingStatisticsError, compute_stats
from policies.vla import REPLAY_PREFIX, VLAPolicy

IMAGE_SIZE = 32
HEAD_OPTIONS = {
    "gaussian": {"hidden_dim": 32},
    "diffusion": {"hidden_dim": 32, "num_blocks": 1, "time_embedding_dim": 8, "num_train_timesteps": 20,
                  "num_inference_steps": 4},
    "flow": {"hidden_dim": 32, "num_blocks": 1, "time_embedding_dim": 8, "num_inference_steps": 4},
}


def tiny_spec() -> SimpleNamespace:
    """Duck-typed env spec, as the trainer passes it."""
    return SimpleNamespace(
        camera_names=("front", "wrist"),
        image_size=(IMAGE_SIZE, IMAGE_SIZE),
        state_dim=3,
        action_low=(-1.0, -2.0),
        action_high=(1.0, 0.5),
        action_dim=2,
    )


def tiny_config(head: str = "gaussian", **overrides) -> PolicyConfig:
    config = PolicyConfig(
        vision=VisionConfig(
            backbone="resnet10t",
            backbone_kwargs={"channels": [8, 8, 16, 16], "stem_width": 8, "norm_layer": "groupnorm1"},
        ),
        language=LanguageConfig(kind="hashed_bow", embedding_dim=16, num_buckets=256),
        state=StateConfig(hidden_dims=[16], output_dim=16),
        head=HeadConfig(name=head, options=dict(HEAD_OPTIONS[head])),
        value=ValueConfig(hidden_dims=[32]),
        embedding_dim=32,
        chunk_size=3,
    )
    for key, value in overrides.items():
        setattr(config, key, value)
    return config


def tiny_stats() -> dict:
    rng = np.random.default_rng(0)
    return {
        "action": compute_stats(rng.uniform([-0.8, -1.5], [0.9, 0.4], size=(64, 2))),
        "state": compute_stats(rng.normal([0.5, -1.0, 2.0], [0.1, 1.0, 3.0], size=(64, 3))),
    }


def tiny_obs(batch: int = 4, seed: int = 0, numpy: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    images = {
        camera: rng.integers(0, 256, (batch, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8) for camera in ("front", "wrist")
    }
    state = rng.normal(size=(batch, 3)).astype(np.float32)
    instructions = [("pick up the cube", "open the drawer")[i % 2] for i in range(batch)]
    if numpy:
        return {"images": images, "state": state, "instruction": np.array(instructions)}
    return {
        "images": {k: torch.from_numpy(v) for k, v in images.items()},
        "state": torch.from_numpy(state),
        "instruction": instructions,
    }


@pytest.mark.parametrize("head", ["gaussian", "diffusion", "flow"])
def test_act_evaluate_log_prob_agree(head: str) -> None:
    torch.manual_seed(0)
    policy = VLAPolicy(tiny_config(head), tiny_spec(), tiny_stats())
    obs = tiny_obs()
    actions, extras = policy.act(obs, generator=torch.Generator().manual_seed(1))
    assert actions.shape == (4, 3, 2)
    assert extras["log_prob"].shape == (4, 3, 2) and extras["value"].shape == (4,)
    replay_keys = {key for key in extras if key.startswith(REPLAY_PREFIX)}
    assert (REPLAY_PREFIX + "chain" in replay_keys) == (head != "gaussian")  # what evaluate() replays
    assert REPLAY_PREFIX + "log_prob" not in replay_keys  # extras["log_prob"] is it, not stored twice
    stored = TensorDict(extras, batch_size=[4])  # as the rollout buffer stores them
    log_prob, entropy, value = policy.evaluate(obs, stored)
    assert (log_prob - extras["log_prob"]).abs().max() < 1e-5
    torch.testing.assert_close(value, extras["value"])
    # The PPO gradient reaches the head and, through the embedding, the vision backbone.
    (-log_prob.mean() + value.pow(2).mean()).backward()
    assert policy.encoder.vision.backbone.model.conv1[0].weight.grad.abs().sum() > 0


@pytest.mark.parametrize("head", ["gaussian", "flow", "residual with pixels"])
def test_a_sharded_policy_returns_no_views_for_fsdp2_to_warn_about(head: str) -> None:
    """FSDP2 hooks the tensors that a sharded module's forward methods return and warns when one is a view
    (an in-place op on it would drop the hook). The actor shards the policy: none of them may be a view."""
    from vla_rl.runtime.distributed import free_port, init_distributed, shutdown_distributed
    from vla_rl.runtime.fsdp import shard_model

    torch.manual_seed(0)
    if head == "residual with pixels":
        policy = residual_policy_with_rl_vision(RL_VISION_KINDS["pixels"])
    else:
        policy = VLAPolicy(tiny_config(head), tiny_spec(), tiny_stats())
    obs = tiny_obs()
    mesh = init_distributed(0, 1, "127.0.0.1", free_port(), torch.device("cpu"))
    try:
        model = shard_model(policy, mesh)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _, extras = model.act(obs, generator=torch.Generator().manual_seed(1))
            log_prob, _, value = model.evaluate(obs, TensorDict(extras, batch_size=[4]))
            (-log_prob.mean() + value.pow(2).mean() + model.value(obs).pow(2).mean()).backward()
    finally:
        shutdown_distributed()
    assert value.shape == (4,) and value._base is None


def test_actions_are_unnormalised_then_clipped() -> None:
    torch.manual_seed(0)
    stats = tiny_stats()
    policy = VLAPolicy(tiny_config(), tiny_spec(), stats)
    obs = tiny_obs(8)
    actions, extras = policy.act(obs, generator=torch.Generator().manual_seed(0))
    low, high = np.array(stats["action"]["min"]), np.array(stats["action"]["max"])
    expected = extras["action_normalized"].numpy() * (high - low) / 2 + (high + low) / 2  # min_max inverse
    expected = np.clip(expected, [-1.0, -2.0], [1.0, 0.5])
    np.testing.assert_allclose(actions.numpy(), expected, atol=1e-5)
    again, _ = policy.act(obs, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again, actions)  # same generator, same actions


def test_numpy_observations_match_tensors() -> None:
    torch.manual_seed(0)
    policy = VLAPolicy(tiny_config(), tiny_spec(), tiny_stats())
    from_numpy, _ = policy.act(tiny_obs(numpy=True), deterministic=True)
    from_tensor, _ = policy.act(tiny_obs(), deterministic=True)
    torch.testing.assert_close(from_numpy, from_tensor)


def test_read_only_arrays_are_copied_not_wrapped() -> None:
    """Arrays that arrive zero-copy from Ray's object store are read-only: the policy copies them (no
    PyTorch warning about non-writable memory, no tensor aliasing the store) and acts as on writable ones."""
    torch.manual_seed(0)
    policy = VLAPolicy(tiny_config(), tiny_spec(), tiny_stats())
    obs = tiny_obs(numpy=True)
    for array in (*obs["images"].values(), obs["state"]):
        array.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTorch's "not writable" warning would raise here
        images, state, _ = policy.prepare_observation(obs)
        from_read_only, _ = policy.act(obs, deterministic=True)
    assert not np.shares_memory(images["front"].numpy(), obs["images"]["front"])
    torch.testing.assert_close(images["front"], torch.from_numpy(obs["images"]["front"].copy()))
    from_writable, _ = policy.act(tiny_obs(numpy=True), deterministic=True)
    torch.testing.assert_close(from_read_only, from_writable)


def test_state_is_normalised_before_encoding() -> None:
    torch.manual_seed(0)
    stats = tiny_stats()
    policy = VLAPolicy(tiny_config(), tiny_spec(), stats)
    obs = tiny_obs(2)
    _, state, _ = policy.prepare_observation(obs)
    expected = (obs["state"].numpy() - np.array(stats["state"]["mean"])) / np.array(stats["state"]["std"])
    np.testing.assert_allclose(state.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_value_head_detach_input() -> None:
    torch.manual_seed(0)
    policy = VLAPolicy(tiny_config(value=ValueConfig(hidden_dims=[32], detach_input=True)), tiny_spec(), tiny_stats())
    policy.value(tiny_obs(2)).sum().backward()
    assert all(p.grad is None for p in policy.encoder.parameters())
    assert all(p.grad is not None for p in policy.value_head.parameters())


def test_bad_inputs_raise_with_names() -> None:
    policy = VLAPolicy(tiny_config(), tiny_spec(), tiny_stats())
    obs = tiny_obs(2)
    del obs["images"]["wrist"]
    with pytest.raises(KeyError, match="lacks camera 'wrist'"):
        policy.act(obs)
    obs = tiny_obs(2)
    obs["images"]["front"] = obs["images"]["front"].float()
    with pytest.raises(ValueError, match=r"images\['front'\] must be uint8"):
        policy.act(obs)
    with pytest.raises(ValueError, match=r"batch\['action'\] must be \(B, 3, 2\)"):
        policy.bc_loss({**tiny_obs(2), "action": torch.zeros(2, 4, 2)})
    stats = tiny_stats()
    del stats["action"]["max"]
    with pytest.raises(MissingStatisticsError, match="stats for 'action' lack 'max' needed by mode 'min_max'"):
        VLAPolicy(tiny_config(), tiny_spec(), stats)


@pytest.mark.parametrize("head", ["gaussian", "flow"])
def test_bc_loss_decreases(head: str) -> None:
    torch.manual_seed(0)
    stats = tiny_stats()
    policy = VLAPolicy(tiny_config(head), tiny_spec(), stats)
    obs = tiny_obs(8, seed=3)
    # Expert chunks depend on the instruction and on the state.
    rng = np.random.default_rng(4)
    direction = np.array([[0.6, -1.2], [-0.5, 0.2]])[np.arange(8) % 2]
    actions = direction[:, None, :] + 0.1 * obs["state"].numpy()[:, None, :2] + 0.01 * rng.normal(size=(8, 3, 2))
    mask = torch.ones(8, 3, dtype=torch.bool)
    mask[0, 2] = False
    batch = {**obs, "action": torch.tensor(actions, dtype=torch.float32), "action_mask": mask}
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        loss = policy.bc_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5]), losses


def test_policy_benchmark_reports_rates_per_head() -> None:
    from policies.benchmark import run_policy_benchmark

    result = run_policy_benchmark(batch_size=2, heads=("gaussian",), repeats=1)
    assert result["batch_size"] == 2 and set(result["heads"]) == {"gaussian"}
    rates = result["heads"]["gaussian"]
    for key in ("inference_chunks_per_s", "ppo_train_samples_per_s", "bc_train_samples_per_s"):
        assert np.isfinite(rates[key]) and rates[key] > 0
    assert result["vision"]["parameters"] < rates["parameters"]
    frozen_flow = result["flow_residual_update"]
    assert set(frozen_flow["ppo_train_samples_per_s"]) == {
        "reencode_images", "stored_embedding", "stored_embedding_and_rl_vision", "stored_embedding_and_rl_pixels",
    }  # fmt: skip
    assert frozen_flow["ratio_to_reencoding"]["reencode_images"] == 1.0
    assert all(np.isfinite(rate) and rate > 0 for rate in frozen_flow["ppo_train_samples_per_s"].values())


def test_vit_backbone_with_per_camera_encoders() -> None:
    torch.manual_seed(0)
    vision = VisionConfig(
        backbone="vit_tiny_patch16_224",
        backbone_kwargs={"img_size": IMAGE_SIZE, "patch_size": 8, "depth": 1, "embed_dim": 16, "num_heads": 2},
        shared_across_cameras=False,
    )
    policy = VLAPolicy(tiny_config(vision=vision), tiny_spec(), tiny_stats())
    assert set(policy.encoder.vision.backbones) == {"front", "wrist"}
    obs = tiny_obs()
    _, extras = policy.act(obs, generator=torch.Generator().manual_seed(0))
    log_prob, _, _ = policy.evaluate(obs, extras)
    assert (log_prob - extras["log_prob"]).abs().max() < 1e-5
    log_prob.sum().backward()
    film_grads = [layer.projection.weight.grad for layer in policy.encoder.vision.backbones["wrist"].film]
    assert all(grad is not None and grad.abs().sum() > 0 for grad in film_grads)


@pytest.mark.parametrize("enabled", [True, False])
def test_state_can_be_left_out_of_the_policy(enabled: bool) -> None:
    torch.manual_seed(0)
    config = tiny_config(state=StateConfig(hidden_dims=[16], output_dim=16, enabled=enabled))
    policy = VLAPolicy(config, tiny_spec(), tiny_stats())
    obs = tiny_obs()
    moved = dict(obs, state=obs["state"] + 5.0)
    with torch.no_grad():
        same = torch.equal(policy.embed(obs), policy.embed(moved))
    assert same is not enabled
    has_state_weights = any(name.startswith("encoder.state.") for name, _ in policy.named_parameters())
    assert has_state_weights is enabled


FROZEN_FLOW_OPTIONS = {"base": {"name": "flow", "options": HEAD_OPTIONS["flow"]}, "hidden_dim": 16}


@pytest.mark.parametrize(
    ("head", "detach_value", "cached"),
    [("residual", True, True), ("residual", False, False), ("steered", True, True), ("flow", True, False)],
)
def test_act_stores_the_embedding_only_when_rl_cannot_move_the_encoders_and_evaluate_reuses_it(
    head, detach_value, cached
) -> None:
    options = dict(FROZEN_FLOW_OPTIONS) if head in ("residual", "steered") else dict(HEAD_OPTIONS["flow"])
    config = tiny_config("flow")
    config.head = HeadConfig(name=head, options=options)
    config.value = ValueConfig(hidden_dims=[32], detach_input=detach_value)
    torch.manual_seed(0)
    policy = VLAPolicy(config, tiny_spec(), tiny_stats())
    obs = tiny_obs()
    _, extras = policy.act(obs, generator=torch.Generator().manual_seed(1))
    assert policy.rl_moves_encoders is not cached
    assert ("embedding" in extras) is cached
    if cached:
        expected = policy.evaluate(obs, {k: v for k, v in extras.items() if k != "embedding"})
        torch.testing.assert_close(extras["embedding"], policy.embed(obs), rtol=0, atol=0)
        calls = []
        policy.encoder.register_forward_hook(lambda *_: calls.append(1))
        log_prob, _, value = policy.evaluate(obs, extras)
        assert calls == []  # the encoders did not run
        torch.testing.assert_close(log_prob, expected[0], rtol=0, atol=0)
        torch.testing.assert_close(value, expected[2], rtol=0, atol=0)
        torch.testing.assert_close(log_prob, extras["log_prob"], rtol=1e-5, atol=1e-5)


RL_VISION_KINDS = {
    "keypoints": RLVisionConfig(enabled=True, channels=[4, 8], num_keypoints=3, downsample=2),
    "pixels": RLVisionConfig(enabled=True, kind="pixels", downsample=4, feature_dim=6),
}


def residual_policy_with_rl_vision(rl_vision: RLVisionConfig) -> VLAPolicy:
    config = tiny_config("flow")
    config.head = HeadConfig(name="residual", options=dict(FROZEN_FLOW_OPTIONS))
    config.value = ValueConfig(hidden_dims=[32], detach_input=True)
    config.rl_vision = rl_vision
    torch.manual_seed(0)
    policy = VLAPolicy(config, tiny_spec(), tiny_stats())
    with torch.no_grad():  # the zero-initialised last layer would hide the gradient of the layers below
        policy.head.residual.mean_network[-1].weight.normal_()
    return policy


@pytest.mark.parametrize("kind", sorted(RL_VISION_KINDS))
def test_rl_vision_trains_in_rl_only_and_the_update_reuses_the_embedding_around_it(kind: str) -> None:
    policy = residual_policy_with_rl_vision(RL_VISION_KINDS[kind])
    obs = tiny_obs()
    _, extras = policy.act(obs, generator=torch.Generator().manual_seed(1))
    assert "embedding" in extras and not policy.rl_moves_encoders
    _, features = policy.encode(obs)
    assert features.shape == (4, 2 * 2 * 3 if kind == "keypoints" else 6)  # keypoints: 2 cameras x 3 x (x, y)
    calls = []
    policy.encoder.register_forward_hook(lambda *_: calls.append(1))
    log_prob, _, value = policy.evaluate(obs, extras)
    assert calls == []
    torch.testing.assert_close(log_prob, extras["log_prob"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(value, extras["value"], rtol=1e-5, atol=1e-5)
    (log_prob.sum() + value.sum()).backward()
    moved = {name.split(".")[0] for name, p in policy.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert moved == {"head", "value_head", "rl_vision"}
    assert all(p.grad is None for p in policy.head.base.denoiser.parameters())
    policy.zero_grad(set_to_none=True)
    batch = tiny_obs()
    batch["action"] = torch.zeros(4, 3, 2)
    policy.bc_loss(batch).backward()  # SFT never reads the RL-only encoder
    assert all(p.grad is None for p in policy.rl_vision.parameters())


def test_keypoints_are_image_coordinates_of_their_own_camera() -> None:
    policy = residual_policy_with_rl_vision(RL_VISION_KINDS["keypoints"])
    obs = tiny_obs()
    # a different wrist image changes only the wrist keypoints (x, y of 3 keypoints per camera)
    changed = tiny_obs()
    changed["images"]["wrist"] = torch.flip(changed["images"]["wrist"], dims=[2])
    with torch.no_grad():
        _, before = policy.encode(obs)
        _, after = policy.encode(changed)
    assert before.abs().max() <= 1
    assert torch.equal(before[:, :6], after[:, :6]) and not torch.equal(before[:, 6:], after[:, 6:])


def test_rl_vision_needs_a_head_that_reads_it(monkeypatch) -> None:
    # every built-in head reads them: a plug-in head that reads none
    monkeypatch.setitem(HEADS, "no_features", type("NoFeatures", (GaussianHead,), {"reads_rl_features": False}))
    config = tiny_config("gaussian")
    config.head = HeadConfig(name="no_features", options=dict(HEAD_OPTIONS["gaussian"]))
    config.rl_vision = RLVisionConfig(enabled=True)
    with pytest.raises(ValueError, match="'no_features' does not read RL-only features"):
        VLAPolicy(config, tiny_spec(), tiny_stats())
    with pytest.raises(ValueError, match="rl_vision.downsample"):
        PolicyConfig.from_dict({"rl_vision": {"downsample": 0}})


@pytest.mark.parametrize("kind", sorted(RL_VISION_KINDS))
def test_rl_vision_is_saved_and_loaded_with_the_policy(tmp_path, kind: str) -> None:
    policy = residual_policy_with_rl_vision(RL_VISION_KINDS[kind])
    with torch.no_grad():
        for parameter in policy.rl_vision.parameters():
            parameter.add_(0.1)
    loaded = VLAPolicy.from_pretrained(policy.save_pretrained(tmp_path / "policy"))
    assert loaded.config.rl_vision == policy.config.rl_vision
    obs = tiny_obs()
    torch.testing.assert_close(loaded.act(obs, deterministic=True)[0], policy.act(obs, deterministic=True)[0])
    torch.testing.assert_close(loaded.encode(obs)[1], policy.encode(obs)[1], rtol=0, atol=0)
