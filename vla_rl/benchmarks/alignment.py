"""`vla-rl bench alignment`: does a head's PPO update point where its evaluated policy improves?

For a policy (a run's saved one, or one freshly built from the config) with its head and algorithm settings,
on a toy reward whose gradient autograd gives exactly:

- Contexts: the observations of the run's env after ``reset(seed=i)``, ``i < num_contexts``, cycling through
  the run's tasks, encoded once (embedding ``(N, D)`` and, where the policy has them, RL-only features
  ``(N, F)``, held fixed: the gradients below are over the head's parameters).
- Toy reward ``r(c, a) = -mean_{h, a}(a - g_c)^2`` on normalised chunks ``(H, A)``, with a target
  ``g_c = anchor_c + target_offset * tanh(W e_c / sqrt(D))`` from a fixed Gaussian matrix ``W`` (``seed``):
  smooth, context-dependent, and no head is optimal for it by construction. ``target_from="policy"`` (the
  default) anchors it at the evaluated policy's mean chunk in that context (over 16 draws of its noise), so
  that RL must make small context-dependent corrections, as when fine-tuning a competent SFT policy;
  ``"zero"`` anchors it at 0, a far target that any update shifting every chunk the same way approaches.
- The evaluated policy is the head's deterministic chunk ``mu_theta(c, x_0)`` (``deterministic_action``: the
  flow's ODE from its initial noise, DDIM, a Gaussian's mean, ...). Its objective ``J = E_c E_x0 r(c, mu)``
  has the pathwise gradient ``grad J``, estimated by autograd over ``true_samples`` draws of (c, x_0); the
  cosine between its two halves (``true_gradient_self_cosine``) says how exact that estimate is.
- PPO's estimate on a mini-batch of ``M`` chunks: at the start of an update the ratio is 1 and the clip is
  inactive, so the gradient of PPO's policy loss is ``-(1/M) sum_i A_i grad log pi(a_i | c_i)`` with the head's
  joint log-prob of the chunk (its replay: the stored denoising chain); ``A_i`` is the reward minus a converged
  critic's value (the mean reward of ``baseline_samples`` further draws in the same context), whitened over
  the mini-batch as PPO does. ``M`` is the configured mini-batch: rollout chunks per iteration over
  ``algo.update.num_minibatches``.
- Reported: the cosine between the PPO estimate and ``grad J`` over ``repeats`` mini-batches (median, range,
  mean and std) and at a large ``reference_batch``, and the estimate's signal-to-noise ratio
  ``|E g|^2 / E|g - E g|^2`` over the repeats (the signal's square bias-corrected by ``tr(Cov) / repeats``).

A cosine near 0 at the mini-batch size says the update is close to a random walk for the evaluated policy
(issue 19: hybrid Flow-SDE); near 0 even at the reference batch, that the head's likelihood does not cover
what decides its evaluated chunks.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from vla_rl.stages.rl.experiment import RLRunPlan, plan_rl_run
from vla_rl.stages.run_plan import read_run_plan


@dataclass
class AlignmentSettings:
    """Sizes of the measurement (the CLI's options); ``minibatch_size`` None: the configured one."""

    minibatch_size: int | None = None
    reference_batch: int = 2000
    repeats: int = 10
    reference_repeats: int = 2
    true_samples: int = 4000
    baseline_samples: int = 4
    num_contexts: int = 32
    target_from: str = "policy"
    target_offset: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("reference_batch", "repeats", "reference_repeats", "true_samples", "baseline_samples",
                     "num_contexts"):  # fmt: skip
            if getattr(self, name) < (2 if name == "repeats" else 1):
                raise ValueError(
                    f"bench alignment: {name}={getattr(self, name)} must be >= {2 if name == 'repeats' else 1}"
                )
        if self.target_from not in ("policy", "zero"):
            raise ValueError(f"bench alignment: target_from={self.target_from!r}; use 'policy' or 'zero'")
        if not self.target_offset > 0:
            raise ValueError(f"bench alignment: target_offset={self.target_offset} must be > 0")
        if self.minibatch_size is not None and self.minibatch_size < 2:
            raise ValueError(
                f"bench alignment: minibatch_size={self.minibatch_size} must be >= 2 (advantages are whitened)"
            )


def configured_minibatch_size(setup: RLRunPlan) -> int:
    """Chunks per PPO mini-batch: the rollout's chunks per iteration over ``algo.update.num_minibatches``."""
    trainer = setup.trainer
    chunks = (
        trainer.num_env_workers * trainer.num_stages * trainer.envs_per_stage * int(trainer.rollout_steps)
    )
    return max(2, chunks // setup.algo.update.num_minibatches)


def policy_with_weights(setup: RLRunPlan, folder: str | None) -> torch.nn.Module:
    """The config's policy; with ``folder`` (a ``save_pretrained`` folder), its weights and statistics loaded into it.

    The config's head settings apply (e.g. Flow-Noise's std network on a Flow-SDE SFT flow): parameters the folder
    lacks keep their initialisation (what RL would start them from); a saved weight the policy has no place for
    is an error that names it.
    """
    from policies.hub import load_pretrained
    from vla_rl.workers.policy_factory import PolicySpec

    spec = setup.policy_spec
    if folder is None:
        return spec.build("cpu").eval()
    saved = load_pretrained(folder)
    spec = PolicySpec(spec.config, spec.io_spec, saved.stats, spec.factory, spec.seed)
    policy = spec.build("cpu")
    expected = policy.state_dict()
    weights = saved.state_dict()
    misfits = sorted(k for k, v in weights.items() if k not in expected or expected[k].shape != v.shape)
    if misfits:
        raise ValueError(
            f"bench alignment: --policy {folder!r} holds weights the configured policy has no place for: "
            f"{misfits[:8]}{' ...' if len(misfits) > 8 else ''}; give the policy= / experiment= it was trained with"
        )
    policy.load_state_dict(weights, strict=False)
    return policy.eval()


@torch.no_grad()
def encode_contexts(
    policy: torch.nn.Module, setup: RLRunPlan, count: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Embeddings ``(N, D)`` and RL-only features ``(N, F)`` or None of the env's first observations."""
    from envs.registry import make

    observations, envs = [], {}
    try:
        for index in range(count):
            task = setup.tasks[index % len(setup.tasks)]
            if task not in envs:
                name = setup.env_name if task is None else f"{setup.env_name}/{task}"
                envs[task] = make(name, **setup.env_kwargs)
            observations.append(envs[task].reset(seed=setup.seed + index)[0])
    finally:
        for env in envs.values():
            env.close()
    batch = {
        "images": {
            camera: np.stack([o["images"][camera] for o in observations])
            for camera in observations[0]["images"]
        },
        "instruction": [o["instruction"] for o in observations],
    }
    if "state" in observations[0]:
        batch["state"] = np.stack([o["state"] for o in observations])
    return policy.encode(batch)


class ToyProblem:
    """The contexts, the toy reward and the two gradient estimates of one head; see the module docstring."""

    def __init__(self, head: torch.nn.Module, embedding: torch.Tensor, features: torch.Tensor | None, seed: int,
                 target_from: str = "policy", target_offset: float = 0.1) -> None:  # fmt: skip
        self.head, self.embedding, self.features = head, embedding, features
        generator = torch.Generator().manual_seed(seed)
        weight = torch.randn(embedding.shape[1], head.chunk_size * head.action_dim, generator=generator)
        offset = target_offset * torch.tanh(embedding @ weight / math.sqrt(embedding.shape[1]))
        self.generator = torch.Generator().manual_seed(seed + 1)
        self.target = offset.view(-1, head.chunk_size, head.action_dim) + self._anchor(target_from)
        self.parameters = self._ppo_parameters()

    @torch.no_grad()
    def _anchor(self, target_from: str, draws: int = 16) -> torch.Tensor | float:
        """0, or the evaluated policy's mean chunk ``(N, H, A)`` in each context over ``draws`` draws of its noise."""
        if target_from == "zero":
            return 0.0
        embedding, features = self._inputs(torch.arange(self.embedding.shape[0]).repeat(draws))
        actions = self.head.deterministic_action(embedding, self.generator, features)
        return actions.view(draws, -1, self.head.chunk_size, self.head.action_dim).mean(0)

    def reward(self, contexts: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``(B,)`` toy rewards of chunks ``(B, H, A)`` in contexts ``(B,)`` (indices)."""
        return -(actions - self.target[contexts]).square().mean((1, 2))

    def _inputs(self, contexts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.embedding[contexts], None if self.features is None else self.features[contexts]

    def _draw(self, size: int) -> torch.Tensor:
        return torch.randint(0, self.embedding.shape[0], (size,), generator=self.generator)

    def _gradient(self, loss: torch.Tensor, parameters: list[torch.nn.Parameter]) -> torch.Tensor:
        grads = torch.autograd.grad(loss, parameters, allow_unused=True)
        return torch.cat(
            [
                (torch.zeros_like(p) if g is None else g).flatten()
                for p, g in zip(parameters, grads, strict=True)
            ]
        )

    def _ppo_parameters(self) -> list[torch.nn.Parameter]:
        """The head's parameters that PPO's loss reaches (a probe batch's log-prob gradient is not None)."""
        candidates = [p for p in self.head.parameters() if p.requires_grad]
        contexts = self._draw(8)
        embedding, features = self._inputs(contexts)
        with torch.no_grad():
            actions, replay = self.head.sample(embedding, generator=self.generator, rl_features=features)
        log_prob, _ = self.head.log_prob(embedding, actions, replay, rl_features=features)
        grads = torch.autograd.grad(log_prob.sum(), candidates, allow_unused=True)
        reached = [p for p, g in zip(candidates, grads, strict=True) if g is not None]
        if not reached:
            raise ValueError(
                "bench alignment: the head's log-prob reaches none of its parameters; nothing for PPO to train"
            )
        return reached

    def true_gradient(self, samples: int, chunk: int = 500) -> tuple[torch.Tensor, float]:
        """``grad J`` of the evaluated policy over ``samples`` draws, and the cosine between its two halves."""
        halves = []
        for half in (samples // 2, samples - samples // 2):
            total = torch.zeros(sum(p.numel() for p in self.parameters))
            for start in range(0, half, chunk):
                contexts = self._draw(min(chunk, half - start))
                embedding, features = self._inputs(contexts)
                actions = self.head.deterministic_action(embedding, self.generator, features)
                total += self._gradient(self.reward(contexts, actions).sum() / half, self.parameters)
            halves.append(total)
        return (halves[0] + halves[1]) / 2, cosine(halves[0], halves[1])

    def ppo_gradient(self, size: int, baseline_samples: int) -> torch.Tensor:
        """PPO's policy-gradient estimate (ascent direction) on a mini-batch of ``size`` chunks."""
        contexts = self._draw(size)
        embedding, features = self._inputs(contexts)
        with torch.no_grad():
            actions, replay = self.head.sample(embedding, generator=self.generator, rl_features=features)
            rewards = self.reward(contexts, actions)
            repeated = contexts.repeat(baseline_samples)
            repeated_embedding, repeated_features = self._inputs(repeated)
            other, _ = self.head.sample(
                repeated_embedding, generator=self.generator, rl_features=repeated_features
            )
            values = self.reward(repeated, other).view(baseline_samples, size).mean(0)
            advantages = rewards - values
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        log_prob, _ = self.head.log_prob(embedding, actions, replay, rl_features=features)
        return self._gradient((advantages * log_prob.sum((1, 2))).mean(), self.parameters)


def cosine(first: torch.Tensor, second: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(first, second, dim=0))


def signal_to_noise(estimates: torch.Tensor) -> float:
    """``|E g|^2 / E|g - E g|^2`` from ``(R, P)`` independent estimates, the signal bias-corrected by ``tr(Cov) / R``."""
    repeats = estimates.shape[0]
    mean = estimates.mean(0)
    noise = (estimates - mean).square().sum(1).sum() / (repeats - 1)
    return float((mean.square().sum() - noise / repeats) / noise)


def summary(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3),
            "mean": round(statistics.fmean(values), 3), "std": round(statistics.stdev(values), 3) if len(values) > 1 else 0.0,
            "values": [round(v, 3) for v in values]}  # fmt: skip


def measure_alignment(head: torch.nn.Module, embedding: torch.Tensor, features: torch.Tensor | None,
                      settings: AlignmentSettings, minibatch_size: int) -> dict[str, Any]:  # fmt: skip
    """The figures of the module docstring for ``head`` on contexts ``embedding`` ``(N, D)`` (and ``features``)."""
    torch.manual_seed(settings.seed)
    problem = ToyProblem(
        head, embedding, features, settings.seed, settings.target_from, settings.target_offset
    )
    true, self_cosine = problem.true_gradient(settings.true_samples)
    estimates = torch.stack([problem.ppo_gradient(minibatch_size, settings.baseline_samples)
                             for _ in range(settings.repeats)])  # fmt: skip
    reference = [cosine(problem.ppo_gradient(settings.reference_batch, settings.baseline_samples), true)
                 for _ in range(settings.reference_repeats)]  # fmt: skip
    return {
        "minibatch_size": minibatch_size,
        "cosine_at_minibatch": summary([cosine(estimate, true) for estimate in estimates]),
        "cosine_of_mean_minibatch_estimate": round(cosine(estimates.mean(0), true), 3),
        "reference_batch": settings.reference_batch,
        "cosine_at_reference_batch": summary(reference),
        "signal_to_noise_at_minibatch": round(signal_to_noise(estimates), 4),
        "true_gradient_self_cosine": round(self_cosine, 3),
        "true_samples": settings.true_samples,
        "target": {"from": settings.target_from, "offset": settings.target_offset},
        "parameters": sum(p.numel() for p in problem.parameters),
    }


def run_alignment_benchmark(
    cfg: DictConfig, settings: AlignmentSettings, policy_folder: str | None = None
) -> dict:
    """``vla-rl bench alignment``: the run's policy and contexts from ``cfg``, then :func:`measure_alignment`."""
    if policy_folder is not None and not (Path(policy_folder) / "config.json").is_file():
        raise ValueError(
            f"bench alignment: --policy {policy_folder!r} is not a save_pretrained folder (no config.json)"
        )
    setup = plan_rl_run(read_run_plan(cfg))
    policy = policy_with_weights(setup, policy_folder)
    embedding, features = encode_contexts(policy, setup, settings.num_contexts)
    minibatch = settings.minibatch_size or configured_minibatch_size(setup)
    head = setup.policy_spec.config["head"]
    result = measure_alignment(policy.head, embedding, features, settings, minibatch)
    return {"head": head["name"], "head_options": head.get("options", {}), "policy": policy_folder or "fresh",
            "env": setup.env_name, "tasks": list(setup.tasks), "contexts": settings.num_contexts, **result}  # fmt: skip
