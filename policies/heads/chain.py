"""Shared machinery of heads whose sample is a chain of Gaussian denoising steps (diffusion, flow).

A chunk is made by ``S`` steps ``x_0 -> x_1 -> ... -> x_S`` starting from standard normal noise
``x_0`` ``(B, H, A)``; the action is ``x_S``. Step ``k`` is a Gaussian kernel
``x_{k+1} ~ N(mean_k(x_k), std_k(x_k))`` (or a deterministic map for the samples where the step is
not stochastic, e.g. the ODE steps of the hybrid flow sampler). Treating each denoising step as a
Gaussian policy step is the idea of DPPO (Ren et al. 2024, arXiv 2409.00588, section 4.1): the
chain's log-probability is the sum of the per-step Gaussian log-densities, each exact given the
stored chain. The replay holds the whole chain ``(B, S + 1, H, A)`` and any per-sample choice made
while sampling (stochastic step, noise level), so ``log_prob`` recomputes exactly the same numbers.

Subclasses give the kernel of one step (:meth:`step_kernel`), and optionally per-sample choices
(:meth:`draw_choices`), the steps RL trains (:meth:`trained_steps`), the initial state
(:meth:`initial_state`, standard normal noise by default) and its log-density (:meth:`initial_log_prob`).

The kernels are conditioned on the observation embedding ``(B, D)`` and, where the head was built with
``rl_feature_dim`` F > 0, on RL-only features ``(B, F)`` (``policy.rl_vision``) through a linear map ``P``
``(F -> hidden_dim)`` whose output is added to the conditioning vector every FiLM block of the denoiser
reads: ``c = MLP(e, t) + rl_feature_scale * P f``. ``P`` starts at zero and is built without drawing random
numbers, so before RL the head samples and scores exactly as its SFT chain does, and it initialises as a
head without features would; ``bc_loss`` never reads the features, so SFT leaves ``P`` at zero. Under Adam a
parameter moves by about the learning rate per step, so ``rl_feature_scale`` multiplies the speed at which
the features' influence grows relative to the denoiser's own weights. ``detach_embedding`` makes the RL
log-prob read the embedding without a gradient (``log_prob_reaches_embedding`` False: the policy stores the
embedding at sampling time and the update reuses it); ``initial_noise="zero"`` starts every chain at the
noise's mean, so that a chunk's randomness lies only in the denoising steps that the PPO ratio credits. These
options (:class:`ChainConfig`) are the same for every chain head, flow or diffusion.

:meth:`DenoisingChainHead.denoise` runs the deterministic sampler from a given first state (no gradient):
what a refiner (:mod:`policies.heads.residual`, :mod:`policies.heads.steered`) needs from the head it wraps.

Where a head learns its kernels' std (:meth:`learns_step_std`, Flow-Noise), ``log_prob`` also returns the
summed entropies of the trained steps' Gaussian kernels at the stored chain states: a one-sample estimate
of the chain's entropy given its initial noise (whose own entropy is a constant), so that an entropy bonus
can keep the learned noise from collapsing (piRL, arXiv 2510.25889, section 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from policies.heads.base import ActionHead
from policies.heads.common import check_chunks, check_embedding, gaussian_entropy, gaussian_log_prob
from policies.heads.denoiser import ChunkDenoiser, DenoiserConfig


@dataclass
class ChainConfig(DenoiserConfig):
    """RL options of every denoising-chain head (plus the denoiser size of :class:`DenoiserConfig`).

    detach_embedding: the RL log-prob reads the embedding without moving the encoders.
    rl_feature_scale: factor on the zero-initialised projection of RL-only features (its relative speed).
    initial_noise: "sample" (x_0 ~ N(0, I)) or "zero" (x_0 = 0, in sampling and evaluation alike).
    """

    detach_embedding: bool = False
    rl_feature_scale: float = 1.0
    initial_noise: Literal["sample", "zero"] = "sample"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.initial_noise not in ("sample", "zero"):
            raise ValueError(f"chain head: initial_noise={self.initial_noise!r}; use 'sample' or 'zero'")
        if not self.rl_feature_scale > 0:
            raise ValueError(f"chain head: rl_feature_scale={self.rl_feature_scale} must be > 0")


@dataclass
class StepKernel:
    """One denoising step for a batch.

    mean, std: the Gaussian kernel, ``(B, H, A)`` (std broadcastable to it).
    deterministic_next: the next chain state of the deterministic sampler ``(B, H, A)``.
    stochastic: ``(B,)`` bool, which samples draw this step from the Gaussian (None: all of them);
        the others take ``deterministic_next`` and the step adds nothing to their log-prob.
    """

    mean: torch.Tensor
    std: torch.Tensor
    deterministic_next: torch.Tensor
    stochastic: torch.Tensor | None = None


class DenoisingChainHead(ActionHead):
    """Base of diffusion and flow heads: sampling loop, replay, exact chain log-probs, RL-only features."""

    reads_rl_features = True
    embedding_dim: int
    num_steps: int
    config: ChainConfig
    feature_projection: nn.Linear | None

    def __init__(
        self, embedding_dim: int, chunk_size: int, action_dim: int, config: ChainConfig, num_steps: int
    ) -> None:
        """The sizes, ``config``, the chain's ``num_steps`` and its :class:`ChunkDenoiser` (built first); a subclass
        then builds what its kernels need and ends with :meth:`build_feature_projection` (width ``hidden_dim``)."""
        super().__init__()
        self.config = config
        self.embedding_dim, self.chunk_size, self.action_dim = embedding_dim, chunk_size, action_dim
        self.num_steps = num_steps
        self.denoiser = ChunkDenoiser(embedding_dim, chunk_size, action_dim, config)

    def condition_offset(self, rl_features: torch.Tensor | None) -> torch.Tensor | None:
        """``rl_feature_scale * P f`` ``(B, hidden_dim)``, added to the denoiser's conditioning; None without features."""
        if rl_features is None or self.feature_projection is None:
            return None
        return self.config.rl_feature_scale * self.feature_projection(rl_features)

    @property
    def log_prob_reaches_embedding(self) -> bool:
        return not self.config.detach_embedding

    def learns_step_std(self) -> bool:
        """Whether the kernels' std is learned (then ``log_prob`` returns their entropies); False by default."""
        return False

    def step_kernel(
        self,
        embedding: torch.Tensor,
        state: torch.Tensor,
        step: int,
        choices: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> StepKernel:
        """The kernel of step ``step`` from chain state ``state`` ``(B, H, A)``, conditioned on ``rl_features``."""
        raise NotImplementedError

    def deterministic_step(
        self, embedding: torch.Tensor, state: torch.Tensor, step: int, rl_features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The deterministic sampler's next state ``(B, H, A)`` from ``state`` (Euler ODE, DDIM with eta = 0)."""
        raise NotImplementedError

    def deterministic_chain(
        self, embedding: torch.Tensor, initial_state: torch.Tensor, rl_features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The deterministic chain from ``initial_state`` ``(B, H, A)`` to an action chunk ``(B, H, A)``, every
        step with gradients (through the parameters and ``initial_state``)."""
        check_embedding(embedding, self.embedding_dim)
        state = initial_state
        for step in range(self.num_steps):
            state = self.deterministic_step(embedding, state, step, rl_features)
        return state

    @torch.no_grad()
    def denoise(self, embedding: torch.Tensor, initial_state: torch.Tensor) -> torch.Tensor:
        """:meth:`deterministic_chain` without gradients and without RL-only features (what a refiner's base runs)."""
        return self.deterministic_chain(embedding, initial_state)

    def deterministic_action(
        self,
        embedding: torch.Tensor,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``sample(..., deterministic=True)``'s chunk ``(B, H, A)`` with gradients through every step (also those
        RL leaves out, which share the parameters): from :meth:`initial_state`, drawn with ``generator``."""
        embedding = self.rl_embedding(embedding, rl_features)
        shape = (embedding.shape[0], self.chunk_size, self.action_dim)
        state = self.initial_state(shape, generator, embedding.device, embedding.dtype)
        return self.deterministic_chain(embedding, state, rl_features)

    def choice_keys(self) -> tuple[str, ...]:
        """Names of the per-sample choices that :meth:`draw_choices` returns."""
        return ()

    def draw_choices(
        self, batch_size: int, device: torch.device, generator: torch.Generator | None
    ) -> dict[str, torch.Tensor]:
        """Per-sample choices made before sampling, each ``(B, ...)``; stored in the replay."""
        return {}

    def trained_steps(self) -> range:
        """Steps whose log-prob counts (and that run with gradients); all steps by default."""
        return range(self.num_steps)

    def initial_state(
        self, shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device, dtype: torch.dtype
    ) -> torch.Tensor:
        """The chain's first state ``x_0`` of ``shape`` ``(B, H, A)``: standard normal noise, or zero (``initial_noise``)."""
        if self.config.initial_noise == "zero":
            return torch.zeros(shape, device=device, dtype=dtype)
        return torch.randn(shape, generator=generator, device=device, dtype=dtype)

    def scores_initial_noise(self) -> bool:
        """Whether the joint log-prob includes the initial noise's density (Flow-Noise); False by default."""
        return False

    def initial_log_prob(self, initial_noise: torch.Tensor) -> torch.Tensor | None:
        """Standard normal log-density ``(B, H, A)`` of the initial noise where the head scores it, else None
        (always None from a fixed zero start: it has no density, and no parameter changes it)."""
        if self.config.initial_noise == "zero" or not self.scores_initial_noise():
            return None
        zero = torch.zeros((), dtype=initial_noise.dtype, device=initial_noise.device)
        return gaussian_log_prob(initial_noise, zero, zero + 1.0)

    def rl_embedding(self, embedding: torch.Tensor, rl_features: torch.Tensor | None) -> torch.Tensor:
        """The embedding the RL kernels read (detached with ``detach_embedding``), after checking both inputs."""
        check_embedding(embedding, self.embedding_dim)
        self.check_rl_features(embedding, rl_features)
        return embedding.detach() if self.config.detach_embedding else embedding

    @staticmethod
    def _masked(log_prob: torch.Tensor, stochastic: torch.Tensor | None) -> torch.Tensor:
        if stochastic is None:
            return log_prob
        return torch.where(stochastic[:, None, None], log_prob, torch.zeros_like(log_prob))

    def sample(
        self,
        embedding: torch.Tensor,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Run the chain; returns actions ``(B, H, A)`` and replay.

        replay: ``chain`` ``(B, S + 1, H, A)``, ``log_prob`` ``(B, H, A)`` (the chain's joint
        log-prob over the trained steps, as :meth:`log_prob` recomputes it), and the choices of
        :meth:`draw_choices`. With ``deterministic=True`` every step takes the deterministic
        sampler's state; ``log_prob`` is still the density of that chain under the stochastic kernels.
        """
        embedding = self.rl_embedding(embedding, rl_features)
        batch = embedding.shape[0]
        shape = (batch, self.chunk_size, self.action_dim)
        state = self.initial_state(shape, generator, embedding.device, embedding.dtype)
        choices = self.draw_choices(batch, embedding.device, generator)
        trained = self.trained_steps()
        chain, per_step = [state], []
        for step in range(self.num_steps):
            with torch.set_grad_enabled(torch.is_grad_enabled() and step in trained):
                kernel = self.step_kernel(embedding, state, step, choices, rl_features)
            if deterministic:
                next_state = kernel.deterministic_next
            else:
                noise = torch.randn(shape, generator=generator, device=state.device, dtype=state.dtype)
                drawn = kernel.mean + kernel.std * noise
                next_state = (
                    drawn
                    if kernel.stochastic is None
                    else torch.where(kernel.stochastic[:, None, None], drawn, kernel.deterministic_next)
                )
            if step in trained:
                step_log_prob = gaussian_log_prob(next_state, kernel.mean, kernel.std)
                per_step.append(self._masked(step_log_prob, kernel.stochastic))
            chain.append(next_state)
            state = next_state
        # summed as log_prob() sums them, so that the two agree to the last bit
        log_prob = torch.stack(per_step, dim=1).sum(dim=1) if per_step else torch.zeros_like(state)
        initial = self.initial_log_prob(chain[0])
        replay = {"chain": torch.stack(chain, dim=1), "log_prob": log_prob if initial is None else log_prob + initial,
                  **choices}  # fmt: skip
        return state, replay

    def step_log_probs(
        self, embedding: torch.Tensor, replay: dict[str, torch.Tensor], rl_features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Per-step log-probs ``(B, K, H, A)`` of the ``K`` trained steps of the stored chain.

        Useful for DPPO's per-denoising-step ratios; :meth:`log_prob` sums them over ``K``.
        """
        return self._step_terms(self.rl_embedding(embedding, rl_features), replay, False, rl_features)[0]

    def _step_terms(
        self,
        embedding: torch.Tensor,
        replay: dict[str, torch.Tensor],
        with_entropy: bool,
        rl_features: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-step log-probs and (``with_entropy``) kernel entropies, both ``(B, K, H, A)``, of the trained steps."""
        chain = self._stored_chain(embedding.shape[0], replay)
        choices = {key: replay[key] for key in self.choice_keys()}
        per_step, entropies = [], []
        for step in self.trained_steps():
            kernel = self.step_kernel(embedding, chain[:, step], step, choices, rl_features)
            step_log_prob = gaussian_log_prob(chain[:, step + 1], kernel.mean, kernel.std)
            per_step.append(self._masked(step_log_prob, kernel.stochastic))
            if with_entropy:
                entropy = gaussian_entropy(kernel.std).expand_as(step_log_prob)
                entropies.append(self._masked(entropy, kernel.stochastic))
        return torch.stack(per_step, dim=1), torch.stack(entropies, dim=1) if with_entropy else None

    def log_prob(
        self,
        embedding: torch.Tensor,
        actions: torch.Tensor,
        replay: dict[str, torch.Tensor],
        rl_features: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Joint log-prob ``(B, H, A)`` of the stored chain (whose last state must be ``actions``), and entropy.

        A denoising chain's marginal entropy has no closed form: the entropy is None, except where the
        head learns its kernels' std (:meth:`learns_step_std`): then the summed entropies ``(B, H, A)`` of
        the trained steps' kernels (see the module docstring).
        """
        embedding = self.rl_embedding(embedding, rl_features)
        chain = self._stored_chain(embedding.shape[0], replay)
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        mismatch = (chain[:, -1] - actions).abs().max().item() if actions.numel() else 0.0
        if mismatch > 1e-3:
            raise ValueError(
                f"the actions differ from the last state of replay['chain'] by up to {mismatch:.3g}; pass "
                "the normalised actions that sample() returned together with this replay"
            )
        per_step, entropies = self._step_terms(embedding, replay, self.learns_step_std(), rl_features)
        log_prob = per_step.sum(dim=1)
        initial = self.initial_log_prob(chain[:, 0])
        entropy = None if entropies is None else entropies.sum(dim=1)
        return (log_prob if initial is None else log_prob + initial), entropy

    def _stored_chain(self, batch_size: int, replay: dict[str, torch.Tensor]) -> torch.Tensor:
        self.check_replay(replay, ["chain", *self.choice_keys()])
        chain = replay["chain"]
        expected = (batch_size, self.num_steps + 1, self.chunk_size, self.action_dim)
        if tuple(chain.shape) != expected:
            raise ValueError(
                f"replay['chain'] has shape {tuple(chain.shape)}, expected {expected} "
                "(batch, num_steps + 1, chunk_size, action_dim); was it made by a head with other settings?"
            )
        return chain
