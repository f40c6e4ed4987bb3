"""Per-task pools (vla_rl/stages/rl/task_pools.py): reservoir eviction against an independent Algorithm R and its
uniformity, the chunks an episode puts in them, balanced replay, checkpoints, regression metrics, the solved
floor of failure-rate sampling, and the config checks of all of it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats
from tensordict import TensorDict

from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config
from vla_rl.stages.rl import task_sampling
from vla_rl.stages.rl.config import validate_rl_sections
from vla_rl.stages.rl.rollout import Rollout
from vla_rl.stages.rl.task_pools import (
    ChunkPool,
    PoolStateError,
    TaskPools,
    TaskPoolsConfig,
    regression_metrics,
    updated_best,
)


def numbered(value: int) -> dict[str, np.ndarray]:
    """A chunk whose every array holds ``value`` (so a slot says which chunk it holds)."""
    return {"state": np.full(2, value, np.float32), "action": np.full((3, 1), value, np.float32)}


def algorithm_r(stream_length: int, capacity: int, seed: int) -> list[int]:
    """Vitter's Algorithm R written out on its own: the item numbers a reservoir holds, slot by slot."""
    rng = np.random.default_rng(seed)
    reservoir = []
    for item in range(stream_length):
        if item < capacity:
            reservoir.append(item)
            continue
        j = rng.integers(0, item + 1)
        if j < capacity:
            reservoir[j] = item
    return reservoir


def held(pool: ChunkPool) -> list[int]:
    return [int(v) for v in pool.arrays["state"][: pool.size, 0]]


@pytest.mark.parametrize(("stream_length", "capacity"), [(3, 5), (5, 5), (40, 5), (200, 16)])
def test_a_pool_holds_what_algorithm_r_holds(stream_length, capacity):
    pool, rng = ChunkPool(capacity), np.random.default_rng(7)
    for item in range(stream_length):
        pool.add(numbered(item), f"instruction {item}", rng)
    expected = algorithm_r(stream_length, capacity, 7)
    assert held(pool) == expected
    assert pool.instructions == [f"instruction {item}" for item in expected]
    assert pool.size == min(stream_length, capacity) and pool.seen == stream_length
    assert pool.arrays["action"].shape == (capacity, 3, 1)
    assert [int(v) for v in pool.arrays["action"][: pool.size, 0, 0]] == expected


def test_every_chunk_offered_is_kept_with_probability_capacity_over_offered():
    stream_length, capacity, trials = 20, 5, 3000
    kept = np.zeros(stream_length)
    for trial in range(trials):
        pool, rng = ChunkPool(capacity), np.random.default_rng(trial)
        for item in range(stream_length):
            pool.add(numbered(item), "", rng)
        kept[held(pool)] += 1
    # each item is in the reservoir with probability 5/20: counts ~ Binomial(3000, 0.25), all 20 items alike
    assert stats.chisquare(kept).pvalue > 1e-3
    assert np.abs(kept / trials - capacity / stream_length).max() < 0.04


def rollout(horizon: int = 3) -> Rollout:
    """Two envs (one stage), four chunk steps, chunks of ``horizon`` actions. Env 0: a success of 5 env steps
    (chunks 0-1), then an episode the window cuts; env 1: a failure of 9 env steps (chunks 0-2, truncated),
    then one of 2 (chunk 3, terminated, success)."""
    n, t = 2, 4
    ids = torch.arange(n * t).reshape(n, t)
    terminated = torch.zeros(n, t, dtype=torch.bool)
    truncated = torch.zeros(n, t, dtype=torch.bool)
    success = torch.zeros(n, t, dtype=torch.bool)
    terminated[0, 1] = success[0, 1] = True
    truncated[1, 2] = True
    terminated[1, 3] = success[1, 3] = True
    batch = TensorDict({
        "observation": {"images": {"top": ids.reshape(n, t, 1, 1, 1).expand(n, t, 4, 4, 3).to(torch.uint8)},
                        "state": ids.reshape(n, t, 1).float(), "instruction_id": torch.tensor([[0] * t, [1] * t])},
        "action_chunk": ids.reshape(n, t, 1, 1).expand(n, t, horizon, 2).float(),
        "terminated": terminated, "truncated": truncated, "success": success,
        "mask": torch.ones(n, t, dtype=torch.bool),
    }, batch_size=[n, t])  # fmt: skip
    episodes = [
        {"stage": 0, "env_index": 0, "length": 5, "success": True, "task": "red", "instruction": "go red"},
        {"stage": 0, "env_index": 1, "length": 9, "success": False, "task": "blue", "instruction": "go blue"},
        {"stage": 0, "env_index": 1, "length": 2, "success": True, "task": "blue", "instruction": "go blue"},
    ]
    return Rollout(batch, ["go red", "go blue"], episodes, env_steps=16)


def test_the_chunks_of_finished_episodes_go_to_their_task_and_outcome_with_the_actions_the_env_executed():
    pools = TaskPools(TaskPoolsConfig(capacity=10), seed=0)
    assert pools.add_rollout(rollout(), stage_size=2, iteration=4) == 6  # the cut episode of env 0 is left out
    red, blue = pools.pools["success"]["red"], pools.pools["success"]["blue"]
    failed = pools.pools["failure"]["blue"]
    assert set(pools.pools["failure"]) == {"blue"}
    # chunk ids are row * 4 + step
    assert held(red) == [0, 1] and held(failed) == [4, 5, 6] and held(blue) == [7]
    assert red.arrays["action_mask"][:2].tolist() == [[True] * 3, [True, True, False]]  # 5 = 3 + 2 steps
    assert failed.arrays["action_mask"][:3].sum() == 9 and blue.arrays["action_mask"][0].tolist() == [True, True, False]
    assert red.arrays["images/top"][1, 0, 0].tolist() == [1, 1, 1]
    assert red.instructions == ["go red"] * 2 and blue.instructions == ["go blue"]
    assert red.arrays["iteration"][:2].tolist() == [4, 4]
    assert pools.sizes("success") == {"blue": 1, "red": 2}


def test_failure_capacity_bounds_the_failure_pools_and_zero_keeps_none():
    config = TaskPoolsConfig(capacity=10, failure_capacity=2)
    pools = TaskPools(config, seed=0)
    pools.add_rollout(rollout(), 2, 0)
    assert pools.sizes("failure") == {"blue": 2} and pools.pools["failure"]["blue"].seen == 3
    none = TaskPools(TaskPoolsConfig(capacity=10, failure_capacity=0), seed=0)
    none.add_rollout(rollout(), 2, 0)
    assert none.sizes("failure") == {"blue": 0} and none.sizes("success") == {"blue": 1, "red": 2}
    assert TaskPoolsConfig(capacity=7).capacity_of("failure") == 7


def pools_of(sizes: dict[str, int], failures: int = 0) -> TaskPools:
    """Success pools of the given sizes; chunk values encode (task index, item)."""
    pools = TaskPools(TaskPoolsConfig(capacity=100), seed=1)
    rng = np.random.default_rng(0)
    for index, (task, size) in enumerate(sizes.items()):
        for item in range(size):
            pools.pool("success", task).add({**numbered(1000 * index + item), "images/top": np.zeros((2, 2, 3), np.uint8),
                                             "action_mask": np.ones(3, bool)}, task, rng)  # fmt: skip
        for _ in range(failures):
            pools.pool("failure", task).add({**numbered(-1), "images/top": np.zeros((2, 2, 3), np.uint8),
                                             "action_mask": np.ones(3, bool)}, task, rng)  # fmt: skip
    return pools


def test_the_replay_gives_every_task_with_a_success_an_equal_share_of_each_step():
    pools = pools_of({"a": 1, "b": 5, "c": 60, "never": 0}, failures=4)
    replay = pools.sample_replay(chunks_per_step=7, steps=300, rng=np.random.default_rng(3))
    assert replay["action"].shape == (300, 7, 3, 1) and replay["images"]["top"].shape == (300, 7, 2, 2, 3)
    totals = {"a": 0, "b": 0, "c": 0}
    for step in range(300):
        counts = {task: replay["task"][step].count(task) for task in totals}
        assert sorted(counts.values()) == [2, 2, 3]  # 7 chunks among 3 tasks: 2 each and one more
        for task in counts:
            totals[task] += counts[task]
    assert stats.chisquare(list(totals.values())).pvalue > 1e-3  # the extra chunk goes to each task alike
    values = replay["state"][..., 0].astype(int)
    tasks = np.array(replay["task"])
    assert (values >= 0).all()  # never a failure
    for index, (task, size) in enumerate({"a": 1, "b": 5, "c": 60}.items()):
        items = values[tasks == task] - 1000 * index
        assert items.min() >= 0 and items.max() < size  # drawn from the task's own pool
        assert np.array(replay["instruction"])[tasks == task].tolist() == [task] * (tasks == task).sum()
    # within a task, uniform over its pool
    c_items = values[tasks == "c"] - 2000
    assert stats.chisquare(np.bincount(c_items, minlength=60)).pvalue > 1e-3


def test_no_replay_before_any_success():
    assert pools_of({"a": 0}, failures=3).sample_replay(4, 2, np.random.default_rng(0)) is None


def test_pools_saved_and_loaded_continue_as_the_originals(tmp_path):
    config = TaskPoolsConfig(capacity=3, failure_capacity=2)
    original = TaskPools(config, seed=5)
    for iteration in range(4):
        original.add_rollout(rollout(), 2, iteration)
    torch.save(original.state_dict(), tmp_path / "task_pools.pt")
    restored = TaskPools(config, seed=999)  # another seed: the generator's state comes from the file
    restored.load_state_dict(torch.load(tmp_path / "task_pools.pt", weights_only=False))
    for iteration in range(4, 9):  # the reservoirs are full: every further chunk draws from the generator
        original.add_rollout(rollout(), 2, iteration)
        restored.add_rollout(rollout(), 2, iteration)
    for outcome in ("success", "failure"):
        assert original.pools[outcome].keys() == restored.pools[outcome].keys()
        for task, pool in original.pools[outcome].items():
            twin = restored.pools[outcome][task]
            assert (pool.size, pool.seen, pool.instructions) == (twin.size, twin.seen, twin.instructions)
            for key, array in pool.arrays.items():
                np.testing.assert_array_equal(array, twin.arrays[key])
    assert original.pools["failure"]["blue"].arrays["iteration"].tolist() != [0, 0]  # later chunks replaced some


def test_pools_saved_with_another_capacity_are_refused_naming_the_key():
    state = TaskPools(TaskPoolsConfig(capacity=3), seed=0).state_dict()
    with pytest.raises(PoolStateError, match=r"'trainer.task_pools.failure_capacity' gives 4"):
        TaskPools(TaskPoolsConfig(capacity=3, failure_capacity=4), seed=0).load_state_dict(state)


def test_regression_is_the_fall_from_each_tasks_best_training_success():
    best = updated_best({}, {"a": 0.5, "b": 0.9})
    best = updated_best(best, {"a": 0.7, "b": 0.6, "c": 0.2})
    assert best == {"a": 0.7, "b": 0.9, "c": 0.2}
    success = {"a": 0.7, "b": 0.6, "c": 0.1}
    metrics = regression_metrics(["a", "b", "c", "unseen"], success, best, threshold=0.2)
    assert metrics == pytest.approx({"regression/a": 0.0, "regression/b": 0.3, "regression/c": 0.1,
                                     "regression/tasks_regressed": 1.0, "regression/max": 0.3})  # fmt: skip
    assert regression_metrics(["a"], {}, {}, 0.2) == {"regression/tasks_regressed": 0.0, "regression/max": 0.0}


def test_a_solved_task_keeps_its_floor_however_well_or_badly_it_does_now():
    config = task_sampling.TaskSamplingConfig(mode="failure", floor=0.1, solved_threshold=0.9, solved_floor=0.5,
                                             min_envs_per_task=0)
    tasks = ["solved", "hard"]
    previous = ["solved", "hard"] * 6
    best = {"solved": 0.95, "hard": 0.2}
    assignment = task_sampling.next_assignment(config, tasks, {"solved": 1.0, "hard": 0.0}, previous, 1, best)
    assert assignment.count("solved") == 4  # weights 0.5 : 1 over 12 envs
    unfloored = task_sampling.TaskSamplingConfig(mode="failure", floor=0.1, min_envs_per_task=0)
    assert task_sampling.next_assignment(unfloored, tasks, {"solved": 1.0, "hard": 0.0}, previous, 1, best).count(
        "solved") == 1  # weights 0.1 : 1  # fmt: skip
    # a task never solved has only the floor; a solved one that now fails weighs its failure rate
    weights = task_sampling.failure_weights(tasks, {"solved": 0.2, "hard": 0.95}, 0.1, {"solved"}, 0.5)
    assert weights.tolist() == pytest.approx([0.8, 0.1])
    assert task_sampling.solved_tasks({"a": 0.9, "b": 0.89}, 0.9) == {"a"}


@pytest.mark.parametrize(("overrides", "message"), [
    (["algo.success_replay_weight=0.5"], r"'algo.success_replay_weight'=0.5 replays .* 'trainer.task_pools.capacity'=0"),
    (["algo.success_replay_weight=0.5", "trainer.task_pools.capacity=8", "algo.success_replay_batch_size=3",
      "trainer.actor_world_size=2"], r"'algo.success_replay_batch_size'=3 must be a multiple of 'trainer.actor_world"),
    (["trainer.task_sampling.solved_floor=0.5"], r"'trainer.task_sampling.solved_floor'=0.5 .* mode=failure"),
    (["algo.success_replay_weight=-1"], r"'algo.success_replay_weight'=-1"),
    (["trainer.task_pools.capacity=-3"], r"'trainer.task_pools.capacity'=-3: must be >= 0"),
    (["trainer.task_pools.regression_threshold=2"], r"'trainer.task_pools.regression_threshold'=2"),
    (["trainer.task_sampling.solved_threshold=0"], r"'trainer.task_sampling.solved_threshold'=0"),
])  # fmt: skip
def test_bad_pool_and_replay_settings_are_config_errors_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate_rl_sections(load_config(["experiment=default", "trainer.task_sampling.mode=uniform", *overrides]), 2)


def test_the_defaults_leave_pools_replay_and_the_solved_floor_off():
    algo, trainer = validate_rl_sections(load_config(["experiment=default"]), 1)
    assert algo.success_replay_weight == 0 and not trainer.task_pools.enabled
    assert trainer.task_sampling.solved_floor == 0
