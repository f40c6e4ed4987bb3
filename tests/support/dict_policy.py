"""A small policy of a user's own whose ``config`` is a plain dict (the protocol allows it), and variants with one
mistake each, for the tests of the policy conformance kit and of SFT. Used by import path:
``policy.factory=dict_policy:make`` (tests/conftest.py puts tests/support on the path).

The policy: each camera's mean colour and the normalised state, a linear layer, a Gaussian over the action chunk
in normalised units (learned log std), unnormalised with the dataset's min/max into the env's units.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from policies.hub import save_pretrained
from policies.normalization import Normalizer

DEFAULTS = {"chunk_size": 2, "hidden_dim": 16}


class DictConfigPolicy(nn.Module):
    def __init__(self, config: Mapping[str, Any], io_spec: Mapping[str, Any], stats: Mapping | None) -> None:
        super().__init__()
        unknown = sorted(set(config) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"unknown policy keys {unknown}; known: {sorted(DEFAULTS)}")
        self.config = {**DEFAULTS, **config}  # a plain dict
        self.io_spec = dict(io_spec)
        self.cameras = list(io_spec["camera_names"])
        self.state_dim, self.action_dim = int(io_spec["state_dim"]), len(io_spec["action_low"])
        self.chunk = int(self.config["chunk_size"])
        self.normalizer = Normalizer(stats, {"action": "min_max", "state": "mean_std"},
                                     {"action": self.action_dim, "state": self.state_dim})  # fmt: skip
        features = 3 * len(self.cameras) + self.state_dim
        self.trunk = nn.Sequential(nn.Linear(features, self.config["hidden_dim"]), nn.Tanh())
        self.mean = nn.Linear(self.config["hidden_dim"], self.chunk * self.action_dim)
        self.log_std = nn.Parameter(torch.full((self.chunk, self.action_dim), -1.0))
        self.value_head = nn.Linear(self.config["hidden_dim"], 1)
        self.register_buffer("low", torch.tensor(io_spec["action_low"], dtype=torch.float32), persistent=False)
        self.register_buffer("high", torch.tensor(io_spec["action_high"], dtype=torch.float32), persistent=False)

    @property
    def stats(self) -> dict:
        return self.normalizer.stats

    @property
    def device(self) -> torch.device:
        return self.low.device

    def features(self, obs: Mapping[str, Any]) -> torch.Tensor:
        """``(B, D)``: mean colour per camera (images uint8 ``(B, H, W, 3)``, numpy or torch) and the state."""
        parts = [torch.as_tensor(np.asarray(obs["images"][c]), dtype=torch.float32).mean((1, 2)) / 255 for c in self.cameras]
        state = torch.as_tensor(np.asarray(obs["state"]), dtype=torch.float32)
        parts.append(self.normalizer.normalize("state", state))
        return self.trunk(torch.cat(parts, 1).to(self.device))

    def distribution(self, features: torch.Tensor) -> torch.distributions.Normal:
        mean = self.mean(features).view(-1, self.chunk, self.action_dim)
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def to_env_units(self, normalized: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(self.normalizer.unnormalize("action", normalized), self.high), self.low)

    @torch.no_grad()
    def act(self, obs, deterministic: bool = False, generator: torch.Generator | None = None):
        features = self.features(obs)
        dist = self.distribution(features)
        noise = torch.randn(dist.mean.shape, generator=generator, device=self.device)
        normalized = dist.mean if deterministic else dist.mean + dist.stddev * noise
        extras = {"log_prob": dist.log_prob(normalized), "value": self.value_head(features).squeeze(-1),
                  "action_normalized": normalized}  # fmt: skip
        return self.to_env_units(normalized), extras

    def evaluate(self, obs, extras):
        features = self.features(obs)
        dist = self.distribution(features)
        normalized = torch.as_tensor(extras["action_normalized"], dtype=torch.float32).to(self.device)
        return dist.log_prob(normalized), dist.entropy(), self.value_head(features).squeeze(-1)

    def value(self, obs) -> torch.Tensor:
        return self.value_head(self.features(obs)).squeeze(-1)

    def bc_loss(self, batch) -> torch.Tensor:
        """Masked Gaussian NLL of ``batch["action"]`` ``(B, H, A)`` (env units; SFT passes torch tensors)."""
        target = self.normalizer.normalize("action", torch.as_tensor(batch["action"], dtype=torch.float32).to(self.device))
        nll = -self.distribution(self.features(batch)).log_prob(target).mean(-1)
        weights = torch.as_tensor(batch["action_mask"], dtype=torch.float32).to(self.device)
        return (nll * weights).sum() / weights.sum().clamp_min(1.0)

    def save_pretrained(self, folder: str | Path) -> Path:
        return save_pretrained(self, folder)


class ForgetsToUnnormalise(DictConfigPolicy):
    """Clips the head's normalised output to the env's bounds without the statistics."""

    def to_env_units(self, normalized: torch.Tensor) -> torch.Tensor:
        return torch.maximum(torch.minimum(normalized, self.high), self.low)


class SavesWithoutReturning(DictConfigPolicy):
    def save_pretrained(self, folder: str | Path) -> None:
        save_pretrained(self, folder)


class NumpyOnlyBCLoss(DictConfigPolicy):
    """Written for numpy batches: ``.astype`` on what SFT passes as torch tensors."""

    def bc_loss(self, batch) -> torch.Tensor:
        return super().bc_loss({**batch, "action": batch["action"].astype(np.float32)})


class HorizonInsteadOfChunkSize(DictConfigPolicy):
    """Calls its chunk size ``horizon``: SFT and the rollout could not tell how many actions a chunk holds."""

    def __init__(self, config, io_spec, stats) -> None:
        super().__init__(config, io_spec, stats)
        self.config = {"horizon": self.config["chunk_size"], "hidden_dim": self.config["hidden_dim"]}


def make(config, io_spec, stats) -> DictConfigPolicy:
    return DictConfigPolicy(config, io_spec, stats)


def make_forgetful(config, io_spec, stats) -> ForgetsToUnnormalise:
    return ForgetsToUnnormalise(config, io_spec, stats)


def make_saving_without_return(config, io_spec, stats) -> SavesWithoutReturning:
    return SavesWithoutReturning(config, io_spec, stats)


def make_numpy_bc_loss(config, io_spec, stats) -> NumpyOnlyBCLoss:
    return NumpyOnlyBCLoss(config, io_spec, stats)


def make_without_chunk_size(config, io_spec, stats) -> HorizonInsteadOfChunkSize:
    return HorizonInsteadOfChunkSize(config, io_spec, stats)


class NaNCritic(DictConfigPolicy):
    """A critic that answers NaN: every advantage, hence the losses, are NaN while the env is finite."""

    def value(self, obs) -> torch.Tensor:
        return super().value(obs) * float("nan")

    def act(self, obs, deterministic: bool = False, generator: torch.Generator | None = None):
        actions, extras = super().act(obs, deterministic, generator)
        return actions, {**extras, "value": extras["value"] * float("nan")}

    def evaluate(self, obs, extras):
        log_prob, entropy, value = super().evaluate(obs, extras)
        return log_prob, entropy, value * float("nan")


def make_nan_critic(config, io_spec, stats) -> NaNCritic:
    return NaNCritic(config, io_spec, stats)
