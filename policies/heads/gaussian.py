"""Gaussian action head: the PPO baseline.

The chunk is a diagonal Gaussian ``N(mu(e), sigma)`` over ``(H, A)``: ``mu`` is an MLP on the
observation embedding ``e``; ``sigma`` is a learned parameter (state-independent) or a second
output of the MLP (state-dependent, bounded through a tanh scaling of the log-std).

Optional tanh squashing (as in SAC, Haarnoja et al. 2018, arXiv 1801.01290, appendix C): the
action is ``a = tanh(u)`` with ``u ~ N(mu, sigma)`` and, by the change of variables,
``log p(a) = log N(u; mu, sigma) - log(1 - tanh(u)^2)``. The correction is computed in the
numerically stable form ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``, and the pre-tanh
sample ``u`` is kept in the replay so that ``log_prob`` never has to invert tanh near +-1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from policies.heads.base import ActionHead
from policies.heads.common import (
    check_chunks,
    check_embedding,
    gaussian_entropy,
    gaussian_log_prob,
    masked_mean,
)


@dataclass
class GaussianHeadConfig:
    """Options of :class:`GaussianHead` (defaults work on CPU).

    hidden_dim, num_layers: the mean MLP (``num_layers`` hidden layers of ``hidden_dim``, SiLU).
    std_mode: "parameter" (state-independent log-std per chunk entry) or "state" (an MLP output).
    init_std: initial standard deviation (normalised action units).
    log_std_min, log_std_max: bounds of the log-std (clamp for "parameter", tanh scaling for "state").
    squash: apply tanh to the sample (actions in (-1, 1)); entropy has no closed form then.
    bc_objective: "nll" (negative log-likelihood, trains the std too) or "mse" (on the mean action).
    detach_embedding: the log-prob reads the embedding without moving the encoders (the policy then stores
        the embedding at act time and the update does not re-encode the images).
    """

    hidden_dim: int = 256
    num_layers: int = 2
    std_mode: Literal["parameter", "state"] = "parameter"
    init_std: float = 0.5
    log_std_min: float = -5.0
    log_std_max: float = 1.0
    squash: bool = False
    bc_objective: Literal["nll", "mse"] = "nll"
    detach_embedding: bool = False

    def __post_init__(self) -> None:
        if self.std_mode not in ("parameter", "state"):
            raise ValueError(f"gaussian head: std_mode={self.std_mode!r}; use 'parameter' or 'state'")
        if self.bc_objective not in ("nll", "mse"):
            raise ValueError(f"gaussian head: bc_objective={self.bc_objective!r}; use 'nll' or 'mse'")
        if not self.log_std_min < math.log(self.init_std) < self.log_std_max:
            raise ValueError(
                f"gaussian head: log(init_std)={math.log(self.init_std):.3f} must lie inside "
                f"(log_std_min={self.log_std_min}, log_std_max={self.log_std_max}); change one of them"
            )


def tanh_log_abs_det_jacobian(pre_tanh: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2)`` element-wise, computed as ``2 (log 2 - u - softplus(-2u))`` (stable for large |u|)."""
    return 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))


def mlp(input_dim: int, hidden_dim: int, num_layers: int, output_dim: int) -> nn.Sequential:
    """``num_layers`` hidden SiLU layers of width ``hidden_dim``, then a linear output."""
    layers: list[nn.Module] = []
    width = input_dim
    for _ in range(num_layers):
        layers += [nn.Linear(width, hidden_dim), nn.SiLU()]
        width = hidden_dim
    layers.append(nn.Linear(width, output_dim))
    return nn.Sequential(*layers)


class GaussianHead(ActionHead):
    """Diagonal Gaussian over action chunks ``(B, H, A)``; see the module docstring for the formulas.

    With ``rl_feature_dim`` F > 0 the mean MLP's first layer also reads RL-only features ``(B, F)``
    (``policy.rl_vision``) through a linear map ``P``: ``h1 = W1 e + b1 + P f``. ``P`` starts at zero, so the
    head is at first the one without features, and behaviour cloning (which has no features) reads ``e`` alone.
    """

    config_class = GaussianHeadConfig
    reads_rl_features = True

    def __init__(
        self, embedding_dim: int, chunk_size: int, action_dim: int, config: GaussianHeadConfig | None = None,
        rl_feature_dim: int = 0,
    ) -> None:  # fmt: skip
        super().__init__()
        self.config = config or GaussianHeadConfig()
        self.embedding_dim, self.chunk_size, self.action_dim = embedding_dim, chunk_size, action_dim
        flat = chunk_size * action_dim
        outputs = 2 * flat if self.config.std_mode == "state" else flat
        self.network = mlp(embedding_dim, self.config.hidden_dim, self.config.num_layers, outputs)
        init_log_std = math.log(self.config.init_std)
        if self.config.std_mode == "parameter":
            self.log_std = nn.Parameter(torch.full((chunk_size, action_dim), init_log_std))
        else:
            # Start the state-dependent std at init_std: the tanh scaling maps raw=atanh(c) to init_log_std.
            low, high = self.config.log_std_min, self.config.log_std_max
            centre = 2.0 * (init_log_std - low) / (high - low) - 1.0
            final = self.network[-1]
            assert isinstance(final, nn.Linear)
            with torch.no_grad():
                final.weight[flat:].mul_(0.01)
                final.bias[flat:].fill_(math.atanh(centre))
        first = self.network[0]
        assert isinstance(first, nn.Linear)
        self.build_feature_projection(rl_feature_dim, first.out_features)  # last: the other weights are unchanged

    @property
    def log_prob_reaches_embedding(self) -> bool:
        return not self.config.detach_embedding

    def distribution_parameters(
        self, embedding: torch.Tensor, rl_features: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std of the (pre-tanh) Gaussian, both ``(B, H, A)``, from the embedding ``(B, D)`` and, where
        the head reads them, the RL-only features ``(B, F)``."""
        check_embedding(embedding, self.embedding_dim)
        batch = embedding.shape[0]
        shape = (batch, self.chunk_size, self.action_dim)
        source = embedding.detach() if self.config.detach_embedding else embedding
        if self.feature_projection is None or rl_features is None:
            output = self.network(source)
        else:
            output = self.network[1:](self.network[0](source) + self.feature_projection(rl_features))
        low, high = self.config.log_std_min, self.config.log_std_max
        if self.config.std_mode == "parameter":
            mean = output.view(shape)
            log_std = self.log_std.clamp(low, high).expand(shape)
        else:
            mean, raw = output.view(batch, 2, self.chunk_size, self.action_dim).unbind(1)
            log_std = low + 0.5 * (high - low) * (torch.tanh(raw) + 1.0)
        return mean, log_std.exp()

    def _log_prob_of_pre_tanh(
        self, pre_tanh: torch.Tensor, mean: torch.Tensor, std: torch.Tensor
    ) -> torch.Tensor:
        log_prob = gaussian_log_prob(pre_tanh, mean, std)
        if self.config.squash:
            log_prob = log_prob - tanh_log_abs_det_jacobian(pre_tanh)
        return log_prob

    def sample(
        self,
        embedding: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Draw chunks ``(B, H, A)``; replay holds ``log_prob`` ``(B, H, A)`` (and ``pre_tanh_actions`` when squashed)."""
        self.check_rl_features(embedding, rl_features)
        mean, std = self.distribution_parameters(embedding, rl_features)
        if deterministic:
            pre_tanh = mean
        else:
            noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
            pre_tanh = mean + std * noise
        replay = {"log_prob": self._log_prob_of_pre_tanh(pre_tanh, mean, std)}
        if self.config.squash:
            replay["pre_tanh_actions"] = pre_tanh
            return torch.tanh(pre_tanh), replay
        return pre_tanh, replay

    def deterministic_action(
        self,
        embedding: torch.Tensor,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The mean chunk ``(B, H, A)`` (squashed where the head squashes), with gradients."""
        self.check_rl_features(embedding, rl_features)
        mean, _ = self.distribution_parameters(embedding, rl_features)
        return torch.tanh(mean) if self.config.squash else mean

    def _pre_tanh(self, actions: torch.Tensor, replay: dict[str, torch.Tensor] | None) -> torch.Tensor:
        if not self.config.squash:
            return actions
        if replay is not None and "pre_tanh_actions" in replay:
            return replay["pre_tanh_actions"]
        # Expert actions at exactly +-1 have no pre-image; pull them just inside the open interval.
        limit = 1.0 - 1e-6 if actions.dtype == torch.float64 else 1.0 - 1e-5
        return torch.atanh(actions.clamp(-limit, limit))

    def log_prob(
        self,
        embedding: torch.Tensor,
        actions: torch.Tensor,
        replay: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-dimension log-prob ``(B, H, A)`` and entropy ``(B, H, A)`` (``None`` when squashed).

        The entropy of the squashed distribution has no closed form; use ``-log_prob`` of a sample as an
        estimate where an algorithm needs one.
        """
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        self.check_rl_features(embedding, rl_features)
        mean, std = self.distribution_parameters(embedding, rl_features)
        log_prob = self._log_prob_of_pre_tanh(self._pre_tanh(actions, replay), mean, std)
        entropy = None if self.config.squash else gaussian_entropy(std)
        return log_prob, entropy

    def bc_loss(
        self, embedding: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Negative log-likelihood (or MSE of the mean action) of expert chunks ``(B, H, A)``, masked by ``(B, H)``."""
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        if self.config.bc_objective == "mse":
            mean, _ = self.distribution_parameters(embedding)
            predicted = torch.tanh(mean) if self.config.squash else mean
            return masked_mean((predicted - actions).square(), mask)
        log_prob, _ = self.log_prob(embedding, actions, {})
        return -masked_mean(log_prob, mask)
