"""The policy conformance kit: what every policy of vla-rl must do (``vla-rl policies check``).

:func:`run_checks` builds the policy through its factory (:mod:`policies.factory`) for an io spec and
dataset statistics, and checks, in order: ``act``'s shapes and extras, actions unnormalised into the
env's units and clipped to its bounds, seeded sampling, ``evaluate`` recomputing ``act``'s log-probs and
values exactly, a gradient through ``evaluate``, ``bc_loss``, and a ``save_pretrained`` /
``load_pretrained`` round trip that gives identical outputs. It stops at the first failure with a
:class:`PolicyConformanceError` naming the check.

Without an env, the io spec is :func:`synthetic_io_spec`: two cameras, a state, and action bounds far
from [-1, 1] whose dataset statistics (:func:`synthetic_stats`) cover a narrow part of them, so a policy
that forgets to unnormalise its actions lands outside the statistics' range and fails.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from policies.factory import build_from_factory, factory_of

#: Seconds are cheap here: small batches.
BATCH_SIZE = 3
#: log-probs and values recomputed by ``evaluate`` must equal ``act``'s within this (float32 round-off).
TOLERANCE = 1e-4


class PolicyConformanceError(AssertionError):
    """A conformance check failed; ``check`` names it."""

    def __init__(self, check: str, message: str):
        super().__init__(f"[{check}] {message}")
        self.check = check


@dataclass
class CheckResult:
    name: str
    passed: bool
    detail: str = ""


def _require(condition: bool, check: str, message: str) -> None:
    if not condition:
        raise PolicyConformanceError(check, message)


def synthetic_io_spec(image_size: int = 32) -> dict[str, Any]:
    """Two cameras, a 5-d state, and 3 action dimensions in units far from [-1, 1] (one of them wide)."""
    return {
        "camera_names": ["front", "wrist"],
        "image_size": [image_size, image_size],
        "state_dim": 5,
        "action_low": [2.0, 10.0, 100.0],
        "action_high": [4.0, 20.0, 300.0],
    }


def synthetic_stats(io_spec: Mapping[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Statistics whose action range is the middle tenth of each bound (every normalisation mode's keys); a
    policy that does not unnormalise is clipped to the lower bound, 2.5 widths below that range."""
    low, high = np.asarray(io_spec["action_low"], float), np.asarray(io_spec["action_high"], float)
    width = (high - low) / 10
    action_min, action_max = low + 4.5 * width, low + 5.5 * width
    state_dim = int(io_spec["state_dim"])
    stats = {
        "action": {
            "min": action_min, "max": action_max, "q01": action_min, "q99": action_max,
            "mean": (action_min + action_max) / 2, "std": (action_max - action_min) / 4,
        },
        "state": {
            "min": -np.ones(state_dim), "max": np.ones(state_dim), "q01": -np.ones(state_dim),
            "q99": np.ones(state_dim), "mean": np.zeros(state_dim), "std": np.ones(state_dim),
        },
    }  # fmt: skip
    return {feature: {key: [float(v) for v in value] for key, value in d.items()} for feature, d in stats.items()}


def synthetic_observation(io_spec: Mapping[str, Any], batch_size: int, seed: int = 0) -> dict[str, Any]:
    """Random images ``(B, H, W, 3)`` uint8 per camera, a state ``(B, S)`` and instructions."""
    rng = np.random.default_rng(seed)
    height, width = (int(v) for v in io_spec["image_size"])
    words = ["pick up the red block", "open the drawer", "push the blue cube to the left"]
    return {
        "images": {
            camera: rng.integers(0, 256, (batch_size, height, width, 3), dtype=np.uint8)
            for camera in io_spec["camera_names"]
        },
        "state": rng.normal(size=(batch_size, int(io_spec["state_dim"]))).astype(np.float32),
        "instruction": [words[i % len(words)] for i in range(batch_size)],
    }


def _close(first: torch.Tensor, second: torch.Tensor) -> bool:
    return first.shape == second.shape and torch.allclose(first.float(), second.float(), atol=TOLERANCE, rtol=0)


def check_act(policy: torch.nn.Module, obs: Mapping[str, Any], io_spec: Mapping[str, Any]) -> tuple:
    """``act`` returns ``(B, H, A)`` finite actions and extras with log_prob ``(B, H, A)`` and value ``(B,)``."""
    chunk_size = int(policy.config["chunk_size"] if isinstance(policy.config, Mapping) else policy.config.chunk_size)
    action_dim = len(io_spec["action_low"])
    generator = torch.Generator(device=policy.device).manual_seed(0)
    actions, extras = policy.act(obs, deterministic=False, generator=generator)
    expected = (BATCH_SIZE, chunk_size, action_dim)
    _require(isinstance(actions, torch.Tensor) and tuple(actions.shape) == expected, "act",
             f"actions must be a tensor of shape (B, H, A) = {expected}, got {getattr(actions, 'shape', actions)}")
    _require(bool(torch.isfinite(actions).all()), "act", "actions contain NaN or inf")
    for key, shape in (("log_prob", expected), ("value", (BATCH_SIZE,))):
        _require(key in extras.keys(), "act", f"extras lack {key!r}; they have {sorted(extras.keys())}")
        _require(tuple(extras[key].shape) == shape, "act", f"extras[{key!r}] must be {shape}, got "
                 f"{tuple(extras[key].shape)}")  # fmt: skip
    for key, value in extras.items():
        _require(isinstance(value, torch.Tensor) and value.shape[:1] == (BATCH_SIZE,), "act",
                 f"extras[{key!r}] must be a tensor with leading dim B={BATCH_SIZE} (the rollout stacks them)")
    return actions, extras


def check_units(policy: torch.nn.Module, obs: Mapping[str, Any], io_spec: Mapping[str, Any], stats: Mapping,
                sampled: torch.Tensor) -> None:  # fmt: skip
    """Sampled actions lie within the env's bounds; deterministic ones near the statistics' range, in env units."""
    low = torch.tensor(io_spec["action_low"], dtype=torch.float32)
    high = torch.tensor(io_spec["action_high"], dtype=torch.float32)
    sampled = sampled.detach().float().cpu()
    _require(bool(((sampled >= low) & (sampled <= high)).all()), "units",
             f"sampled actions leave the env's bounds {low.tolist()}..{high.tolist()}: clip them (env units)")
    deterministic, _ = policy.act(obs, deterministic=True, generator=torch.Generator(policy.device).manual_seed(1))
    deterministic = deterministic.detach().float().cpu()
    stat_min = torch.tensor(stats["action"]["min"], dtype=torch.float32)
    stat_max = torch.tensor(stats["action"]["max"], dtype=torch.float32)
    width = stat_max - stat_min
    # An untrained head's normalised output reaches |a| ~ 3: allow up to 5 (min_max) around the range.
    inside = (deterministic >= stat_min - 2 * width) & (deterministic <= stat_max + 2 * width)
    _require(bool(inside.all()), "units",
             f"deterministic actions {deterministic.amin((0, 1)).tolist()}..{deterministic.amax((0, 1)).tolist()} lie "
             f"far from the dataset's action range {stat_min.tolist()}..{stat_max.tolist()}: unnormalise the head's "
             f"output with the statistics (policies.normalization.Normalizer.unnormalize)")  # fmt: skip


def check_seeded(policy: torch.nn.Module, obs: Mapping[str, Any], actions: torch.Tensor) -> None:
    """The same generator seed samples the same chunk (rollouts are reproducible)."""
    again, _ = policy.act(obs, deterministic=False, generator=torch.Generator(device=policy.device).manual_seed(0))
    _require(torch.equal(again, actions), "seeded", "act with the same generator seed sampled different actions; "
             "draw every random number from the `generator` argument")  # fmt: skip


def check_evaluate(policy: torch.nn.Module, obs: Mapping[str, Any], extras: Mapping[str, torch.Tensor]) -> None:
    """``evaluate`` recomputes act's log-probs and values exactly (PPO's ratio is 1 before the update)."""
    with torch.no_grad():
        log_prob, entropy, value = policy.evaluate(obs, extras)
    gap = (log_prob.float() - extras["log_prob"].float()).abs().max().item() if log_prob.shape == extras[
        "log_prob"].shape else float("inf")  # fmt: skip
    _require(_close(log_prob, extras["log_prob"]), "evaluate",
             f"evaluate's log_prob differs from act's by {gap:.3g} (shape {tuple(log_prob.shape)}); it must recompute "
             f"the log-probability of the stored sample exactly (store what it needs in extras)")  # fmt: skip
    _require(_close(value, extras["value"]), "evaluate", "evaluate's value differs from act's value")
    _require(entropy is None or entropy.shape[0] == log_prob.shape[0], "evaluate",
             f"entropy must be None or have leading dim B, got {getattr(entropy, 'shape', entropy)}")


def _gradient_reaches(policy: torch.nn.Module, loss: torch.Tensor, check: str) -> None:
    policy.zero_grad(set_to_none=True)
    _require(loss.dim() == 0 and bool(torch.isfinite(loss)), check, f"the loss must be a finite scalar, got {loss}")
    loss.backward()
    grads = [p.grad for p in policy.parameters() if p.requires_grad and p.grad is not None]
    _require(bool(grads), check, "no trainable parameter received a gradient")
    _require(all(bool(torch.isfinite(g).all()) for g in grads), check, "a gradient contains NaN or inf")
    policy.zero_grad(set_to_none=True)


def check_gradients(policy: torch.nn.Module, obs: Mapping[str, Any], extras: Mapping[str, torch.Tensor]) -> None:
    """``evaluate``'s log-prob and value have gradients (PPO and the critic can learn)."""
    policy.train()
    log_prob, _, value = policy.evaluate(obs, extras)
    _gradient_reaches(policy, log_prob.float().mean() + value.float().mean(), "gradients")
    policy.eval()


def check_bc_loss(policy: torch.nn.Module, obs: Mapping[str, Any], actions: torch.Tensor) -> None:
    """``bc_loss`` on chunks in env units is a finite scalar with a gradient."""
    policy.train()
    batch = {**obs, "action": actions.detach().cpu().numpy(), "action_mask": np.ones(actions.shape[:2], bool)}
    _gradient_reaches(policy, policy.bc_loss(batch), "bc_loss")
    policy.eval()


def check_save_load(policy: torch.nn.Module, obs: Mapping[str, Any], extras: Mapping[str, torch.Tensor]) -> None:
    """``save_pretrained`` then :func:`policies.hub.load_pretrained` gives the same policy, outputs identical."""
    from policies.hub import load_pretrained

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "policy"
        policy.save_pretrained(path)
        loaded = load_pretrained(path, device=policy.device).eval()
    _require(type(loaded) is type(policy), "save_load", f"loaded a {type(loaded).__name__}, saved a "
             f"{type(policy).__name__}: does the factory {factory_of(policy)!r} build the saved config?")  # fmt: skip
    with torch.no_grad():  # deterministic chains still start from drawn noise: seed it alike
        first, _ = policy.act(obs, deterministic=True, generator=torch.Generator(policy.device).manual_seed(1))
        second, _ = loaded.act(obs, deterministic=True, generator=torch.Generator(policy.device).manual_seed(1))
        log_prob, _, value = loaded.evaluate(obs, extras)
    _require(torch.equal(first, second), "save_load", "the loaded policy's deterministic actions differ")
    _require(torch.equal(log_prob, policy.evaluate(obs, extras)[0].detach()), "save_load",
             "the loaded policy's log-probs differ (weights or statistics not saved?)")
    _require(torch.equal(value, extras["value"]) or _close(value, extras["value"]), "save_load",
             "the loaded policy's values differ")


def run_checks(
    factory: str,
    config: Mapping[str, Any],
    io_spec: Mapping[str, Any] | None = None,
    stats: Mapping[str, Any] | None = None,
    report: Callable[[CheckResult], None] | None = None,
    device: str = "cpu",
) -> torch.nn.Module:
    """Build the policy with ``factory(config, io_spec, stats)`` and run every check; returns the policy.

    ``io_spec`` and ``stats`` default to :func:`synthetic_io_spec` and :func:`synthetic_stats`.

    Raises:
        PolicyConformanceError: the first check that failed, named.
    """
    io_spec = dict(io_spec or synthetic_io_spec())
    stats = stats or synthetic_stats(io_spec)
    report = report or (lambda result: None)
    torch.manual_seed(0)
    try:
        policy = build_from_factory(factory, config, io_spec, stats).to(device).eval()
    except (TypeError, ValueError, KeyError) as error:
        raise PolicyConformanceError("build", f"{factory}(config, io_spec, stats) failed: {error}") from error
    report(CheckResult("build", True, f"{type(policy).__name__}, {sum(p.numel() for p in policy.parameters())} "
                       "parameters"))  # fmt: skip
    obs = synthetic_observation(io_spec, BATCH_SIZE)
    actions, extras = check_act(policy, obs, io_spec)
    report(CheckResult("act", True, f"actions {tuple(actions.shape)}, extras {sorted(extras.keys())}"))
    steps = [
        ("units", lambda: check_units(policy, obs, io_spec, stats, actions)),
        ("seeded", lambda: check_seeded(policy, obs, actions)),
        ("evaluate", lambda: check_evaluate(policy, obs, extras)),
        ("gradients", lambda: check_gradients(policy, obs, extras)),
        ("bc_loss", lambda: check_bc_loss(policy, obs, actions)),
        ("save_load", lambda: check_save_load(policy, obs, extras)),
    ]
    for name, step in steps:
        step()
        report(CheckResult(name, True))
    return policy
