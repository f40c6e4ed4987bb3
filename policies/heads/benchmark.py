"""Speed of one action head on random embeddings (the policy benchmark calls this per head)."""

from __future__ import annotations

import time
from typing import Any

import torch

from policies.heads import build_head


def _rate(items: int, function: Any, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        function()
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return items * repeats / (time.perf_counter() - start)


def measure_head_speed(
    name: str,
    embedding_dim: int = 256,
    chunk_size: int = 8,
    action_dim: int = 7,
    batch_size: int = 32,
    warmup: int = 3,
    repeats: int = 20,
    seed: int = 0,
    **options: Any,
) -> dict[str, Any]:
    """Measure head ``name`` (built with ``options``) at ``batch_size`` on the current device (CPU).

    Returns ``sample_chunks_per_s`` (stochastic ``sample`` without gradients, one chunk per batch row)
    and ``train_samples_per_s`` (one ``bc_loss`` + ``log_prob`` forward and backward on a stored
    replay, as a PPO/BC update does, per batch row), with the head's parameter count and settings.
    """
    torch.manual_seed(seed)
    head = build_head(name, embedding_dim, chunk_size, action_dim, **options)
    embedding = torch.randn(batch_size, embedding_dim)
    with torch.no_grad():
        actions, replay = head.sample(embedding)

    def sample() -> None:
        with torch.no_grad():
            head.sample(embedding)

    def train_step() -> None:
        head.zero_grad(set_to_none=True)
        log_prob, _ = head.log_prob(embedding, actions, replay)
        (head.bc_loss(embedding, actions) - log_prob.mean()).backward()

    return {
        "head": name,
        "options": options,
        "parameters": sum(parameter.numel() for parameter in head.parameters()),
        "batch_size": batch_size,
        "chunk_size": chunk_size,
        "action_dim": action_dim,
        "sample_chunks_per_s": round(_rate(batch_size, sample, warmup, repeats), 1),
        "train_samples_per_s": round(_rate(batch_size, train_step, warmup, repeats), 1),
    }


if __name__ == "__main__":
    import json

    for head_name, head_options in [
        ("gaussian", {}),
        ("diffusion", {}),
        ("flow", {}),
        ("flow", {"hybrid": True}),
        ("flow", {"rl_method": "noise"}),
    ]:
        print(json.dumps(measure_head_speed(head_name, **head_options)))
