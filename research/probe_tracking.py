"""Does a policy steer to where the block is, or replay one trajectory? A tracking probe.

On the fixed-scene suite every reset moves the blocks by up to ``scene_jitter`` (3 cm). A policy that
sees the block closes its gripper where the block is; one that replays the demonstrations' average
trajectory closes at the same place whatever the jitter. This script runs the policy (deterministic)
on ``--episodes`` resets of a picking task (``--task``: lift, stack or place_in_bowl) and records, at
the first gripper close below ``--close-height``, the grip site's x-y and the target block's x-y at
reset. Per axis it fits ``grip = a + slope * block`` (least squares) and prints, as JSON:

- ``slope``: 1 when the policy follows the block, 0 when it ignores it;
- ``slope_stderr``: its standard error (0.07-0.42 measured with 30 episodes and 3 cm of jitter);
- ``grip_error_cm``: mean |grip - block|, also over the successful and the failed episodes.

    .venv/bin/python research/probe_tracking.py outputs/flow_noise_pixels_ppo --task lift --episodes 30
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import make
from vla_rl.stages.evaluation.action_sources import load_policy_for_eval

CLOSE_HEIGHT = 0.05  # m: a close above this is not a grasp attempt
FIRST_SEED = 2000  # env seeds FIRST_SEED, FIRST_SEED + 1, ...: apart from the evaluation's


def tracking_fit(block: np.ndarray, grip: np.ndarray) -> dict[str, float]:
    """Least-squares ``grip = a + slope * block`` of one axis, ``block`` and ``grip`` ``(E,)`` metres.

    Returns ``slope`` and its standard error ``slope_stderr`` (residual variance over E - 2 degrees of
    freedom).

    Raises:
        ValueError: fewer than 3 episodes, or the block never moved (no jitter to regress on).
    """
    block, grip = np.asarray(block, dtype=float), np.asarray(grip, dtype=float)
    if block.shape != grip.shape or block.ndim != 1 or len(block) < 3:
        raise ValueError(
            f"tracking_fit needs two equal (E,) arrays with E >= 3, got {block.shape} and {grip.shape}"
        )
    centred = block - block.mean()
    spread = float(centred @ centred)
    if spread == 0.0:
        raise ValueError("the block sat at the same place in every episode: set a scene_jitter > 0")
    slope = float(centred @ (grip - grip.mean())) / spread
    residual = grip - grip.mean() - slope * centred
    stderr = float(np.sqrt(residual @ residual / (len(block) - 2) / spread))
    return {"slope": slope, "slope_stderr": stderr}


def grasp_points(policy_path: str, task: str, episodes: int, close_height: float) -> dict[str, np.ndarray]:
    """Per episode with a low close: the block's x-y at reset, the grip site's x-y at the close, success."""
    policy = load_policy_for_eval(policy_path)
    env = make(f"tabletop/{task}", fixed_scenes=True, dense_reward=True)
    inner = env.unwrapped
    generator = torch.Generator().manual_seed(0)
    rows: dict[str, list] = {"block": [], "grip": [], "success": []}
    for episode in range(episodes):
        obs, info = env.reset(seed=FIRST_SEED + episode)
        color = info["init_state"]["target"]["block"]
        block = inner.scene.block_position(color)[:2].copy()
        grip, done, success = None, False, False
        while not done:
            batch = {"images": {k: np.asarray(v)[None] for k, v in obs["images"].items()},
                     "state": np.asarray(obs["state"])[None], "instruction": [obs["instruction"]]}  # fmt: skip
            chunk, _ = policy.act(batch, deterministic=True, generator=generator)
            for action in np.asarray(chunk)[0]:
                if grip is None and action[-1] > 0 and inner.ee_position[2] < close_height:
                    grip = inner.ee_position[:2].copy()
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    done, success = True, bool(terminated)
                    break
        if grip is not None:
            rows["block"].append(block)
            rows["grip"].append(grip)
            rows["success"].append(success)
    env.close()
    return {name: np.asarray(values) for name, values in rows.items()}


def report(points: dict[str, np.ndarray], episodes: int) -> dict:
    block, grip, success = points["block"], points["grip"], points["success"].astype(bool)
    result: dict = {"episodes": episodes, "closes": len(block), "successes": int(success.sum())}
    for axis, name in enumerate("xy"):
        error = np.abs(grip[:, axis] - block[:, axis]) * 100
        result[name] = {
            **tracking_fit(block[:, axis], grip[:, axis]),
            "block_std_cm": float(block[:, axis].std() * 100),
            "grip_std_cm": float(grip[:, axis].std() * 100),
            "grip_error_cm": float(error.mean()),
            "grip_error_success_cm": float(error[success].mean()) if success.any() else None,
            "grip_error_failure_cm": float(error[~success].mean()) if (~success).any() else None,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "policy", help="a policy folder, checkpoint or run folder (as `vla-rl eval --policy`)"
    )
    parser.add_argument("--task", default="lift", help="a tabletop task that grasps its target block")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--close-height", type=float, default=CLOSE_HEIGHT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    points = grasp_points(args.policy, args.task, args.episodes, args.close_height)
    print(json.dumps(report(points, args.episodes), indent=2))


if __name__ == "__main__":
    main()
