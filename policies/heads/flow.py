"""Flow-matching action head (pi0 convention) with the two RL samplers of piRL.

Behaviour cloning (pi0, Black et al. 2024, arXiv 2410.24164, section 3 and appendix B):
``x_t = t * noise + (1 - t) * a`` with t = 1 noise and t = 0 action, velocity target
``v = noise - a``, loss ``|v_theta(x_t, t, e) - v|^2``; the time is drawn as
``t = time_min + (1 - time_min) * Beta(1.5, 1)``, which favours the noisy end (large t).

Evaluation (``deterministic=True``): Euler ODE from t = 1 to t = 0 in N equal steps,
``x_{t - dt} = x_t - dt * v``. For RL (piRL, arXiv 2510.25889, section 4) every step becomes a
Gaussian kernel (formulas in :mod:`policies.heads.flow_kernels`):

- ``rl_method="sde"``: Flow-SDE steps with noise level ``a``; with ``hybrid=True`` one step per
  chunk, drawn uniformly per sample and stored in the replay as ``sde_step`` ``(B,)``, is an SDE
  step and the others are ODE steps (whose deterministic transitions add nothing to the log-prob).
  The noise level used is stored per sample (``noise_level`` ``(B,)``), so annealing
  (``set_training_step``) never makes a stored log-prob stale.
- ``rl_method="noise"``: Flow-Noise, mean = the ODE step, std from a learned network bounded in
  ``[log_var_min, log_var_max]``; the log-prob is the joint density of the initial noise
  (standard normal) and all N steps, and ``log_prob`` also returns the steps' summed kernel entropies
  (for piRL's entropy bonus on the learned noise; :mod:`policies.heads.chain`).

RL-only features, a detached embedding and a zero initial state are the options every chain head shares
(:class:`~policies.heads.chain.ChainConfig`); Flow-Noise's std network reads the embedding only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from policies.heads.chain import ChainConfig, DenoisingChainHead, StepKernel
from policies.heads.common import check_chunks, check_embedding, masked_mean
from policies.heads.flow_kernels import NoiseStdNetwork, flow_sde_step_moments
from policies.heads.noise_schedules import LinearSchedule


@dataclass
class FlowHeadConfig(ChainConfig):
    """Options of :class:`FlowHead` (plus the chain's RL options and denoiser size of :class:`ChainConfig`).

    num_inference_steps: N Euler steps. time_scale: flow time is multiplied by it before the
    sinusoidal embedding. time_beta_alpha, time_beta_beta, time_min: BC time distribution (pi0).
    rl_method: "sde" (Flow-SDE) or "noise" (Flow-Noise). hybrid: one SDE step per chunk ("sde" only).
    noise_level: Flow-SDE ``a`` at training step 0; noise_level_end, noise_anneal_steps: linear
    annealing to ``noise_level_end`` over that many training steps (None: constant).
    sde_max_time: clamp of t inside sigma_t (None: 1 - 1/N, the grid's second point).
    log_var_min, log_var_max, noise_hidden_dim: Flow-Noise's std network and its log-variance range.
    """

    num_inference_steps: int = 10
    time_scale: float = 1000.0
    time_beta_alpha: float = 1.5
    time_beta_beta: float = 1.0
    time_min: float = 0.001
    rl_method: Literal["sde", "noise"] = "sde"
    hybrid: bool = False
    noise_level: float = 0.5
    noise_level_end: float | None = None
    noise_anneal_steps: int = 0
    sde_max_time: float | None = None
    log_var_min: float = -6.0
    log_var_max: float = -1.4
    noise_hidden_dim: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rl_method not in ("sde", "noise"):
            raise ValueError(f"flow head: rl_method={self.rl_method!r}; use 'sde' or 'noise'")
        if self.hybrid and self.rl_method != "sde":
            raise ValueError("flow head: hybrid=True needs rl_method='sde' (Flow-Noise has no ODE steps)")
        if self.num_inference_steps < 2:
            raise ValueError(f"flow head: num_inference_steps={self.num_inference_steps} must be >= 2")
        if self.noise_level <= 0 or (self.noise_level_end is not None and self.noise_level_end <= 0):
            raise ValueError(
                f"flow head: noise_level={self.noise_level} and noise_level_end={self.noise_level_end} "
                "must be > 0 (a zero noise level has no density)"
            )
        if self.noise_anneal_steps < 0:
            raise ValueError(f"flow head: noise_anneal_steps={self.noise_anneal_steps} must be >= 0")
        if self.sde_max_time is not None and not 0.0 < self.sde_max_time < 1.0:
            raise ValueError(f"flow head: sde_max_time={self.sde_max_time} must lie in (0, 1)")
        if not self.log_var_min < self.log_var_max:
            raise ValueError(
                f"flow head: log_var_min={self.log_var_min} must be below log_var_max={self.log_var_max}"
            )
        if not 0.0 <= self.time_min < 1.0:
            raise ValueError(f"flow head: time_min={self.time_min} must lie in [0, 1)")


class FlowHead(DenoisingChainHead):
    """Flow-matching head with Flow-SDE / hybrid / Flow-Noise RL samplers; see the module docstring."""

    config_class = FlowHeadConfig

    def __init__(
        self,
        embedding_dim: int,
        chunk_size: int,
        action_dim: int,
        config: FlowHeadConfig | None = None,
        rl_feature_dim: int = 0,
    ) -> None:
        config = config or FlowHeadConfig()
        super().__init__(embedding_dim, chunk_size, action_dim, config, config.num_inference_steps)
        self.step_size = 1.0 / self.num_steps
        self.sde_max_time = config.sde_max_time if config.sde_max_time is not None else 1.0 - self.step_size
        self.noise_network = (
            NoiseStdNetwork(
                embedding_dim,
                chunk_size,
                action_dim,
                config.noise_hidden_dim,
                config.time_embedding_dim,
                config.log_var_min,
                config.log_var_max,
            )
            if config.rl_method == "noise"
            else None
        )
        end = config.noise_level if config.noise_level_end is None else config.noise_level_end
        self.noise_schedule = LinearSchedule(config.noise_level, end, config.noise_anneal_steps)
        self.noise_level = config.noise_level
        self.build_feature_projection(rl_feature_dim, config.hidden_dim)

    def set_training_step(self, step: int) -> None:
        """Anneal the Flow-SDE noise level ``a`` to its value at RL training step ``step``."""
        self.noise_level = self.noise_schedule.value(step)

    def time_of_step(self, step: int) -> float:
        """Flow time at the start of step ``step``: ``1 - step / N``."""
        return 1.0 - step * self.step_size

    def velocity(
        self, embedding: torch.Tensor, state: torch.Tensor, time: float, rl_features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``v_theta(x_t, t, e, f)`` ``(B, H, A)`` for chain state ``(B, H, A)`` at flow time ``time``."""
        offset = self.condition_offset(rl_features)
        network_time = torch.full((1,), time * self.config.time_scale, device=state.device)
        return self.denoiser(state, network_time, embedding, condition_offset=offset)

    def noise_std(self, embedding: torch.Tensor, state: torch.Tensor, time: float) -> torch.Tensor:
        """Flow-Noise's learned std ``(B, H, A)`` of the step from chain state ``(B, H, A)`` at flow time ``time``."""
        network_time = torch.full((1,), time * self.config.time_scale, device=state.device)
        return self.noise_network(embedding, network_time, state)

    def learns_step_std(self) -> bool:
        return self.noise_network is not None

    def deterministic_step(
        self, embedding: torch.Tensor, state: torch.Tensor, step: int, rl_features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One Euler step of the ODE ``x_{t - dt} = x_t - dt * v`` ``(B, H, A)``."""
        return state - self.step_size * self.velocity(embedding, state, self.time_of_step(step), rl_features)

    def choice_keys(self) -> tuple[str, ...]:
        if self.config.rl_method == "noise":
            return ()
        return ("noise_level", "sde_step") if self.config.hybrid else ("noise_level",)

    def draw_choices(
        self, batch_size: int, device: torch.device, generator: torch.Generator | None
    ) -> dict[str, torch.Tensor]:
        if self.config.rl_method == "noise":
            return {}
        choices = {"noise_level": torch.full((batch_size,), self.noise_level, device=device)}
        if self.config.hybrid:
            choices["sde_step"] = torch.randint(
                0, self.num_steps, (batch_size,), generator=generator, device=device
            )
        return choices

    def step_kernel(
        self,
        embedding: torch.Tensor,
        state: torch.Tensor,
        step: int,
        choices: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> StepKernel:
        time = self.time_of_step(step)
        velocity = self.velocity(embedding, state, time, rl_features)
        ode_next = state - self.step_size * velocity
        if self.noise_network is not None:
            return StepKernel(ode_next, self.noise_std(embedding, state, time), ode_next)
        noise_level = choices["noise_level"].to(state.dtype)[:, None, None]
        mean, std = flow_sde_step_moments(
            state, velocity, time, self.step_size, noise_level, self.sde_max_time
        )
        stochastic = choices["sde_step"] == step if self.config.hybrid else None
        return StepKernel(mean, std, ode_next, stochastic)

    def scores_initial_noise(self) -> bool:
        return self.config.rl_method == "noise"

    def sample_bc_time(self, batch_size: int, device: torch.device) -> torch.Tensor:
        """``(B,)`` times ``time_min + (1 - time_min) * Beta(alpha, beta)`` (pi0's BC time distribution)."""
        beta = torch.distributions.Beta(
            torch.tensor(self.config.time_beta_alpha, device=device),
            torch.tensor(self.config.time_beta_beta, device=device),
        )
        return self.config.time_min + (1.0 - self.config.time_min) * beta.sample((batch_size,))

    def bc_loss(
        self, embedding: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Flow-matching loss on expert chunks ``(B, H, A)``, masked by ``(B, H)`` (pi0 section 3)."""
        check_embedding(embedding, self.embedding_dim)
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        time = self.sample_bc_time(actions.shape[0], actions.device).to(actions.dtype)[:, None, None]
        noise = torch.randn_like(actions)
        noisy = time * noise + (1.0 - time) * actions
        predicted = self.denoiser(noisy, time.flatten() * self.config.time_scale, embedding)
        return masked_mean((predicted - (noise - actions)).square(), mask)
