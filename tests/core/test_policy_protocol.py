"""The policy protocol of contract/ (what the core calls on a policy) holds for a policy built the core's way, and
refuses objects that lack part of it."""

from __future__ import annotations

import pytest
import torch

from contract.policy import ActingPolicy, Policy, reduce_log_prob
from policies.checks import synthetic_io_spec, synthetic_stats
from vla_rl.workers.policy_factory import PolicySpec


def test_a_policy_built_from_its_spec_meets_the_policy_protocol():
    io_spec = synthetic_io_spec()
    policy = PolicySpec({"chunk_size": 2, "embedding_dim": 32}, io_spec, synthetic_stats(io_spec)).build("cpu")
    assert isinstance(policy, Policy) and isinstance(policy, ActingPolicy)


class ActsOnly:
    def act(self, obs_batch, deterministic=True, generator=None):
        return None, {}


def test_an_object_that_only_acts_is_an_acting_policy_but_no_policy():
    assert isinstance(ActsOnly(), ActingPolicy)
    assert not isinstance(ActsOnly(), Policy)


def test_reduce_log_prob_sums_over_the_granularity():
    log_prob = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    assert torch.equal(reduce_log_prob(log_prob, "dimension"), log_prob)
    assert reduce_log_prob(log_prob, "action").tolist() == [[6.0, 22.0, 38.0], [54.0, 70.0, 86.0]]
    assert reduce_log_prob(log_prob, "chunk").tolist() == [66.0, 210.0]
    with pytest.raises(ValueError, match="granularity 'token'"):
        reduce_log_prob(log_prob, "token")
