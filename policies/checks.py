"""The policy conformance kit: what every policy of vla-rl must do (``vla-rl policies check``).

:func:`run_checks` builds the policy through its factory (:mod:`policies.factory`) for an io spec and
dataset statistics, and checks, in order: its ``config`` (a dataclass with ``to_dict()`` or a plain dict, JSON,
with ``chunk_size``), ``act``'s shapes and extras, actions unnormalised into the env's units (they follow
the dataset's action statistics) and clipped to its bounds, seeded sampling, ``evaluate`` recomputing
``act``'s log-probs and values exactly, a gradient through ``evaluate``, ``bc_loss`` on the torch batches
SFT passes, and a ``save_pretrained`` (which returns the folder) / ``load_pretrained`` round trip that gives
identical outputs. It stops at the first failure with a :class:`PolicyConformanceError` naming the check;
an exception raised inside the policy becomes one such error naming the method and where it was raised.

Without an env, the io spec is :func:`synthetic_io_spec`: two cameras, a state, and action bounds far
from [-1, 1] whose dataset statistics (:func:`synthetic_stats`) cover a narrow part of them. With an env,
its own bounds. Either way the units check builds the policy a second time, with the same weights and the
action statistics shifted by a fifth of the bounds' width: a policy that unnormalises its actions moves
them by that shift, one that forgets to does not move them and fails, whatever the bounds.
"""

from __future__ import annotations

import json
import tempfile
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contract.conformance import CheckResult, ConformanceError
from policies.factory import PolicyProtocolError, build_from_factory, chunk_size_of, factory_of, plain_dict

#: Seconds are cheap here: small batches.
BATCH_SIZE = 3
#: log-probs and values recomputed by ``evaluate`` must equal ``act``'s within this (float32 round-off).
TOLERANCE = 1e-4
#: The units check shifts the action statistics by this fraction of the bounds' width.
STATS_SHIFT = 0.2


class PolicyConformanceError(ConformanceError):
    """A policy conformance check failed; ``check`` names it."""


_require = PolicyConformanceError.require


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


def shifted_stats(stats: Mapping[str, Any], io_spec: Mapping[str, Any], fraction: float = STATS_SHIFT) -> dict:
    """``stats`` with every action statistic of a location (min, max, q01, q99, mean) moved by ``fraction`` of the
    bounds' width ``high - low``; the spreads (std) are kept. Returns ``(stats, shift (A,))``."""
    shift = fraction * (np.asarray(io_spec["action_high"], float) - np.asarray(io_spec["action_low"], float))
    action = {key: (np.asarray(value, float) + (shift if key != "std" else 0.0)).tolist()
              for key, value in stats["action"].items()}  # fmt: skip
    return {**stats, "action": action}, shift


def _name(policy: torch.nn.Module, method: str) -> str:
    return f"{type(policy).__name__}.{method}"


def _where(error: BaseException) -> str:
    """``file:line`` where ``error`` was raised (the innermost frame)."""
    frames = traceback.extract_tb(error.__traceback__)
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def call(policy: torch.nn.Module, method: str, check: str, *args: Any, **kwargs: Any) -> Any:
    """``policy.method(*args, **kwargs)``; an exception inside the policy is one :class:`PolicyConformanceError` of
    ``check`` that names the method, the exception and where it was raised (no traceback to read)."""
    try:
        return getattr(policy, method)(*args, **kwargs)
    except PolicyConformanceError:
        raise
    except Exception as error:  # noqa: BLE001 - a failure inside the plug-in, reported in one line
        raise PolicyConformanceError(check, f"{_name(policy, method)} raised {type(error).__name__}: {error}"
                                     f"{_where(error)}") from error  # fmt: skip


def _close(first: torch.Tensor, second: torch.Tensor) -> bool:
    return first.shape == second.shape and torch.allclose(first.float(), second.float(), atol=TOLERANCE, rtol=0)


def check_config(policy: torch.nn.Module) -> int:
    """``config`` is a dataclass with ``to_dict()`` or a plain dict, stored as JSON (config.json), with a positive
    integer ``chunk_size`` (what SFT and the rollout read, through :func:`policies.factory.chunk_size_of`).
    Returns the chunk size."""
    try:
        config = plain_dict(getattr(policy, "config", None), "config")
        chunk_size = chunk_size_of(policy)
    except PolicyProtocolError as error:
        raise PolicyConformanceError("config", str(error)) from error
    try:
        json.dumps(config)
    except (TypeError, ValueError) as error:
        raise PolicyConformanceError("config", f"the policy's config does not serialise to JSON (config.json): {error}; "
                                     "keep it to lists, dicts, str, int, float, bool and None") from error  # fmt: skip
    return chunk_size


def check_act(policy: torch.nn.Module, obs: Mapping[str, Any], io_spec: Mapping[str, Any]) -> tuple:
    """``act`` returns ``(B, H, A)`` finite actions and extras with log_prob ``(B, H, A)`` and value ``(B,)``."""
    chunk_size = chunk_size_of(policy)
    action_dim = len(io_spec["action_low"])
    generator = torch.Generator(device=policy.device).manual_seed(0)
    actions, extras = call(policy, "act", "act", obs, deterministic=False, generator=generator)
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


def _deterministic(policy: torch.nn.Module, obs: Mapping[str, Any], check: str) -> torch.Tensor:
    generator = torch.Generator(policy.device).manual_seed(1)  # deterministic chains still start from drawn noise
    actions, _ = call(policy, "act", check, obs, deterministic=True, generator=generator)
    return actions.detach().float().cpu()


def check_units(policy: torch.nn.Module, obs: Mapping[str, Any], io_spec: Mapping[str, Any], stats: Mapping,
                sampled: torch.Tensor, rebuild: Callable[[Mapping], torch.nn.Module]) -> None:  # fmt: skip
    """Sampled actions lie within the env's bounds; deterministic ones near the statistics' range, in env units, and
    they follow the statistics: ``rebuild(stats)`` (the same weights, action statistics shifted by ``STATS_SHIFT`` of
    the bounds' width) moves them by that shift. A policy that forgets to unnormalise does not move them."""
    low = torch.tensor(io_spec["action_low"], dtype=torch.float32)
    high = torch.tensor(io_spec["action_high"], dtype=torch.float32)
    sampled = sampled.detach().float().cpu()
    _require(bool(((sampled >= low) & (sampled <= high)).all()), "units",
             f"sampled actions leave the env's bounds {low.tolist()}..{high.tolist()}: clip them (env units)")
    deterministic = _deterministic(policy, obs, "units")
    stat_min = torch.tensor(stats["action"]["min"], dtype=torch.float32)
    stat_max = torch.tensor(stats["action"]["max"], dtype=torch.float32)
    width = stat_max - stat_min
    hint = "unnormalise the head's output with the statistics (policies.normalization.Normalizer.unnormalize)"
    # An untrained head's normalised output reaches |a| ~ 3: allow up to 5 (min_max) around the range.
    inside = (deterministic >= stat_min - 2 * width) & (deterministic <= stat_max + 2 * width)
    _require(bool(inside.all()), "units",
             f"deterministic actions {deterministic.amin((0, 1)).tolist()}..{deterministic.amax((0, 1)).tolist()} lie "
             f"far from the dataset's action range {stat_min.tolist()}..{stat_max.tolist()}: {hint}")  # fmt: skip
    moved_stats, shift = shifted_stats(stats, io_spec)
    moved = _deterministic(rebuild(moved_stats), obs, "units")
    mean_shift = (moved - deterministic).mean((0, 1))
    expected = torch.tensor(shift, dtype=torch.float32)
    _require(bool(((mean_shift - expected).abs() <= 0.1 * expected.abs()).all()), "units",
             f"with the dataset's action statistics moved by {_rounded(expected)} (env units) the deterministic "
             f"actions moved by {_rounded(mean_shift)}: the policy's actions must follow the statistics it was given; "
             f"{hint}")  # fmt: skip


def _rounded(values: torch.Tensor) -> list[float]:
    return [float(f"{v:.4g}") for v in values.tolist()]


def check_seeded(policy: torch.nn.Module, obs: Mapping[str, Any], actions: torch.Tensor) -> None:
    """The same generator seed samples the same chunk (rollouts are reproducible)."""
    generator = torch.Generator(device=policy.device).manual_seed(0)
    again, _ = call(policy, "act", "seeded", obs, deterministic=False, generator=generator)
    _require(torch.equal(again, actions), "seeded", "act with the same generator seed sampled different actions; "
             "draw every random number from the `generator` argument")  # fmt: skip


def check_evaluate(policy: torch.nn.Module, obs: Mapping[str, Any], extras: Mapping[str, torch.Tensor]) -> None:
    """``evaluate`` recomputes act's log-probs and values exactly (PPO's ratio is 1 before the update)."""
    with torch.no_grad():
        log_prob, entropy, value = call(policy, "evaluate", "evaluate", obs, extras)
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
    _require(isinstance(loss, torch.Tensor), check, f"the loss must be a scalar tensor, got {type(loss).__name__}")
    _require(loss.dim() == 0 and bool(torch.isfinite(loss)), check, f"the loss must be a finite scalar, got {loss}")
    loss.backward()
    grads = [p.grad for p in policy.parameters() if p.requires_grad and p.grad is not None]
    _require(bool(grads), check, "no trainable parameter received a gradient")
    _require(all(bool(torch.isfinite(g).all()) for g in grads), check, "a gradient contains NaN or inf")
    policy.zero_grad(set_to_none=True)


def check_gradients(policy: torch.nn.Module, obs: Mapping[str, Any], extras: Mapping[str, torch.Tensor]) -> None:
    """``evaluate``'s log-prob and value have gradients (PPO and the critic can learn)."""
    policy.train()
    log_prob, _, value = call(policy, "evaluate", "gradients", obs, extras)
    _gradient_reaches(policy, log_prob.float().mean() + value.float().mean(), "gradients")
    policy.eval()


def sft_batch(obs: Mapping[str, Any], actions: torch.Tensor) -> dict[str, Any]:
    """A behaviour-cloning batch as SFT passes it to ``bc_loss``: torch CPU tensors (images uint8 ``(B, H, W, 3)``,
    state float32 ``(B, S)``, action float32 ``(B, H, A)`` in env units, action_mask bool ``(B, H)``) and a list of
    B instructions; the last action of each chunk is masked out, as at an episode's end."""
    actions = actions.detach().float().cpu()
    mask = torch.ones(actions.shape[:2], dtype=torch.bool)
    if actions.shape[1] > 1:
        mask[:, -1] = False
    return {
        "images": {camera: torch.from_numpy(np.ascontiguousarray(images)) for camera, images in obs["images"].items()},
        "state": torch.from_numpy(np.asarray(obs["state"], np.float32)),
        "instruction": list(obs["instruction"]),
        "action": actions,
        "action_mask": mask,
    }


def check_bc_loss(policy: torch.nn.Module, obs: Mapping[str, Any], actions: torch.Tensor) -> None:
    """``bc_loss`` on SFT's batch (:func:`sft_batch`: torch tensors, chunks in env units) is a finite scalar with
    a gradient."""
    policy.train()
    _gradient_reaches(policy, call(policy, "bc_loss", "bc_loss", sft_batch(obs, actions)), "bc_loss")
    policy.eval()


def check_save_load(policy: torch.nn.Module, obs: Mapping[str, Any], extras: Mapping[str, torch.Tensor]) -> None:
    """``save_pretrained`` returns the folder it wrote; :func:`policies.hub.load_pretrained` of it gives the same
    policy, outputs identical."""
    from policies.hub import load_pretrained

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "policy"
        returned = call(policy, "save_pretrained", "save_load", path)
        _require(returned is not None and Path(returned).resolve() == path.resolve(), "save_load",
                 f"{_name(policy, 'save_pretrained')}(folder) returned {returned!r}; it must return the folder it wrote "
                 "(`return policies.hub.save_pretrained(self, folder)`): SFT and RL read their policy from it")  # fmt: skip
        try:
            loaded = load_pretrained(path, device=policy.device).eval()
        except Exception as error:  # noqa: BLE001 - a failure inside the plug-in, reported in one line
            raise PolicyConformanceError("save_load", f"load_pretrained of the saved folder raised "
                                         f"{type(error).__name__}: {error}{_where(error)}") from error  # fmt: skip
    _require(type(loaded) is type(policy), "save_load", f"loaded a {type(loaded).__name__}, saved a "
             f"{type(policy).__name__}: does the factory {factory_of(policy)!r} build the saved config?")  # fmt: skip
    with torch.no_grad():
        first = _deterministic(policy, obs, "save_load")
        second = _deterministic(loaded, obs, "save_load")
        log_prob, _, value = call(loaded, "evaluate", "save_load", obs, extras)
        original_log_prob = call(policy, "evaluate", "save_load", obs, extras)[0]
    _require(torch.equal(first, second), "save_load", "the loaded policy's deterministic actions differ")
    _require(torch.equal(log_prob, original_log_prob), "save_load",
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

    ``io_spec`` and ``stats`` default to :func:`synthetic_io_spec` and :func:`synthetic_stats` (of ``io_spec``).
    ``report`` gets each passed check and the failed one (``passed=False``, the message as detail).

    Raises:
        PolicyConformanceError: the first check that failed, named.
    """
    io_spec = dict(io_spec or synthetic_io_spec())
    stats = stats or synthetic_stats(io_spec)
    report = report or (lambda result: None)

    def build(with_stats: Mapping) -> torch.nn.Module:
        torch.manual_seed(0)  # the same weights at every build
        try:
            return build_from_factory(factory, config, io_spec, with_stats).to(device).eval()
        except Exception as error:  # noqa: BLE001 - a failure inside the plug-in, reported in one line
            raise PolicyConformanceError("build", f"{factory}(config, io_spec, stats) raised {type(error).__name__}: "
                                         f"{error}{_where(error)}") from error  # fmt: skip

    state: dict[str, Any] = {}

    def first_build() -> str:
        state["policy"] = build(stats)
        return f"{type(state['policy']).__name__}, {sum(p.numel() for p in state['policy'].parameters())} parameters"

    def config_step() -> str:
        return f"chunk_size {check_config(state['policy'])}, config a {type(state['policy'].config).__name__}"

    def act_step() -> str:
        state["obs"] = synthetic_observation(io_spec, BATCH_SIZE)
        state["actions"], state["extras"] = check_act(state["policy"], state["obs"], io_spec)
        return f"actions {tuple(state['actions'].shape)}, extras {sorted(state['extras'].keys())}"

    steps: list[tuple[str, Callable[[], str | None]]] = [
        ("build", first_build),
        ("config", config_step),
        ("act", act_step),
        ("units", lambda: check_units(state["policy"], state["obs"], io_spec, stats, state["actions"], build)),
        ("seeded", lambda: check_seeded(state["policy"], state["obs"], state["actions"])),
        ("evaluate", lambda: check_evaluate(state["policy"], state["obs"], state["extras"])),
        ("gradients", lambda: check_gradients(state["policy"], state["obs"], state["extras"])),
        ("bc_loss", lambda: check_bc_loss(state["policy"], state["obs"], state["actions"])),
        ("save_load", lambda: check_save_load(state["policy"], state["obs"], state["extras"])),
    ]
    for name, step in steps:
        try:
            detail = step()
        except PolicyConformanceError as error:
            report(CheckResult(name, False, str(error)))
            raise
        except Exception as error:  # noqa: BLE001 - what a policy returned broke the check itself
            failure = PolicyConformanceError(name, f"{type(error).__name__}: {error}{_where(error)}")
            report(CheckResult(name, False, str(failure)))
            raise failure from error
        report(CheckResult(name, True, detail or ""))
    return state["policy"]
