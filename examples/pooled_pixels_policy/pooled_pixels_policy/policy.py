"""A policy written from scratch: each camera average-pooled to a few pixels, the normalised state, an MLP,
and a Gaussian over the action chunk (a learned std per chunk step and action dimension), with a critic.

It is what ``policy.factory=pooled_pixels_policy.policy:make`` builds; vla-rl knows nothing else about it.
It reuses two pieces of vla-rl a policy may use: the normaliser (``policies.normalization.Normalizer``, the
dataset statistics in and out) and ``policies.hub.save_pretrained`` (weights, config, io spec, statistics and
this factory's path, so ``load_pretrained`` rebuilds it through :func:`make`). It ignores the instruction:
fine for one task per scene, not for several tasks in one scene.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from policies.normalization import Normalizer


@dataclass
class ValueSection:
    hidden_dims: list[int] = field(default_factory=lambda: [64])
    detach_input: bool = False  # the critic's loss does not move the shared trunk


@dataclass
class NormalizationSection:
    action: str = "min_max"
    state: str = "mean_std"


@dataclass
class PooledPixelsConfig:
    """pool_size: pixels per side after pooling; hidden_dims: the trunk MLP; chunk_size: actions H per chunk;
    init_log_std: the Gaussian's starting log std (normalised units)."""

    pool_size: int = 8
    hidden_dims: list[int] = field(default_factory=lambda: [128, 128])
    chunk_size: int = 4
    init_log_std: float = -1.0
    value: ValueSection = field(default_factory=ValueSection)
    normalization: NormalizationSection = field(default_factory=NormalizationSection)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PooledPixelsConfig:
        data = dict(data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown policy keys {unknown}; the pooled_pixels policy knows {sorted(known)}")
        sections = {"value": ValueSection, "normalization": NormalizationSection}
        for name, section in sections.items():
            if name in data:
                extra = sorted(set(data[name]) - {f.name for f in dataclasses.fields(section)})
                if extra:
                    raise ValueError(f"unknown keys {extra} in policy.{name}")
                data[name] = section(**data[name])
        config = cls(**data)
        for name in ("pool_size", "chunk_size"):
            if not isinstance(getattr(config, name), int) or getattr(config, name) < 1:
                raise ValueError(f"policy.{name}={getattr(config, name)!r} must be a positive integer")
        return config


def mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(nn.SiLU())
    return nn.Sequential(*layers)


class PooledPixelsPolicy(nn.Module):
    """io_spec: ``camera_names``, ``image_size``, ``state_dim``, ``action_low``, ``action_high`` (a dict)."""

    def __init__(self, config: PooledPixelsConfig, io_spec: Mapping[str, Any], stats: Mapping | None) -> None:
        super().__init__()
        self.config, self.io_spec = config, dict(io_spec)
        self.cameras = list(io_spec["camera_names"])
        self.state_dim = int(io_spec["state_dim"])
        self.action_dim = len(io_spec["action_low"])
        modes = {"action": config.normalization.action}
        if self.state_dim:
            modes["state"] = config.normalization.state
        self.normalizer = Normalizer(stats, modes, {"action": self.action_dim, "state": self.state_dim})
        features = len(self.cameras) * 3 * config.pool_size**2 + self.state_dim
        self.trunk = mlp([features, *config.hidden_dims])
        self.mean = nn.Linear(config.hidden_dims[-1], config.chunk_size * self.action_dim)
        nn.init.zeros_(self.mean.bias)
        nn.init.normal_(self.mean.weight, std=0.01)
        self.log_std = nn.Parameter(torch.full((config.chunk_size, self.action_dim), float(config.init_log_std)))
        self.value_head = mlp([config.hidden_dims[-1], *config.value.hidden_dims, 1])
        self.register_buffer("action_low", torch.tensor(io_spec["action_low"], dtype=torch.float32), persistent=False)
        self.register_buffer("action_high", torch.tensor(io_spec["action_high"], dtype=torch.float32), persistent=False)

    @property
    def stats(self) -> dict:
        return self.normalizer.stats

    @property
    def device(self) -> torch.device:
        return self.action_low.device

    def features(self, obs: Mapping[str, Any]) -> torch.Tensor:
        """Observation batch -> trunk features ``(B, D)``."""
        pooled = []
        for camera in self.cameras:
            image = torch.as_tensor(np.asarray(obs["images"][camera])).to(self.device)  # (B, H, W, 3) uint8
            image = image.permute(0, 3, 1, 2).float() / 255.0
            pooled.append(F.adaptive_avg_pool2d(image, self.config.pool_size).flatten(1))
        if self.state_dim:
            state = torch.as_tensor(np.asarray(obs["state"]), dtype=torch.float32).to(self.device)
            pooled.append(self.normalizer.normalize("state", state))
        return self.trunk(torch.cat(pooled, dim=1))

    def distribution(self, features: torch.Tensor) -> torch.distributions.Normal:
        mean = self.mean(features).view(-1, self.config.chunk_size, self.action_dim)
        return torch.distributions.Normal(mean, self.log_std.exp().expand_as(mean))

    def critic(self, features: torch.Tensor) -> torch.Tensor:
        return self.value_head(features.detach() if self.config.value.detach_input else features).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: Mapping[str, Any], deterministic: bool = False, generator: torch.Generator | None = None):
        """``(actions (B, H, A) in env units, extras)``; extras: log_prob (B, H, A), value (B,), the normalised sample."""
        features = self.features(obs)
        dist = self.distribution(features)
        noise = torch.randn(dist.mean.shape, generator=generator, device=self.device)
        normalized = dist.mean if deterministic else dist.mean + dist.stddev * noise
        actions = self.normalizer.unnormalize("action", normalized)
        actions = torch.maximum(torch.minimum(actions, self.action_high), self.action_low)
        extras = {"log_prob": dist.log_prob(normalized), "value": self.critic(features), "action_normalized": normalized}
        return actions, extras

    def evaluate(self, obs: Mapping[str, Any], extras: Mapping[str, torch.Tensor]):
        """``(log_prob (B, H, A), entropy (B, H, A), value (B,))`` of the stored normalised sample."""
        features = self.features(obs)
        dist = self.distribution(features)
        normalized = torch.as_tensor(extras["action_normalized"], dtype=torch.float32).to(self.device)
        return dist.log_prob(normalized), dist.entropy(), self.critic(features)

    def value(self, obs: Mapping[str, Any]) -> torch.Tensor:
        return self.critic(self.features(obs))

    def bc_loss(self, batch: Mapping[str, Any]) -> torch.Tensor:
        """Gaussian negative log-likelihood of ``batch["action"]`` ``(B, H, A)`` (env units), masked by ``action_mask``."""
        target = self.normalizer.normalize("action", torch.as_tensor(np.asarray(batch["action"]), dtype=torch.float32)
                                           .to(self.device))  # fmt: skip
        nll = -self.distribution(self.features(batch)).log_prob(target).mean(-1)  # (B, H)
        mask = batch.get("action_mask") if hasattr(batch, "get") else None
        if mask is None:
            return nll.mean()
        weights = torch.as_tensor(np.asarray(mask), dtype=torch.float32).to(self.device)
        return (nll * weights).sum() / weights.sum().clamp_min(1.0)

    def save_pretrained(self, folder: str | Path) -> Path:
        from policies.hub import save_pretrained

        return save_pretrained(self, folder)


def validate_policy_config(config: Mapping[str, Any]) -> None:
    """Checked by the driver before any work (``vla-rl`` turns the ValueError into a config error)."""
    PooledPixelsConfig.from_dict(config)


def make(config: Mapping[str, Any], io_spec: Mapping[str, Any], stats: Mapping | None) -> PooledPixelsPolicy:
    """The factory: ``policy.factory=pooled_pixels_policy.policy:make``."""
    return PooledPixelsPolicy(PooledPixelsConfig.from_dict(config), io_spec, stats)
