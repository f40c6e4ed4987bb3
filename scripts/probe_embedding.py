"""Does a policy's observation embedding know where the target object is? A linear probe.

On the fixed-scene suite every reset moves the objects by up to ``scene_jitter`` (3 cm). A policy can
only correct for that if its embedding carries the object's position. This script resets a task
(``--task``, reach by default) on ``--episodes`` seeds (up to ``--random-steps`` - 1 random actions after
each reset, so the gripper is not always at its start; 0: none), records the policy's embedding, the raw
state, 16x16 subsampled camera pixels (every 4th pixel) and 16x16 average-pooled ones (what
``policy.rl_vision.kind=pixels`` reads), and fits a ridge regression (``sklearn.linear_model.RidgeCV``)
of the target block's x-y position on each, on three quarters of the episodes. It prints, as JSON, the
mean held-out error in cm of each feature set next to that of predicting the mean position.

    .venv/bin/python scripts/probe_embedding.py outputs/flow_residual_ppo/sft/best --episodes 400
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from sklearn.linear_model import RidgeCV

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import make
from policies.encoders.pixels import pooled_pixels
from policies.hub import load_pretrained

RANDOM_STEPS = 6  # at most this many random actions after each reset
PIXEL_STRIDE = 4  # 64x64 images -> 16x16


def observation_batch(obs: dict) -> dict:
    """One env observation as the policy's batch of one."""
    return {
        "images": {camera: torch.from_numpy(np.asarray(image))[None] for camera, image in obs["images"].items()},
        "state": torch.as_tensor(np.asarray(obs["state"]), dtype=torch.float32)[None],
        "instruction": [obs["instruction"]],
    }


def collect(
    policy_dir: str, episodes: int, scene_jitter: float, task: str = "reach", random_steps: int = RANDOM_STEPS
) -> dict[str, np.ndarray]:
    policy = load_pretrained(policy_dir)
    policy.eval()
    env = make(f"tabletop/{task}", fixed_scenes=True, scene_jitter=scene_jitter)
    rows: dict[str, list[np.ndarray]] = {"embedding": [], "state": [], "pixels": [], "pooled_pixels": [], "target_xy": []}
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        target_block = info["init_state"]["target"]["block"]
        rng = np.random.default_rng(seed)
        for _ in range(rng.integers(0, random_steps) if random_steps else 0):
            obs, *_ = env.step(rng.uniform(env.action_space.low, env.action_space.high))
        batch = observation_batch(obs)
        with torch.no_grad():
            rows["embedding"].append(policy.embed(batch)[0].numpy())
        rows["pooled_pixels"].append(pooled_pixels(batch["images"], sorted(batch["images"]), PIXEL_STRIDE)[0].numpy())
        rows["state"].append(np.asarray(obs["state"], dtype=np.float32))
        rows["pixels"].append(
            np.concatenate([np.asarray(image, np.float32)[::PIXEL_STRIDE, ::PIXEL_STRIDE].ravel() / 255.0
                            for _, image in sorted(obs["images"].items())])
        )  # fmt: skip
        rows["target_xy"].append(env.unwrapped.scene.block_position(target_block)[:2])
    env.close()
    return {name: np.asarray(values) for name, values in rows.items()}


def probe(features: np.ndarray, targets: np.ndarray) -> float:
    """Mean held-out error (cm) of a ridge regression fitted on the first three quarters."""
    split = len(features) * 3 // 4
    model = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(features[:split], targets[:split])
    return float(np.linalg.norm(model.predict(features[split:]) - targets[split:], axis=1).mean() * 100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="a save_pretrained folder (e.g. outputs/flow_residual_ppo/sft/best)")
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--scene-jitter", type=float, default=0.03)
    parser.add_argument("--task", default="reach", help="a tabletop task whose target names a block (reach, lift, push)")
    parser.add_argument("--random-steps", type=int, default=RANDOM_STEPS, help="random actions after reset: below this")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = collect(args.policy, args.episodes, args.scene_jitter, args.task, args.random_steps)
    targets = data.pop("target_xy")
    split = len(targets) * 3 // 4
    report = {"episodes": len(targets), "mean_position_cm": float(
        np.linalg.norm(targets[split:] - targets[:split].mean(0), axis=1).mean() * 100
    )}  # fmt: skip
    report.update({f"{name}_cm": probe(features, targets) for name, features in data.items()})
    report["embedding+state_cm"] = probe(np.concatenate([data["embedding"], data["state"]], axis=1), targets)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
