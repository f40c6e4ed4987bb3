"""Scripted tabletop experts succeed reliably; the expert registry explains unknown pairs."""

from __future__ import annotations

import numpy as np
import pytest

from envs.builtin.tabletop import make_tabletop_env
from envs.builtin.tasks import TASKS
from envs.experts import available_experts, get_expert

# The rate the README stated until its rewrite in 16956db: "Scripted experts succeed in 100% of 100 seeded
# episodes per task." (seeds 0..99).
EPISODES = 100


@pytest.fixture(scope="module")
def env():
    env = make_tabletop_env(cameras=())
    yield env
    env.close()


def run_episode(env, expert, seed: int, task: str) -> bool:
    obs, _ = env.reset(seed=seed, options={"task": task})
    expert.reset()
    for _ in range(env.max_episode_steps):
        obs, _, terminated, truncated, info = env.step(expert.act(obs))
        if terminated or truncated:
            return bool(info["is_success"])
    return False


@pytest.mark.parametrize("task", list(TASKS))
def test_expert_succeeds_in_all_100_seeded_episodes(env, task):
    """Pins the stated rate, 100% of 100 seeded episodes (seeds 0..99). The former bound, 95% of 20,
    let through a push expert that fails 1 of these 100; the experts' demonstrations feed every SFT run."""
    env.reset(seed=0, options={"task": task})
    expert = get_expert("tabletop", task, env, noise_std=0.0, seed=0)
    failed = [seed for seed in range(EPISODES) if not run_episode(env, expert, seed, task)]
    assert failed == [], f"{task}: the expert failed from seeds {failed} ({EPISODES - len(failed)}/{EPISODES})"


def test_noisy_expert_gives_different_actions_and_still_works(env):
    env.reset(seed=0, options={"task": "lift"})
    quiet = get_expert("tabletop", "lift", env)
    noisy = get_expert("tabletop", "lift", env, noise_std=0.005, seed=1)
    obs, _ = env.reset(seed=3, options={"task": "lift"})
    quiet.reset(), noisy.reset()
    assert not np.allclose(quiet.act(obs), noisy.act(obs))
    successes = sum(run_episode(env, noisy, seed, "lift") for seed in range(10))
    assert successes >= 8


def test_unknown_expert_lists_what_exists(env):
    assert set(available_experts()["tabletop"]) == set(TASKS)
    with pytest.raises(KeyError, match="tabletop/stack"):
        get_expert("tabletop", "juggle", env)
    with pytest.raises(KeyError, match="no scripted expert for env 'robosuite', task 'Door'"):
        get_expert("robosuite", "Door", env)
