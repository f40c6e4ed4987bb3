"""Speed of the VLM-backbone policy (frozen, LoRA, full) and of the two VLA families (action tokens, action expert;
LoRA) side by side with the compact FiLM policy.

``vla-rl bench policy --vlm`` prints one JSON object. For each policy, on observations shaped like the tabletop
suite's (two 64x64 cameras, 9 state dims, 4 action dims) with the gaussian head: inference chunks per second
(``act``), PPO training samples per second (``evaluate`` + clipped surrogate and value loss + backward + Adam),
each as the median and range over ``repeats`` timed calls; trainable and total parameters; and the weight sync of
an RL iteration after the first (``vla_rl.workers.weight_sync``): the bytes that travel and the seconds to
serialise, deserialise and load them into the rollout worker's copy, next to those of syncing every weight.
The VLM is a random model written by :func:`policies.backbones.tiny.write_tiny_vlm` (its size set by
``hidden_size`` and ``num_layers``): the numbers measure the machinery, not a pretrained model's quality.
"""

from __future__ import annotations

import io
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from policies.backbones.tiny import write_tiny_vlm
from policies.benchmark import BENCHMARK_SPEC, _observation, _synthetic_stats
from policies.factory import build_from_factory

COMPACT = ("policies.vla:build_policy", {"head": {"name": "gaussian", "options": {}}})
VLM_FACTORY = "policies.backbones.vlm_policy:build_policy"
#: The VLA families (``policies.backbones.token_vla``, ``policies.backbones.expert_vla``) as their experiments set
#: them: parallel decoding of 256-bin tokens; a flow expert with 5 Euler steps, Flow-SDE.
FAMILIES = {
    "token_vla_lora": ("policies.backbones.token_vla:build_policy", {"tokens": {"temperature": 1.6}}),
    "expert_vla_lora": ("policies.backbones.expert_vla:build_policy", {"flow": {"num_inference_steps": 5}}),
}


def timed(function: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Seconds of one call: median, min and max over ``repeats`` calls after one warm-up call."""
    function()
    durations = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        durations.append(time.perf_counter() - start)
    return {"median": round(float(np.median(durations)), 5), "min": round(min(durations), 5),
            "max": round(max(durations), 5)}


def rate(batch_size: int, seconds: dict[str, float]) -> dict[str, float]:
    """Items per second: the median and the range (the fastest call gives the max)."""
    return {"median": round(batch_size / seconds["median"], 1), "min": round(batch_size / seconds["max"], 1),
            "max": round(batch_size / seconds["min"], 1)}  # fmt: skip


def sync_cost(policy: torch.nn.Module, repeats: int) -> dict[str, Any]:
    """Bytes and seconds of syncing every weight vs what training changes (serialise, load into a copy)."""
    from vla_rl.workers.weight_sync import changing_keys, num_bytes, select

    weights = {key: value.detach().clone() for key, value in policy.state_dict().items()}
    parts = {"all_weights": weights, "changing_only": select(weights, changing_keys(policy))}

    def sync(part: dict[str, torch.Tensor]) -> None:
        buffer = io.BytesIO()
        torch.save(part, buffer)
        buffer.seek(0)
        policy.load_state_dict(torch.load(buffer, weights_only=True), strict=False)

    result = {name: {"megabytes": round(num_bytes(part) / 2**20, 3), "seconds": timed(lambda p=part: sync(p), repeats)}
              for name, part in parts.items()}  # fmt: skip
    result["bytes_ratio"] = round(num_bytes(parts["changing_only"]) / num_bytes(weights), 4)
    return result


def measure(factory: str, config: dict[str, Any], batch_size: int, repeats: int) -> dict[str, Any]:
    torch.manual_seed(0)
    policy = build_from_factory(factory, config, BENCHMARK_SPEC.to_dict(), _synthetic_stats(BENCHMARK_SPEC))
    obs = _observation(BENCHMARK_SPEC, batch_size)
    act = timed(lambda: policy.act(obs), repeats)
    _, extras = policy.act(obs)
    advantages, returns = torch.randn(batch_size), torch.randn(batch_size)
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-5)

    def ppo_update() -> None:
        log_prob, _, value = policy.evaluate(obs, extras)
        ratio = torch.exp(log_prob.sum((-2, -1)) - extras["log_prob"].sum((-2, -1)))
        surrogate = torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages)
        loss = -surrogate.mean() + 0.5 * (value - returns).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    update = timed(ppo_update, repeats)
    return {
        "parameters": sum(p.numel() for p in policy.parameters()),
        "trainable_parameters": sum(p.numel() for p in policy.parameters() if p.requires_grad),
        "act_chunks_per_s": rate(batch_size, act),
        "ppo_update_samples_per_s": rate(batch_size, update),
        "weight_sync": sync_cost(policy, repeats),
    }


def run_vlm_benchmark(
    batch_size: int = 8, repeats: int = 5, architecture: str = "idefics3", hidden_size: int = 64, num_layers: int = 2
) -> dict[str, Any]:
    """The compact policy and the VLM policy in each training mode; see the module docstring."""
    with tempfile.TemporaryDirectory() as folder:
        source = str(write_tiny_vlm(folder, architecture, image_size=64, hidden_size=hidden_size, num_layers=num_layers))
        policies = {"compact_film": COMPACT}
        for train in ("frozen", "lora", "full"):
            policies[f"vlm_{train}"] = (VLM_FACTORY, {"backbone": {"source": source, "train": train},
                                                      "head": {"name": "gaussian", "options": {}}})  # fmt: skip
        for name, (factory, options) in FAMILIES.items():
            policies[name] = (factory, {"backbone": {"source": source, "train": "lora"}, **options})
        results = {name: measure(factory, config, batch_size, repeats) for name, (factory, config) in policies.items()}
    return {
        "batch_size": batch_size, "repeats": repeats, "torch_threads": torch.get_num_threads(),
        "vlm": {"architecture": architecture, "hidden_size": hidden_size, "num_layers": num_layers, "image_size": 64},
        "policies": results,
    }  # fmt: skip
