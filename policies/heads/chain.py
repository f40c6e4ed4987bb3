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

The kernels are conditioned on ``embedding`` ``(B, condition_dim)``: the observation embedding, or, for a
head whose RL policy reads more than the embedding, what it concatenates to it (``condition_dim`` is then
wider than ``embedding_dim``; :mod:`policies.heads.flow_rl_features`).

Where a head learns its kernels' std (:meth:`learns_step_std`, Flow-Noise), ``log_prob`` also returns the
summed entropies of the trained steps' Gaussian kernels at the stored chain states: a one-sample estimate
of the chain's entropy given its initial noise (whose own entropy is a constant), so that an entropy bonus
can keep the learned noise from collapsing (piRL, arXiv 2510.25889, section 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from policies.heads.base import ActionHead
from policies.heads.common import check_chunks, check_embedding, gaussian_entropy, gaussian_log_prob


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
    """Base of diffusion and flow heads: sampling loop, replay, exact chain log-probs."""

    embedding_dim: int
    num_steps: int

    @property
    def condition_dim(self) -> int:
        """Width of what the kernels are conditioned on: the embedding's, unless a head reads more."""
        return self.embedding_dim

    def learns_step_std(self) -> bool:
        """Whether the kernels' std is learned (then ``log_prob`` returns their entropies); False by default."""
        return False

    def step_kernel(
        self, embedding: torch.Tensor, state: torch.Tensor, step: int, choices: dict[str, torch.Tensor]
    ) -> StepKernel:
        """The kernel of step ``step`` from chain state ``state`` ``(B, H, A)``."""
        raise NotImplementedError

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
        """The chain's first state ``x_0`` of ``shape`` ``(B, H, A)``: standard normal noise by default."""
        return torch.randn(shape, generator=generator, device=device, dtype=dtype)

    def initial_log_prob(self, initial_noise: torch.Tensor) -> torch.Tensor | None:
        """Log-density ``(B, H, A)`` of the initial noise to include in the joint log-prob, or None."""
        return None

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
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Run the chain; returns actions ``(B, H, A)`` and replay.

        replay: ``chain`` ``(B, S + 1, H, A)``, ``log_prob`` ``(B, H, A)`` (the chain's joint
        log-prob over the trained steps, as :meth:`log_prob` recomputes it), and the choices of
        :meth:`draw_choices`. With ``deterministic=True`` every step takes the deterministic
        sampler's state; ``log_prob`` is still the density of that chain under the stochastic kernels.
        """
        check_embedding(embedding, self.condition_dim)
        batch = embedding.shape[0]
        shape = (batch, self.chunk_size, self.action_dim)
        state = self.initial_state(shape, generator, embedding.device, embedding.dtype)
        choices = self.draw_choices(batch, embedding.device, generator)
        trained = self.trained_steps()
        chain = [state]
        log_prob = self.initial_log_prob(state)
        log_prob = torch.zeros_like(state) if log_prob is None else log_prob
        for step in range(self.num_steps):
            with torch.set_grad_enabled(torch.is_grad_enabled() and step in trained):
                kernel = self.step_kernel(embedding, state, step, choices)
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
                log_prob = log_prob + self._masked(step_log_prob, kernel.stochastic)
            chain.append(next_state)
            state = next_state
        replay = {"chain": torch.stack(chain, dim=1), "log_prob": log_prob, **choices}
        return state, replay

    def step_log_probs(self, embedding: torch.Tensor, replay: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-step log-probs ``(B, K, H, A)`` of the ``K`` trained steps of the stored chain.

        Useful for DPPO's per-denoising-step ratios; :meth:`log_prob` sums them over ``K``.
        """
        return self._step_terms(embedding, replay, with_entropy=False)[0]

    def _step_terms(
        self, embedding: torch.Tensor, replay: dict[str, torch.Tensor], with_entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-step log-probs and (``with_entropy``) kernel entropies, both ``(B, K, H, A)``, of the trained steps."""
        check_embedding(embedding, self.condition_dim)
        chain = self._stored_chain(embedding.shape[0], replay)
        choices = {key: replay[key] for key in self.choice_keys()}
        per_step, entropies = [], []
        for step in self.trained_steps():
            kernel = self.step_kernel(embedding, chain[:, step], step, choices)
            step_log_prob = gaussian_log_prob(chain[:, step + 1], kernel.mean, kernel.std)
            per_step.append(self._masked(step_log_prob, kernel.stochastic))
            if with_entropy:
                entropy = gaussian_entropy(kernel.std).expand_as(step_log_prob)
                entropies.append(self._masked(entropy, kernel.stochastic))
        return torch.stack(per_step, dim=1), torch.stack(entropies, dim=1) if with_entropy else None

    def log_prob(
        self, embedding: torch.Tensor, actions: torch.Tensor, replay: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Joint log-prob ``(B, H, A)`` of the stored chain (whose last state must be ``actions``), and entropy.

        A denoising chain's marginal entropy has no closed form: the entropy is None, except where the
        head learns its kernels' std (:meth:`learns_step_std`): then the summed entropies ``(B, H, A)`` of
        the trained steps' kernels (see the module docstring).
        """
        chain = self._stored_chain(embedding.shape[0], replay)
        check_chunks(actions, embedding.shape[0], self.chunk_size, self.action_dim)
        mismatch = (chain[:, -1] - actions).abs().max().item() if actions.numel() else 0.0
        if mismatch > 1e-3:
            raise ValueError(
                f"the actions differ from the last state of replay['chain'] by up to {mismatch:.3g}; pass "
                "the normalised actions that sample() returned together with this replay"
            )
        per_step, entropies = self._step_terms(embedding, replay, with_entropy=self.learns_step_std())
        log_prob = per_step.sum(dim=1)
        initial = self.initial_log_prob(chain[:, 0])
        entropy = None if entropies is None else entropies.sum(dim=1)
        return (log_prob if initial is None else log_prob + initial), entropy

    def _stored_chain(self, batch_size: int, replay: dict[str, torch.Tensor]) -> torch.Tensor:
        required = ["chain", *self.choice_keys()]
        missing = [key for key in required if key not in replay]
        if missing:
            raise KeyError(
                f"replay lacks {missing} (has {sorted(replay)}); pass the replay dict that sample() returned"
            )
        chain = replay["chain"]
        expected = (batch_size, self.num_steps + 1, self.chunk_size, self.action_dim)
        if tuple(chain.shape) != expected:
            raise ValueError(
                f"replay['chain'] has shape {tuple(chain.shape)}, expected {expected} "
                "(batch, num_steps + 1, chunk_size, action_dim); was it made by a head with other settings?"
            )
        return chain
