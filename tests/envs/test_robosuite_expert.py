"""The scripted robosuite experts succeed, through the same lookup `vla-rl collect` uses."""

from __future__ import annotations

import pytest

from envs.experts import get_expert
from envs.registry import make


def _run(env, expert, seed: int) -> bool:
    observation, _ = env.reset(seed=seed)
    expert.reset(seed=seed)
    for _ in range(env.env_spec.max_episode_steps):
        observation, reward, terminated, truncated, info = env.step(expert.act(observation))
        if terminated or truncated:
            return bool(info["is_success"]) and reward == 1.0
    return False


@pytest.mark.parametrize(("task", "seeds"), [("Lift", (0, 1, 2, 3)), ("Stack", (0,))])
def test_expert_succeeds_on_every_seed(task, seeds):
    env = make(f"robosuite/{task}", image_size=16, cameras=("agentview",))
    try:
        expert = get_expert("robosuite", task, env, noise_std=0.002, seed=0)
        assert [_run(env, expert, seed) for seed in seeds] == [True] * len(seeds)
    finally:
        env.close()


def test_expert_needs_the_osc_pose_controller():
    env = make("robosuite/Lift", image_size=16, cameras=("agentview",), controller="OSC_POSITION")
    try:
        with pytest.raises(ValueError, match="need the OSC_POSE controller"):
            get_expert("robosuite", "Lift", env)
    finally:
        env.close()
    with pytest.raises(KeyError, match="no scripted expert for env 'robosuite', task 'Door'.*robosuite/Lift"):
        get_expert("robosuite", "Door", None)
