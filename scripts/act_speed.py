"""act() of an experiment's policy against the path before it took the log-prob from the head's replay
(sample, then ``head.log_prob`` run again over the chain): acts per second side by side, alternating rounds.

    python scripts/act_speed.py flow_noise_pixels_ppo      # any experiment name; batch 16, one thread

Prints the median and range of new / old over 5 rounds of 2 s each (random images, one instruction).
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import torch

from envs.registry import resolve
from vla_rl.config import env_kwargs, load_config, resolve_tasks
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.experiment import policy_spec_from_config

BATCH, ROUNDS, SECONDS = 16, 5, 2.0


def build_policy(experiment: str) -> torch.nn.Module:
    cfg = load_config([f"experiment={experiment}", "run_dir=/tmp/act_speed"])
    entry, _ = resolve(str(cfg.env.id))
    tasks = tuple(resolve_tasks(cfg.env, entry.tasks))
    spec = policy_spec_from_config(cfg, env_io_spec(entry.name, tasks[0], env_kwargs(cfg.env)), None)
    return spec.build("cpu").eval()


def calls_per_second(function) -> float:
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < SECONDS:
        function()
        calls += 1
    return calls / (time.perf_counter() - started)


def main() -> None:
    torch.set_num_threads(1)
    experiment = sys.argv[1] if len(sys.argv) > 1 else "default"
    policy = build_policy(experiment)
    rng = np.random.default_rng(0)
    images = {camera: rng.integers(0, 256, (BATCH, 64, 64, 3), dtype=np.uint8) for camera in ("front", "wrist")}
    state = rng.normal(size=(BATCH, policy.io_spec.state_dim)).astype(np.float32)
    obs = {"images": images, "state": state, "instruction": np.array(["reach the red block"] * BATCH)}

    @torch.no_grad()
    def new() -> None:
        policy.act(obs)

    @torch.no_grad()
    def old() -> None:
        embedding, features = policy.encode(obs)
        actions, replay = policy.head.sample(embedding, rl_features=features)
        policy.head.log_prob(embedding, actions, replay, rl_features=features)
        policy.value_head(embedding, features)

    new(), old()  # warm-up
    rounds = [(calls_per_second(old), calls_per_second(new)) for _ in range(ROUNDS)]
    ratios = [n / o for o, n in rounds]
    print(f"{experiment}: acts/s new {statistics.median(n for _, n in rounds):.1f}, old "
          f"{statistics.median(o for o, _ in rounds):.1f}; new/old median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")  # fmt: skip


if __name__ == "__main__":
    main()
