"""The algorithm registry: each entry says how its rollouts are collected, and the config accepts its names."""

from __future__ import annotations

import pytest

from contract.config_reader import FieldError
from vla_rl.algos.algorithms import (
    ALGORITHMS,
    CONTINUING,
    GROUPED_EPISODES,
    get_algorithm,
    register_algorithm,
)
from vla_rl.stages.rl.config import AlgoConfig


def test_ppo_continues_and_grpo_collects_grouped_episodes():
    assert AlgoConfig(name="ppo").collection is CONTINUING and CONTINUING.auto_reset
    grpo = AlgoConfig(name="grpo").collection
    assert grpo is GROUPED_EPISODES and grpo.one_episode_per_env and grpo.grouped_initial_states
    assert not grpo.auto_reset


def test_a_registered_algorithm_is_a_valid_name_and_unknown_names_are_refused():
    with pytest.raises(FieldError, match="name='sac': allowed: grpo, ppo"):
        AlgoConfig(name="sac")
    register_algorithm("sac", CONTINUING)
    try:
        assert AlgoConfig(name="sac").collection is CONTINUING
        with pytest.raises(ValueError, match="registered already"):
            register_algorithm("sac", GROUPED_EPISODES)
    finally:
        del ALGORITHMS["sac"]
    with pytest.raises(KeyError, match="unknown algorithm 'sac'; allowed: grpo, ppo"):
        get_algorithm("sac")
