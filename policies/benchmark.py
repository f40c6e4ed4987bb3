"""Speed of the default policy on this machine: ``python -m policies.benchmark`` prints one JSON object.

For each head: inference action chunks per second (``act``, sampling mode) and training samples
per second (one PPO-style update: ``evaluate`` + clipped-ratio and value loss + backward + Adam;
and one behaviour-cloning update), at the given batch size, on observations shaped like the
built-in tabletop suite (two 64x64 cameras "front" and "wrist", 9 state dims, 4 action dims).
Also the vision backbone alone: parameters and forward / forward+backward milliseconds; and, side by
side, the PPO update of the default experiment's residual head in three settings: the critic training the
encoders (the update re-encodes the images), fixed encoders (the update reuses the stored embedding),
fixed encoders plus the RL-only keypoint CNN (``policy.rl_vision``, recomputed in every update), and
fixed encoders plus the RL-only pooled pixels (``policy.rl_vision.kind=pixels``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from policies.config import HeadConfig, PolicyConfig, PolicyIOSpec, RLVisionConfig, ValueConfig
from policies.normalization import compute_stats
from policies.vla import VLAPolicy

BENCHMARK_SPEC = PolicyIOSpec(
    camera_names=("front", "wrist"),
    image_size=(64, 64),
    state_dim=9,
    action_low=(-1.0, -1.0, -1.0, -1.0),
    action_high=(1.0, 1.0, 1.0, 1.0),
)


def benchmark_stats(spec: PolicyIOSpec) -> dict[str, dict[str, list[float]]]:
    rng = np.random.default_rng(0)
    return {
        "action": compute_stats(rng.uniform(spec.action_low, spec.action_high, size=(256, spec.action_dim))),
        "state": compute_stats(rng.normal(size=(256, spec.state_dim))),
    }


def benchmark_observation(spec: PolicyIOSpec, batch_size: int, seed: int = 0) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(seed)
    height, width = spec.image_size
    return {
        "images": {
            camera: torch.randint(0, 256, (batch_size, height, width, 3), dtype=torch.uint8, generator=generator)
            for camera in spec.camera_names
        },
        "state": torch.randn(batch_size, spec.state_dim, generator=generator),
        "instruction": [("pick up the red cube", "push the blue block left")[i % 2] for i in range(batch_size)],
    }


def _seconds_per_call(function: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """Median seconds of one call (the median shrugs off other processes on a shared CPU)."""
    for _ in range(warmup):
        function()
    durations = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        durations.append(time.perf_counter() - start)
    return float(np.median(durations))


def _count(module: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in module.parameters())


def benchmark_head(head: str, batch_size: int, repeats: int, config: PolicyConfig | None = None) -> dict[str, Any]:
    """Rates for one head of the default policy."""
    torch.manual_seed(0)
    config = config or PolicyConfig()
    config.head = HeadConfig(name=head, options=dict(config.head.options) if config.head.name == head else {})
    policy = VLAPolicy(config, BENCHMARK_SPEC, benchmark_stats(BENCHMARK_SPEC))
    obs = benchmark_observation(BENCHMARK_SPEC, batch_size)
    act_seconds = _seconds_per_call(lambda: policy.act(obs), repeats)
    _, extras = policy.act(obs)
    advantages = torch.randn(batch_size)
    returns = torch.randn(batch_size)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-4)

    def ppo_update() -> None:
        log_prob, _, value = policy.evaluate(obs, extras)
        ratio = torch.exp(log_prob.sum((-2, -1)) - extras["log_prob"].sum((-2, -1)))
        surrogate = torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages)
        loss = -surrogate.mean() + 0.5 * (value - returns).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    batch = {**obs, "action": torch.rand(batch_size, config.chunk_size, BENCHMARK_SPEC.action_dim) * 2 - 1}

    def bc_update() -> None:
        loss = policy.bc_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    ppo_seconds = _seconds_per_call(ppo_update, repeats)
    bc_seconds = _seconds_per_call(bc_update, repeats)
    return {
        "parameters": _count(policy),
        "head_parameters": _count(policy.head),
        "inference_chunks_per_s": round(batch_size / act_seconds, 1),
        "ppo_train_samples_per_s": round(batch_size / ppo_seconds, 1),
        "bc_train_samples_per_s": round(batch_size / bc_seconds, 1),
    }


def benchmark_vision(batch_size: int, repeats: int, config: PolicyConfig | None = None) -> dict[str, Any]:
    """The default vision encoder alone (all cameras, FiLM on): parameters and milliseconds."""
    torch.manual_seed(0)
    config = config or PolicyConfig()
    policy = VLAPolicy(config, BENCHMARK_SPEC, benchmark_stats(BENCHMARK_SPEC))
    vision = policy.encoder.vision
    images = benchmark_observation(BENCHMARK_SPEC, batch_size)["images"]
    condition = torch.randn(batch_size, policy.encoder.language.output_dim)
    with torch.no_grad():
        forward = _seconds_per_call(lambda: vision(images, condition), repeats)
    forward_backward = _seconds_per_call(lambda: vision(images, condition).sum().backward(), repeats)
    return {
        "backbone": config.vision.backbone,
        "backbone_kwargs": config.vision.backbone_kwargs,
        "parameters": _count(vision),
        "cameras": len(BENCHMARK_SPEC.camera_names),
        "image_size": list(BENCHMARK_SPEC.image_size),
        "forward_ms": round(1000 * forward, 1),
        "forward_backward_ms": round(1000 * forward_backward, 1),
    }


def benchmark_frozen_flow_updates(batch_size: int, repeats: int) -> dict[str, Any]:
    """PPO training samples/s of the residual flow head: re-encoding, stored embedding, + RL-only keypoints or pixels."""
    settings = {
        "reencode_images": (False, RLVisionConfig()),
        "stored_embedding": (True, RLVisionConfig()),
        "stored_embedding_and_rl_vision": (True, RLVisionConfig(enabled=True)),
        "stored_embedding_and_rl_pixels": (True, RLVisionConfig(enabled=True, kind="pixels", downsample=4)),
    }
    rates = {}
    for name, (detach_value, rl_vision) in settings.items():
        config = PolicyConfig(value=ValueConfig(detach_input=detach_value), rl_vision=rl_vision)
        config.head = HeadConfig(name="residual", options={"base": {"name": "flow", "options": {}}})
        rates[name] = benchmark_head("residual", batch_size, repeats, config)["ppo_train_samples_per_s"]
    return {"ppo_train_samples_per_s": rates,
            "ratio_to_reencoding": {name: round(rate / rates["reencode_images"], 2) for name, rate in rates.items()}}


def run_policy_benchmark(
    batch_size: int = 32, heads: Sequence[str] = ("gaussian", "diffusion", "flow"), repeats: int = 5
) -> dict[str, Any]:
    """Inference chunks/s and training samples/s of the default policy for each head."""
    return {
        "batch_size": batch_size,
        "torch_threads": torch.get_num_threads(),
        "vision": benchmark_vision(batch_size, repeats),
        "heads": {head: benchmark_head(head, batch_size, repeats) for head in heads},
        "flow_residual_update": benchmark_frozen_flow_updates(batch_size, repeats),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--heads", nargs="+", default=["gaussian", "diffusion", "flow"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(json.dumps(run_policy_benchmark(args.batch_size, tuple(args.heads), args.repeats)))


if __name__ == "__main__":
    main()
