"""Does a policy's observation embedding know where the task's target is? A linear probe.

A policy can only steer to a target that moves from episode to episode if what it reads carries the
target's position. This script resets a task on ``--episodes`` seeds (up to ``--random-steps`` - 1
random actions after each reset, so the gripper is not always at its start; 0: none), records the
policy's embedding, the raw state, subsampled camera pixels (every ``--stride``-th: 16x16 of a 64 px
image at the default 4) and average-pooled ones (``--stride`` x ``--stride`` blocks: what
``policy.rl_vision.kind=pixels`` reads with ``policy.rl_vision.downsample`` the same), and fits a ridge regression
(``sklearn.linear_model.RidgeCV``) of the target's position on each, on three quarters of the
episodes. It prints, as JSON, the mean held-out error in cm of each feature set next to that of
predicting the mean position, as a distance and per axis. ``--cnn-epochs N`` also trains a small CNN on
the full camera images (a nonlinear readout: what a learned image branch could read).

The target (privileged state, read from the env after each reset) comes from a reader
``reader(env, reset_info) -> position (D,)``: the env factory's own ``target`` reader where it has one
(``--env metaworld``: the task's goal, MetaWorld's ``_target_pos``, x-y-z; the reader SFT's target frames
use), built in here for ``--env tabletop`` (the target block's x-y on the fixed-scene suite, jittered by
up to 3 cm), and ``--target package.module:function`` for any other env.

    .venv/bin/python research/probe_embedding.py outputs/flow_residual_ppo/sft/best --episodes 400
    .venv/bin/python research/probe_embedding.py outputs/mt10/sft/best --env metaworld --task reach-v3
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import yaml
from sklearn.linear_model import RidgeCV
from torch import nn

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from contract.import_path import import_object
from envs.registry import make
from policies.encoders.pixels import pooled_pixels
from policies.hub import load_pretrained
from vla_rl.stages.sft.target_frames import target_reader

RANDOM_STEPS = 6  # at most this many random actions after each reset
PIXEL_STRIDE = 4  # 64x64 images -> 16x16 (policy.rl_vision.downsample's default)


def observation_batch(obs: dict) -> dict:
    """One env observation as the policy's batch of one."""
    return {
        "images": {
            camera: torch.from_numpy(np.asarray(image))[None] for camera, image in obs["images"].items()
        },
        "state": torch.as_tensor(np.asarray(obs["state"]), dtype=torch.float32)[None],
        "instruction": [obs["instruction"]],
    }


def tabletop_target(env, reset_info: dict) -> np.ndarray:
    """The built-in suite's target block, x-y (m)."""
    return env.unwrapped.scene.block_position(reset_info["init_state"]["target"]["block"])[:2]


#: env name -> (target reader, env options the probe builds it with by default), for envs whose factory has no
#: ``target`` reader of its own (metaworld's has: its goal)
BUILTIN_TARGETS = {
    "tabletop": (tabletop_target, {"fixed_scenes": True, "scene_jitter": 0.03}),
}


def collect(
    policy_dir: str,
    episodes: int,
    env_id: str,
    target: Callable[[Any, dict], np.ndarray],
    env_kwargs: dict[str, Any],
    random_steps: int = RANDOM_STEPS,
    stride: int = PIXEL_STRIDE,
) -> dict[str, np.ndarray]:
    policy = load_pretrained(policy_dir)
    policy.eval()
    env = make(env_id, **env_kwargs)
    rows: dict[str, list[np.ndarray]] = {
        "embedding": [],
        "state": [],
        "pixels": [],
        "pooled_pixels": [],
        "target": [],
        "images": [],
    }
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        rows["target"].append(target(env, info))
        rng = np.random.default_rng(seed)
        for _ in range(rng.integers(0, random_steps) if random_steps else 0):
            obs, *_ = env.step(rng.uniform(env.action_space.low, env.action_space.high))
        batch = observation_batch(obs)
        with torch.no_grad():
            rows["embedding"].append(policy.embed(batch)[0].numpy())
        rows["pooled_pixels"].append(
            pooled_pixels(batch["images"], sorted(batch["images"]), stride)[0].numpy()
        )
        rows["state"].append(np.asarray(obs["state"], dtype=np.float32))
        rows["images"].append(np.concatenate([image for _, image in sorted(obs["images"].items())], axis=-1))
        rows["pixels"].append(
            np.concatenate([np.asarray(image, np.float32)[::stride, ::stride].ravel() / 255.0
                            for _, image in sorted(obs["images"].items())])
        )  # fmt: skip
    env.close()
    return {name: np.asarray(values) for name, values in rows.items()}


def held_out_errors(features: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``(E / 4, D)`` held-out errors (m) of a ridge regression fitted on the first three quarters."""
    split = len(features) * 3 // 4
    model = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(features[:split], targets[:split])
    return model.predict(features[split:]) - targets[split:]


def error_cm(errors: np.ndarray) -> tuple[float, list[float]]:
    """``errors`` ``(N, D)`` in metres as the mean distance (cm) and the mean absolute error per axis (cm, ``(D,)``)."""
    per_axis = [round(float(v), 3) for v in np.abs(errors).mean(0) * 100]
    return float(np.linalg.norm(errors, axis=1).mean() * 100), per_axis


def cnn_held_out_errors(images: np.ndarray, targets: np.ndarray, epochs: int, seed: int = 0) -> np.ndarray:
    """``(E / 4, D)`` held-out errors (m) of a small CNN trained on the first three quarters of ``images``.

    ``images``: uint8 ``(E, H, W, C)`` (the cameras' RGB stacked on channels). What a learned image branch
    could read of the target, where the ridge probes say what a linear readout of fixed features reads.
    """
    torch.manual_seed(seed)
    split = len(images) * 3 // 4
    inputs = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 127.5 - 1.0
    mean, std = targets[:split].mean(0), targets[:split].std(0) + 1e-8
    labels = torch.from_numpy((targets - mean) / std).float()
    net = nn.Sequential(
        nn.Conv2d(inputs.shape[1], 32, 5, 2, 2), nn.ReLU(), nn.Conv2d(32, 64, 3, 2, 1), nn.ReLU(),
        nn.Conv2d(64, 64, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(8), nn.Flatten(),
        nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, labels.shape[1]),
    )  # fmt: skip
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    order = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for batch in torch.randperm(split, generator=order).split(64):
            loss = nn.functional.mse_loss(net(inputs[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        predicted = net(inputs[split:]).numpy() * std + mean
    return predicted - targets[split:]


def env_options(pairs: list[str]) -> dict[str, Any]:
    """``["KEY=VALUE", ...]`` as env options, each value read as YAML (``0.05``, ``true``, ``[a, b]``)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--env-option {pair!r}: write it as KEY=VALUE, e.g. scene_jitter=0.05")
        options[key] = yaml.safe_load(value)
    return options


def target_and_env(env: str, target: str | None) -> tuple[Callable, dict[str, Any]]:
    """The target reader and default env options of ``--env`` / ``--target``."""
    if target is not None:
        return import_object(target), {}
    if env in BUILTIN_TARGETS:
        reader, options = BUILTIN_TARGETS[env]
        return reader, dict(options)
    try:
        return target_reader(env), {}  # the env factory's own (``factory.target``), e.g. metaworld's goal
    except ValueError:
        raise SystemExit(
            f"--env {env!r} has no target reader (its factory has no `target`, and the script knows "
            f"{', '.join(BUILTIN_TARGETS)}); give one with --target package.module:function (env, reset_info) -> position"
        ) from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="a save_pretrained folder (e.g. outputs/flow_residual_ppo/sft/best)")
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--env", default="tabletop", help="a registered env name (tabletop, metaworld, ...)")
    parser.add_argument(
        "--task", help="the env's task (default: its first; tabletop: one whose target names a block)"
    )
    parser.add_argument("--target", help="package.module:function (env, reset_info) -> the target's position")
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an env option over the probe's defaults (tabletop: fixed_scenes=true scene_jitter=0.03)",
    )
    parser.add_argument(
        "--random-steps", type=int, default=RANDOM_STEPS, help="random actions after reset: below this"
    )
    parser.add_argument(
        "--stride", type=int, default=PIXEL_STRIDE, help="pixel subsampling and pooling factor"
    )
    parser.add_argument(
        "--cnn-epochs",
        type=int,
        default=0,
        help="also train a small CNN on the full images for this many epochs",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    target, env_kwargs = target_and_env(args.env, args.target)
    env_kwargs.update(env_options(args.env_option))
    data = collect(
        args.policy,
        args.episodes,
        args.env if args.task is None else f"{args.env}/{args.task}",
        target,
        env_kwargs,
        args.random_steps,
        args.stride,
    )
    targets = data.pop("target")
    images = data.pop("images")
    split = len(targets) * 3 // 4
    errors = {"mean_position": targets[split:] - targets[:split].mean(0)}
    errors.update({name: held_out_errors(features, targets) for name, features in data.items()})
    errors["embedding+state"] = held_out_errors(
        np.concatenate([data["embedding"], data["state"]], axis=1), targets
    )
    if args.cnn_epochs:
        errors["cnn"] = cnn_held_out_errors(images, targets, args.cnn_epochs)
    report: dict[str, Any] = {"episodes": len(targets)}
    for name, error in errors.items():
        report[f"{name}_cm"], report[f"{name}_per_axis_cm"] = error_cm(error)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
