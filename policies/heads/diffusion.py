"""Diffusion action head: epsilon-prediction DDPM trained and sampled with `diffusers` schedulers.

Behaviour cloning (Ho et al. 2020, arXiv 2006.11239, Algorithm 1): ``x_t = sqrt(abar_t) a +
sqrt(1 - abar_t) eps`` (``DDPMScheduler.add_noise``) and the loss is ``|eps - eps_theta(x_t, t, e)|^2``.

Sampling runs ``S`` inference steps on the grid of ``scheduler.set_timesteps(S)`` ("trailing"
spacing: ``T-1, T-1-T/S, ..., T/S-1``, then the clean sample). For RL every step is a Gaussian
kernel ``x_prev ~ N(mean, std)`` with ``x0 = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t)``
(optionally clipped) and, with ``abar_p`` the cumulative alpha of the previous grid point (1 at the end):

- "ddpm": the posterior ``q(x_prev | x_t, x0)`` (Ho et al. eq. 6-7, for a strided grid):
  ``beta = 1 - abar_t / abar_p``, ``mean = sqrt(abar_p) beta / (1 - abar_t) x0 +
  sqrt(abar_t / abar_p) (1 - abar_p) / (1 - abar_t) x_t``, ``var = (1 - abar_p) / (1 - abar_t) beta``.
- "ddim": the generalised DDIM step (Song et al. 2021, arXiv 2010.02502, eq. 12 and 16):
  ``sigma = eta sqrt((1 - abar_p) / (1 - abar_t)) sqrt(1 - abar_t / abar_p)``,
  ``mean = sqrt(abar_p) x0 + sqrt(1 - abar_p - sigma^2) eps``, ``var = sigma^2``.

The std is floored at ``min_std`` for sampling and for the log-prob alike, as DPPO does (Ren et al.
2024, arXiv 2409.00588, section 5 "exploration noise"), which also gives the last step (variance 0)
a proper density. DPPO's option to fine-tune only the last ``K`` denoising steps is
``finetune_last_steps``: earlier steps run without gradients and their log-prob is left out.
``deterministic=True`` samples with DDIM, eta = 0 (``DDIMScheduler.step``).

RL-only features (pooled pixels, ``policy.rl_vision``), a detached embedding and a zero initial state are
the options every chain head shares (:class:`~policies.heads.chain.ChainConfig`): DPPO-style PPO of this
head can read what the frozen SFT embedding does not carry, as the flow head's can.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from policies.heads.chain import ChainConfig, DenoisingChainHead, StepKernel
from policies.heads.common import check_chunks, check_embedding, masked_mean


@dataclass
class DiffusionHeadConfig(ChainConfig):
    """Options of :class:`DiffusionHead` (plus the chain's RL options and denoiser size of :class:`ChainConfig`).

    num_train_timesteps: T of the forward process. num_inference_steps: S, steps of the chain (T % S == 0).
    beta_schedule: a `diffusers` beta schedule name. sampler: "ddpm" (posterior) or "ddim" (eta > 0) kernel.
    ddim_eta: eta of the "ddim" kernel. min_std: floor of every step's std (normalised action units).
    clip_sample: clip the predicted clean chunk to +-clip_sample, None: no clip. The default 1.0 matches the
        default "min_max" action normalisation ([-1, 1]); with "mean_std" use None or a few stds. Without
        a clip the first step divides the noise error by sqrt(abar_{T-1}) (about 1e-3 for the cosine
        schedule), so an imperfect network's early steps blow up (as in Diffusion Policy and DPPO, which
        both clip).
    finetune_last_steps: train only the last K steps in RL (None: all S steps).
    """

    num_train_timesteps: int = 100
    num_inference_steps: int = 10
    beta_schedule: str = "squaredcos_cap_v2"
    sampler: Literal["ddpm", "ddim"] = "ddpm"
    ddim_eta: float = 1.0
    min_std: float = 0.1
    clip_sample: float | None = 1.0
    finetune_last_steps: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sampler not in ("ddpm", "ddim"):
            raise ValueError(f"diffusion head: sampler={self.sampler!r}; use 'ddpm' or 'ddim'")
        if self.num_inference_steps <= 0 or self.num_train_timesteps % self.num_inference_steps:
            raise ValueError(
                f"diffusion head: num_train_timesteps={self.num_train_timesteps} must be a multiple of "
                f"num_inference_steps={self.num_inference_steps} (the DDIM step strides by T // S)"
            )
        if self.clip_sample is not None and self.clip_sample <= 0:
            raise ValueError(f"diffusion head: clip_sample={self.clip_sample} must be > 0 (or None: no clip)")
        if self.min_std <= 0:
            raise ValueError(f"diffusion head: min_std={self.min_std} must be > 0 for a proper log-prob")
        if self.sampler == "ddim" and not 0.0 < self.ddim_eta <= 1.0:
            raise ValueError(f"diffusion head: ddim_eta={self.ddim_eta} must lie in (0, 1] for RL")
        steps = self.finetune_last_steps
        if steps is not None and not 1 <= steps <= self.num_inference_steps:
            raise ValueError(
                f"diffusion head: finetune_last_steps={steps} must lie in [1, num_inference_steps="
                f"{self.num_inference_steps}] (or be None for all steps)"
            )


class DiffusionHead(DenoisingChainHead):
    """DDPM/DDIM action head with exact per-step Gaussian log-probs; see the module docstring."""

    config_class = DiffusionHeadConfig

    def __init__(
        self,
        embedding_dim: int,
        chunk_size: int,
        action_dim: int,
        config: DiffusionHeadConfig | None = None,
        rl_feature_dim: int = 0,
    ) -> None:
        config = config or DiffusionHeadConfig()
        super().__init__(embedding_dim, chunk_size, action_dim, config, config.num_inference_steps)
        # Imported here: diffusers adds ~0.6 s to the start of every process that only builds other heads.
        from diffusers import DDIMScheduler, DDPMScheduler

        clip = config.clip_sample is not None
        scheduler_options = dict(
            num_train_timesteps=config.num_train_timesteps,
            beta_schedule=config.beta_schedule,
            prediction_type="epsilon",
            clip_sample=clip,
            clip_sample_range=config.clip_sample if clip else 1.0,
            timestep_spacing="trailing",
        )
        self.train_scheduler = DDPMScheduler(**scheduler_options)
        self.train_scheduler.set_timesteps(config.num_inference_steps)
        self.ddim_scheduler = DDIMScheduler(set_alpha_to_one=True, **scheduler_options)
        self.ddim_scheduler.set_timesteps(config.num_inference_steps)
        self.timesteps: list[int] = [int(t) for t in self.ddim_scheduler.timesteps]
        if self.timesteps != [int(t) for t in self.train_scheduler.timesteps]:
            raise RuntimeError("DDPM and DDIM schedulers disagree on the inference grid; check diffusers")
        # Non-persistent: derived from the config, so checkpoints hold only learned weights.
        self.register_buffer("alphas_cumprod", self.train_scheduler.alphas_cumprod.clone(), persistent=False)
        self.build_feature_projection(rl_feature_dim, config.hidden_dim)

    def trained_steps(self) -> range:
        first = (
            0 if self.config.finetune_last_steps is None else self.num_steps - self.config.finetune_last_steps
        )
        return range(first, self.num_steps)

    def _alphas(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Cumulative alphas (abar_t, abar_p) of grid step ``step`` and the grid point after it."""
        timestep = self.timesteps[step]
        previous = self.timesteps[step + 1] if step + 1 < self.num_steps else -1
        alpha_t = self.alphas_cumprod[timestep]
        alpha_p = self.alphas_cumprod[previous] if previous >= 0 else torch.ones_like(alpha_t)
        return alpha_t, alpha_p

    def kernel_moments(
        self, state: torch.Tensor, predicted_noise: torch.Tensor, step: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean ``(B, H, A)`` and unfloored std (scalar tensor) of step ``step``'s kernel (module docstring)."""
        alpha_t, alpha_p = self._alphas(step)
        clean = (state - (1.0 - alpha_t).sqrt() * predicted_noise) / alpha_t.sqrt()
        if self.config.clip_sample is not None:
            clean = clean.clamp(-self.config.clip_sample, self.config.clip_sample)
        if self.config.sampler == "ddpm":
            beta = 1.0 - alpha_t / alpha_p
            mean = (alpha_p.sqrt() * beta / (1.0 - alpha_t)) * clean + (
                (alpha_t / alpha_p).sqrt() * (1.0 - alpha_p) / (1.0 - alpha_t)
            ) * state
            variance = (1.0 - alpha_p) / (1.0 - alpha_t) * beta
            return mean, variance.clamp_min(0.0).sqrt()
        sigma = self.config.ddim_eta * ((1.0 - alpha_p) / (1.0 - alpha_t) * (1.0 - alpha_t / alpha_p)).sqrt()
        direction = (1.0 - alpha_p - sigma.square()).clamp_min(0.0).sqrt()
        return alpha_p.sqrt() * clean + direction * predicted_noise, sigma

    def predicted_noise(
        self, embedding: torch.Tensor, state: torch.Tensor, step: int, rl_features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``eps_theta(x_t, t, e, f)`` ``(B, H, A)`` at grid step ``step``."""
        time = torch.full((1,), float(self.timesteps[step]), device=state.device)
        return self.denoiser(state, time, embedding, condition_offset=self.condition_offset(rl_features))

    def deterministic_step(
        self, embedding: torch.Tensor, state: torch.Tensor, step: int, rl_features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One DDIM step with eta = 0 ``(B, H, A)``."""
        predicted_noise = self.predicted_noise(embedding, state, step, rl_features)
        return self.ddim_scheduler.step(predicted_noise, self.timesteps[step], state, eta=0.0).prev_sample

    def step_kernel(
        self,
        embedding: torch.Tensor,
        state: torch.Tensor,
        step: int,
        choices: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> StepKernel:
        timestep = self.timesteps[step]
        predicted_noise = self.predicted_noise(embedding, state, step, rl_features)
        mean, std = self.kernel_moments(state, predicted_noise, step)
        deterministic_next = self.ddim_scheduler.step(predicted_noise, timestep, state, eta=0.0).prev_sample
        return StepKernel(mean, std.clamp_min(self.config.min_std), deterministic_next)

    def bc_loss(
        self, embedding: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Epsilon-prediction loss on expert chunks ``(B, H, A)``, masked by ``(B, H)`` (Ho et al. Algorithm 1)."""
        check_embedding(embedding, self.embedding_dim)
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        batch = actions.shape[0]
        timesteps = torch.randint(0, self.config.num_train_timesteps, (batch,), device=actions.device)
        noise = torch.randn_like(actions)
        noisy = self.train_scheduler.add_noise(actions, noise, timesteps)
        predicted = self.denoiser(noisy, timesteps.float(), embedding)
        return masked_mean((predicted - noise).square(), mask)
