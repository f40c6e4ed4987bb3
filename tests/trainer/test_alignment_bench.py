"""`vla-rl bench alignment`: the estimator against a Gaussian head whose true gradient is a closed form, the
signal-to-noise figure against synthetic estimates of known SNR, and the command end to end at tiny size."""

from __future__ import annotations

import json

import pytest
import torch

from policies.heads import build_head
from vla_rl.benchmarks.alignment import (
    AlignmentSettings,
    ToyProblem,
    cosine,
    measure_alignment,
    signal_to_noise,
)
from vla_rl.cli import main

CONTEXTS, EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM = 16, 6, 2, 3


def linear_gaussian_head():
    """A Gaussian head whose mean is linear in the embedding, ``mu = W e + b``, with its std frozen."""
    torch.manual_seed(0)
    head = build_head("gaussian", EMBEDDING_DIM, CHUNK_SIZE, ACTION_DIM, num_layers=0, init_std=0.3)
    head.log_std.requires_grad_(False)
    return head


def closed_form_gradient(head, embedding: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``grad J`` for ``J = -E_c mean((W e_c + b - g_c)^2)``: ``dW = -2/(HA) E[(mu - g) e^T]``, ``db = -2/(HA) E[mu - g]``."""
    linear = head.network[-1]
    with torch.no_grad():
        error = (linear(embedding) - target.flatten(1)) * (-2.0 / (CHUNK_SIZE * ACTION_DIM))  # (N, H*A)
    return torch.cat([(error.T @ embedding / len(embedding)).flatten(), error.mean(0)])


def test_true_gradient_is_the_closed_form_and_ppo_agrees_with_it_at_large_batch() -> None:
    head = linear_gaussian_head()
    embedding = torch.randn(CONTEXTS, EMBEDDING_DIM)
    problem = ToyProblem(head, embedding, None, seed=0)
    assert problem.parameters == [
        head.network[-1].weight,
        head.network[-1].bias,
    ]  # the frozen std is left out
    expected = closed_form_gradient(head, embedding, problem.target)
    true, self_cosine = problem.true_gradient(samples=8000)  # contexts drawn with replacement
    assert cosine(true, expected) > 0.999 and self_cosine > 0.99
    torch.testing.assert_close(true, expected, rtol=0.1, atol=0.1 * expected.abs().max().item())
    large = [cosine(problem.ppo_gradient(20000, baseline_samples=4), expected) for _ in range(2)]
    small = [cosine(problem.ppo_gradient(8, baseline_samples=4), expected) for _ in range(8)]
    assert min(large) > 0.95
    assert max(small) < min(large)  # a small mini-batch is a noisier estimate of the same direction


def test_signal_to_noise_of_synthetic_estimates_matches_its_definition() -> None:
    generator = torch.Generator().manual_seed(0)
    mean = torch.zeros(50)
    mean[0] = 2.0  # |E g|^2 = 4; noise: 50 coordinates of variance 0.25, E|g - E g|^2 = 12.5
    estimates = mean + 0.5 * torch.randn(4000, 50, generator=generator)
    assert signal_to_noise(estimates) == pytest.approx(4.0 / 12.5, rel=0.05)
    # the bias correction: pure noise has a signal-to-noise ratio near 0, not 1 / repeats
    assert abs(signal_to_noise(0.5 * torch.randn(10, 50, generator=generator))) < 0.05


def test_measure_alignment_reports_every_figure_and_refuses_bad_sizes() -> None:
    head = linear_gaussian_head()
    settings = AlignmentSettings(repeats=3, reference_batch=400, reference_repeats=1, true_samples=200)
    result = measure_alignment(head, torch.randn(CONTEXTS, EMBEDDING_DIM), None, settings, minibatch_size=16)
    assert result["minibatch_size"] == 16 and len(result["cosine_at_minibatch"]["values"]) == 3
    assert -1 <= result["cosine_at_minibatch"]["min"] <= result["cosine_at_minibatch"]["median"] <= 1
    assert result["parameters"] == EMBEDDING_DIM * CHUNK_SIZE * ACTION_DIM + CHUNK_SIZE * ACTION_DIM
    with pytest.raises(ValueError, match="repeats=1 must be >= 2"):
        AlignmentSettings(repeats=1)


def test_bench_alignment_command_prints_the_figures_for_the_configured_head(capsys) -> None:
    code = main(["bench", "alignment", "experiment=flow_sde_ppo", "env.tasks=[reach]", "env.kwargs.image_size=32",
                 "policy.embedding_dim=32", "+policy.head.options.hidden_dim=32", "+policy.head.options.num_blocks=1",
                 "--contexts", "4", "--repeats", "2", "--true-samples", "64", "--reference-batch", "64"])  # fmt: skip
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["head"] == "flow" and result["head_options"]["hybrid"] is True
    assert (
        result["minibatch_size"] == 32
    )  # 16 envs x 8 chunks (reach: 32 steps) over 4 mini-batches, as RL trains
    assert -1 <= result["cosine_at_minibatch"]["median"] <= 1 and result["true_gradient_self_cosine"] <= 1
