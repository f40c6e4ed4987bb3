"""Batch-invariant matrix products (policies.backbones.batch_invariant): a row of F.linear is the same bit for bit
in any batch, at any thread count, its gradients are the ordinary ones; and both VLA families, in every decoding
and chain, give a sample's rollout log-probs and value back bit for bit from a minibatch of other samples."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from policies.backbones.batch_invariant import batch_invariant
from policies.backbones.tiny import write_tiny_vlm
from policies.checks import synthetic_io_spec, synthetic_observation, synthetic_stats
from policies.factory import build_from_factory

SHAPES = [(5, 32, 1), (64, 64, 29), (64, 4, 29), (4, 64, 7), (32, 3, 5), (192, 64, 64)]  # (K, N, rows per sample)


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize(("in_features", "out_features", "tokens"), SHAPES)
def test_each_row_is_the_same_in_any_batch_and_at_any_thread_count(threads, in_features, out_features, tokens):
    generator = torch.Generator().manual_seed(in_features * out_features + tokens)
    weight, bias = torch.randn(out_features, in_features, generator=generator), torch.randn(out_features, generator=generator)
    x = torch.randn(16, tokens, in_features, generator=generator)
    torch.set_num_threads(1)
    with batch_invariant():
        reference = F.linear(x, weight, bias)
    torch.testing.assert_close(reference, F.linear(x, weight, bias))  # the same product, up to rounding
    for thread_count in (1, 2):
        torch.set_num_threads(thread_count)
        for size in (1, 2, 3, 5, 16):
            rows = torch.randperm(16, generator=generator)[:size]
            with batch_invariant():
                assert torch.equal(F.linear(x[rows], weight, bias), reference[rows])
                assert torch.equal(F.linear(x[rows], weight), F.linear(x, weight)[rows])


def test_gradients_are_the_ordinary_ones():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 7, 10, generator=generator, requires_grad=True)
    weight = torch.randn(6, 10, generator=generator, requires_grad=True)
    bias = torch.randn(6, generator=generator, requires_grad=True)
    upstream = torch.randn(3, 7, 6, generator=generator)
    with batch_invariant():
        invariant = torch.autograd.grad((F.linear(x, weight, bias) * upstream).sum(), (x, weight, bias))
    ordinary = torch.autograd.grad((F.linear(x, weight, bias) * upstream).sum(), (x, weight, bias))
    for got, expected in zip(invariant, ordinary, strict=True):
        torch.testing.assert_close(got, expected)


FAMILIES = {
    "token_parallel": ("policies.backbones.token_vla:build_policy", {"tokens": {"num_bins": 16, "temperature": 1.3}}),
    "token_autoregressive": ("policies.backbones.token_vla:build_policy",
                             {"tokens": {"num_bins": 16, "decoding": "autoregressive"}, "chunk_size": 2}),
    "expert_sde": ("policies.backbones.expert_vla:build_policy", {"flow": {"num_inference_steps": 2}}),
    "expert_noise": ("policies.backbones.expert_vla:build_policy",
                     {"flow": {"num_inference_steps": 2, "rl_method": "noise"}}),
}  # fmt: skip


def sliced(tree: dict, rows: list[int]) -> dict:
    """The samples ``rows`` of an observation or extras dict, in that order."""
    return {key: sliced(value, rows) if isinstance(value, dict) else
            [value[i] for i in rows] if isinstance(value, list) else value[rows] for key, value in tree.items()}  # fmt: skip


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_recomputes_a_rollout_sample_from_any_minibatch(tmp_path_factory, threads, family):
    source = tmp_path_factory.getbasetemp() / "batch_invariant_vlm"
    if not source.exists():
        write_tiny_vlm(source, "idefics3")
    factory, options = FAMILIES[family]
    io_spec = synthetic_io_spec()
    config = {"backbone": {"source": str(source), "train": "lora", "lora_rank": 4, "max_length": 8},
              "value": {"hidden_dims": [16]}, **options}  # fmt: skip
    torch.manual_seed(0)
    policy = build_from_factory(factory, config, io_spec, synthetic_stats(io_spec)).eval()
    obs = synthetic_observation(io_spec, 8, seed=3)
    torch.set_num_threads(1)
    _, extras = policy.act(obs, generator=torch.Generator().manual_seed(4))
    torch.set_num_threads(2)
    for rows in ([0], [1, 2, 3], [6, 2, 5, 0, 7]):
        log_prob, _, value = policy.evaluate(sliced(obs, rows), sliced(extras, rows))
        assert torch.equal(log_prob, extras["log_prob"][rows]) and torch.equal(value, extras["value"][rows])
