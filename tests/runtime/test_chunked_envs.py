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


def test_auto_reset_episodes_after_a_seeded_reset_do_not_depend_on_what_the_envs_ran_before():
    """A resumed run's fresh env workers draw the episodes an uninterrupted run's long-lived ones draw."""

    def episode_starts(envs: ChunkedEnvs) -> list:
        envs.reset(seeds=[11, 12])
        starts = []
        for _ in range(3):  # every step ends both episodes (4 steps each); auto-reset draws the next ones
            starts.append(envs.step(np.zeros((2, 4, 2), np.float32)).observation["state"].tolist())
        return starts

    fresh = make_envs(2, auto_reset=True, max_episode_steps=4)
    used = make_envs(2, auto_reset=True, max_episode_steps=4)
    used.reset()
    for _ in range(5):
        used.step(np.zeros((2, 4, 2), np.float32))
    used.reset(seeds=[3, 4])
    used.step(np.zeros((2, 4, 2), np.float32))
    starts = episode_starts(fresh)
    assert episode_starts(used) == starts
    assert len({str(s) for s in starts}) == 3  # each auto-reset draws a new episode
    # the stream follows the seed: another seed, other episodes
    other = make_envs(2, auto_reset=True, max_episode_steps=4)
    other.reset(seeds=[11, 13])
    assert other.step(np.zeros((2, 4, 2), np.float32)).observation["state"].tolist()[0] == starts[0][0]
    assert other.step(np.zeros((2, 4, 2), np.float32)).observation["state"].tolist()[1] != starts[1][1]


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


def test_tabletop_renders_only_where_a_chunk_ends_and_observes_exactly_what_a_full_step_would():
    import policies  # noqa: F401  (before any rendering: see docs/platform.md)
    from envs.registry import make

    def tabletop(_: int):
        return make("tabletop/reach", image_size=32, dense_reward=True, max_episode_steps=10)

    envs = ChunkedEnvs(tabletop, 1, base_seed=3, auto_reset=True)
    reference = tabletop(0)  # stepped one action at a time, rendering every step
    renders = []
    renderer = envs.envs[0].unwrapped._renderer
    original_render = renderer.render
    renderer.render = lambda *args: renders.append(1) or original_render(*args)
    envs.reset(seeds=[11])
    reference.reset(seed=11)
    renders.clear()
    rng = np.random.default_rng(0)
    low, high = reference.action_space.low, reference.action_space.high
    for chunk_index in range(4):  # 12 actions against a 10-step episode: the fourth chunk is cut by truncation
        chunk = rng.uniform(low, high, (1, 3, low.shape[0])).astype(np.float32)
        result = envs.step(chunk)
        expected_reward = 0.0
        for action in chunk[0, : result.steps_executed[0]]:
            expected, reward, *_ = reference.step(action)
            expected_reward += reward
        final = result.final_observation
        for camera, image in expected["images"].items():
            np.testing.assert_array_equal(final["images"][camera][0], image)
        np.testing.assert_array_equal(final["state"][0], expected["state"])
        np.testing.assert_allclose(result.reward[0], expected_reward, rtol=1e-6)
        if chunk_index == 3:
            assert result.steps_executed.tolist() == [1] and result.truncated.tolist() == [True]
    # two cameras at the end of each of the 4 chunks, plus the auto-reset's observation after truncation
    assert len(renders) == 2 * 4 + 2
    assert envs.envs[0].unwrapped.skip_images is False
    envs.close()
    reference.close()


def test_the_vectorised_env_interface_step_async_wait_env_method_and_get_attr():
    stepped, split = make_envs(3, auto_reset=True), make_envs(3, auto_reset=True)
    stepped.reset(), split.reset()
    chunks = np.random.default_rng(0).uniform(-0.1, 0.1, (3, 2, 2)).astype(np.float32)
    split.step_async(chunks)
    np.testing.assert_array_equal(split.step_wait().observation["state"], stepped.step(chunks).observation["state"])
    with pytest.raises(RuntimeError, match="without step_async"):
        split.step_wait()
    split.env_method("deactivate_envs", indices=[0, 2])
    assert split.active.tolist() == [False, True, False]
    assert split.env_method("env_spec") is split.envs[0].unwrapped.env_spec
    assert split.get_attr("tasks") == list(split.tasks) and len(split.get_attr("init_states")) == 3
    with pytest.raises(AttributeError, match="env method 'close'; allowed: deactivate_envs"):
        split.env_method("close")
