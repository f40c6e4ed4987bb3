"""Speed of the policies that put a VLM under the actions, side by side with the compact FiLM policy.

``vla-rl bench policy --vlm [--families pooled tokens expert] [--vlm-source DIR]`` prints one JSON object. The
families (:data:`FAMILIES`): ``pooled`` (``policy=vlm`` with the gaussian head: backbone frozen, LoRA, full),
``tokens`` (``policy=token_vla``, LoRA: parallel decoding as its experiment sets it, and autoregressive decoding,
one forward pass per action token) and ``expert`` (``policy=expert_vla``, LoRA: the flow expert with its
experiment's denoising steps and Flow-SDE). The compact policy (``compact_film``) is always measured, as the
reference. Observations are shaped like the tabletop suite's (two 64x64 cameras, 9 state dims, 4 action dims).

Keys of ``policies.<name>``:

- ``factory``, ``options`` (the policy config besides the backbone), ``log_prob_granularity`` (the ratio unit of
  its experiment's PPO update);
- ``parameters``, ``trainable_parameters``;
- ``act_chunks_per_s``: observations (one action chunk each) per second through ``act`` as a rollout worker calls
  it (sampling, with a generator; the token VLA's decoding, the expert's denoising steps);
- ``ppo_update_samples_per_s``: samples per second of one PPO step as the update computes it: ``evaluate`` on the
  stored extras, log-probs reduced to ``log_prob_granularity``, the clipped surrogate and value loss, backward, Adam;
- each rate is ``{median, min, max, per_cpu_s}`` over ``repeats`` timed calls after a warm-up (``per_cpu_s``: items
  per second of this process's CPU time, median; steadier than wall time on a shared machine);
- ``weight_sync``: ``all_weights`` (the first sync of a run) and ``changing_only`` (every later sync: what
  ``vla_rl.workers.weight_sync.changing_keys`` selects, e.g. LoRA adapters, expert, action rows, heads, critic),
  each ``{bytes, megabytes, seconds}`` (seconds to serialise, deserialise and load it into the policy, as a rollout
  worker loads it), and ``bytes_ratio`` (changing over all).

Top level: ``batch_size``, ``repeats``, ``torch_threads``, ``families``, ``vlm`` (``source``: the model folder, or
null for a tiny random model written by :func:`policies.backbones.tiny.write_tiny_vlm`; its ``architecture``,
``hidden_size``, ``num_layers``, ``image_size``) and ``policies``. With the tiny random model the numbers measure
the machinery, not a pretrained model's quality; ``--vlm-source assets/tabletop_vlm`` benches the in-house model.
"""

from __future__ import annotations

import io
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from policies.backbones.config import TRAIN_MODES
from policies.backbones.tiny import write_tiny_vlm
from policies.benchmark import BENCHMARK_SPEC, benchmark_observation, benchmark_stats
from policies.factory import build_from_factory
from policies.heads.base import reduce_log_prob
from vla_rl.workers.weight_sync import changing_keys, load_changing, num_bytes, select


@dataclass(frozen=True)
class BenchedPolicy:
    """A policy of the benchmark: its factory, its config besides ``backbone``, whether it has a VLM backbone (and
    with which ``train`` mode), and the log-prob granularity its experiment's PPO update reads."""

    factory: str
    options: dict[str, Any]
    train: str | None = None
    log_prob_granularity: str = "action"

    def config(self, source: str) -> dict[str, Any]:
        backbone = {"backbone": {"source": source, "train": self.train}} if self.train else {}
        return {**backbone, **self.options}


GAUSSIAN = {"head": {"name": "gaussian", "options": {}}}
COMPACT = {"compact_film": BenchedPolicy("policies.vla:build_policy", GAUSSIAN)}
TOKEN_FACTORY = "policies.backbones.token_vla:build_policy"
#: family -> the policies it adds, configured as their experiments set them (configs/experiment/token_vla_ppo.yaml,
#: expert_vla_ppo.yaml: rollout temperature 1.6, one ratio per token; 5 Euler steps, Flow-SDE).
FAMILIES: dict[str, dict[str, BenchedPolicy]] = {
    "pooled": {f"vlm_{train}": BenchedPolicy("policies.backbones.vlm_policy:build_policy", GAUSSIAN, train)
               for train in TRAIN_MODES},  # fmt: skip
    "tokens": {
        "token_vla_lora": BenchedPolicy(TOKEN_FACTORY, {"tokens": {"temperature": 1.6, "decoding": "parallel"}},
                                        "lora", "dimension"),  # fmt: skip
        "token_vla_lora_autoregressive": BenchedPolicy(
            TOKEN_FACTORY, {"tokens": {"temperature": 1.6, "decoding": "autoregressive"}}, "lora", "dimension"
        ),
    },
    "expert": {
        "expert_vla_lora": BenchedPolicy("policies.backbones.expert_vla:build_policy",
                                         {"flow": {"num_inference_steps": 5, "rl_method": "sde"}}, "lora"),  # fmt: skip
    },
}


def benched_policies(families: Sequence[str]) -> dict[str, BenchedPolicy]:
    """The compact policy, then those of ``families`` (names of :data:`FAMILIES`), in that order."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        raise ValueError(f"families {list(families)}: give one or more of {', '.join(FAMILIES)}")
    return {**COMPACT, **{name: policy for family in families for name, policy in FAMILIES[family].items()}}


def timed(function: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Seconds of one call after one warm-up call: wall ``{median, min, max}`` and this process's CPU median."""
    function()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {"median": round(float(np.median(wall)), 5), "min": round(min(wall), 5), "max": round(max(wall), 5),
            "cpu_median": round(float(np.median(cpu)), 5)}  # fmt: skip


def rate(batch_size: int, seconds: dict[str, float]) -> dict[str, float]:
    """Items per second: the median and the range (the fastest call gives the max), and per CPU second."""
    return {"median": round(batch_size / seconds["median"], 2), "min": round(batch_size / seconds["max"], 2),
            "max": round(batch_size / seconds["min"], 2),
            "per_cpu_s": round(batch_size / max(seconds["cpu_median"], 1e-6), 2)}  # fmt: skip


def sync_cost(policy: torch.nn.Module, repeats: int) -> dict[str, Any]:
    """Bytes and seconds of the first weight sync (every weight) and of the later ones (what training changes),
    selected and loaded by the functions the trainer's sync uses (serialise, deserialise, load into the policy)."""
    weights = {key: value.detach().clone() for key, value in policy.state_dict().items()}
    parts = {"all_weights": weights, "changing_only": select(weights, changing_keys(policy))}
    loaders = {"all_weights": lambda loaded: policy.load_state_dict(loaded, strict=True),
               "changing_only": lambda loaded: load_changing(policy, loaded)}  # fmt: skip

    def sync(name: str) -> None:
        buffer = io.BytesIO()
        torch.save(parts[name], buffer)
        buffer.seek(0)
        loaders[name](torch.load(buffer, weights_only=True))

    result: dict[str, Any] = {}
    for name, part in parts.items():
        seconds = timed(lambda name=name: sync(name), repeats)
        result[name] = {"bytes": num_bytes(part), "megabytes": round(num_bytes(part) / 2**20, 3),
                        "seconds": {key: seconds[key] for key in ("median", "min", "max")}}  # fmt: skip
    result["bytes_ratio"] = round(num_bytes(parts["changing_only"]) / num_bytes(weights), 4)
    return result


def measure(benched: BenchedPolicy, source: str, batch_size: int, repeats: int) -> dict[str, Any]:
    """The figures of one policy (module docstring)."""
    torch.manual_seed(0)
    policy = build_from_factory(benched.factory, benched.config(source), BENCHMARK_SPEC.to_dict(),
                                benchmark_stats(BENCHMARK_SPEC))  # fmt: skip
    obs = benchmark_observation(BENCHMARK_SPEC, batch_size)
    generator = torch.Generator().manual_seed(0)
    act = timed(lambda: policy.act(obs, deterministic=False, generator=generator), repeats)
    _, extras = policy.act(obs, deterministic=False, generator=generator)
    granularity = benched.log_prob_granularity
    old_log_prob = reduce_log_prob(extras["log_prob"].float(), granularity)
    advantages = torch.randn(batch_size).view(-1, *[1] * (old_log_prob.dim() - 1))
    returns = torch.randn(batch_size)
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-5)

    def ppo_update() -> None:
        log_prob, _, value = policy.evaluate(obs, extras)
        ratio = torch.exp(reduce_log_prob(log_prob.float(), granularity) - old_log_prob)
        surrogate = torch.minimum(ratio * advantages, ratio.clamp(0.8, 1.28) * advantages)
        loss = -surrogate.mean() + 0.5 * (value - returns).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    update = timed(ppo_update, repeats)
    return {
        "factory": benched.factory,
        "options": benched.options,
        "log_prob_granularity": granularity,
        "parameters": sum(p.numel() for p in policy.parameters()),
        "trainable_parameters": sum(p.numel() for p in policy.parameters() if p.requires_grad),
        "act_chunks_per_s": rate(batch_size, act),
        "ppo_update_samples_per_s": rate(batch_size, update),
        "weight_sync": sync_cost(policy, repeats),
    }


def describe_vlm(folder: Path) -> dict[str, Any]:
    """Architecture and sizes of the model in ``folder`` (its ``config.json``)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    return {"architecture": config.model_type, "hidden_size": int(config.text_config.hidden_size),
            "num_layers": int(config.text_config.num_hidden_layers),
            "image_size": int(config.vision_config.image_size)}  # fmt: skip


def run_vlm_benchmark(
    batch_size: int = 8, repeats: int = 5, architecture: str = "idefics3", hidden_size: int = 64, num_layers: int = 2,
    families: Sequence[str] = tuple(FAMILIES), source: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The compact policy and those of ``families`` on the VLM in ``source`` (a local model folder), or on a tiny
    random model of ``architecture`` / ``hidden_size`` / ``num_layers`` without one; see the module docstring."""
    from policies.encoders.pretrained_language import resolve_model_path

    policies = benched_policies(families)
    if repeats < 1 or batch_size < 1:
        raise ValueError(f"batch_size={batch_size}, repeats={repeats}: both must be >= 1")
    with tempfile.TemporaryDirectory() as scratch:
        if source is None:
            folder = write_tiny_vlm(scratch, architecture, image_size=64, hidden_size=hidden_size, num_layers=num_layers)
        else:
            folder = resolve_model_path(source)
        results = {name: measure(benched, str(folder), batch_size, repeats) for name, benched in policies.items()}
        vlm = {"source": source, **describe_vlm(folder)}
    return {"batch_size": batch_size, "repeats": repeats, "torch_threads": torch.get_num_threads(),
            "families": list(families), "vlm": vlm, "policies": results}  # fmt: skip
