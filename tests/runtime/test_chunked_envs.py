from __future__ import annotations

import numpy as np
import point_env
import pytest

from vla_rl.workers.chunked_envs import ChunkedEnvs


def make_envs(num_envs: int, auto_reset: bool, max_episode_steps: int = 6) -> ChunkedEnvs:
    return ChunkedEnvs(lambda i: point_env.make("reach_red", max_episode_steps=max_episode_steps), num_envs,
                       base_seed=5, auto_reset=auto_reset)  # fmt: skip


def test_chunk_rewards_sum_and_an_episode_end_stops_the_chunk():
    envs = make_envs(2, auto_reset=True)
    envs.reset()
    # Env 0 jumps onto its goal at the 2nd action; env 1 stands still for the whole chunk.
    goal = np.array(envs.envs[0].goal)
    start = np.array(envs.envs[0].position)
    first = np.clip(start + np.clip(goal - start, -0.1, 0.1), -1, 1)
    envs.envs[0].position = goal - (first - start)  # so that the first action lands exactly on the goal
    chunks = np.zeros((2, 3, 2), np.float32)
    chunks[0, 0] = first - start
    result = envs.step(chunks)
    assert result.terminated.tolist() == [True, False] and result.truncated.tolist() == [False, False]
    assert result.steps_executed.tolist() == [1, 3]
    assert result.reward.tolist() == [1.0, 0.0] and result.success.tolist() == [True, False]
    # the final observation is where the episode ended; the observation is the auto-reset one
    np.testing.assert_allclose(result.final_observation["state"][0], goal, atol=1e-6)
    assert not np.allclose(result.observation["state"][0], goal)
    assert result.finished_episodes[0]["env_index"] == 0 and result.finished_episodes[0]["success"]


def test_truncation_is_reported_and_seeds_are_deterministic():
    runs = []
    for _ in range(2):
        envs = make_envs(2, auto_reset=True, max_episode_steps=4)
        first = envs.reset()
        result = envs.step(np.zeros((2, 5, 2), np.float32))
        runs.append((first["state"], result.observation["state"]))
        assert result.truncated.tolist() == [True, True] and result.steps_executed.tolist() == [4, 4]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert not np.array_equal(runs[0][0], runs[0][1])  # the next episode has a new seed


def test_without_auto_reset_an_ended_env_stays_inactive():
    envs = make_envs(2, auto_reset=False, max_episode_steps=2)
    envs.reset()
    envs.step(np.zeros((2, 2, 2), np.float32))
    again = envs.step(np.zeros((2, 2, 2), np.float32))
    assert again.active.tolist() == [False, False] and again.steps_executed.tolist() == [0, 0]


def test_shared_init_states_give_identical_starts():
    envs = make_envs(3, auto_reset=False)
    envs.reset()
    state = envs.init_states[0]
    observation = envs.reset(init_states=[state, state, state])
    assert np.ptp(observation["state"], axis=0).max() == 0.0
    with pytest.raises(ValueError, match="2 seeds for 3 envs"):
        envs.reset(seeds=[1, 2])
