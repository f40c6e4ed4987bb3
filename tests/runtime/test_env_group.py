from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import point_env
import pytest
import ray

from vla_rl.workers.chunked_envs import ChunkedEnvs
from vla_rl.workers.env_group import EnvWorkerGroup
from vla_rl.workers.env_worker import EnvWorkerConfig


def config(**overrides) -> EnvWorkerConfig:
    values = dict(env_id="point_env:make", env_kwargs={"max_episode_steps": 5}, tasks=("reach_red", "reach_blue"),
                  envs_per_stage=2, num_stages=2, base_seed=3)  # fmt: skip
    values.update(overrides)
    return EnvWorkerConfig(**values)


def test_group_matches_the_same_envs_stepped_in_process(ray_session):
    group = EnvWorkerGroup(config(), num_workers=2, num_cpus_per_worker=0.5)
    try:
        observation = group.reset(env_stage=1)
        assert observation["state"].shape == (4, 2)
        # Env j of the whole group gets task j % 2; stage 1 of worker 0 holds global envs 2, 3.
        assert observation["instruction"] == ["move to the red square", "move to the blue square"] * 2
        rng = np.random.default_rng(0)
        chunks = rng.uniform(-0.1, 0.1, (4, 3, 2)).astype(np.float32)
        result = group.step(1, chunks)
        # Reference: worker 1's stage-1 envs (global 6, 7) built in this process the same way.
        reference = ChunkedEnvs(lambda i: point_env.make(("reach_red", "reach_blue")[(6 + i) % 2], max_episode_steps=5),
                                2, base_seed=3 + 6 * 100_003)  # fmt: skip
        reference.reset()
        expected = reference.step(chunks[2:])
        np.testing.assert_array_equal(result.observation["state"][2:], expected.observation["state"])
        np.testing.assert_array_equal(result.reward[2:], expected.reward)
    finally:
        group.close()


def test_env_method_reaches_each_workers_envs_by_stage_index_and_merges_in_env_order(ray_session):
    group = EnvWorkerGroup(config(), num_workers=2, num_cpus_per_worker=0.5)
    try:
        group.reset(env_stage=0)
        # Stage 0 holds worker 0's global envs 0, 1 and worker 1's 4, 5: tasks alternate from env 0 and env 4.
        assert group.get_attr(0, "tasks") == ["reach_red", "reach_blue"] * 2
        group.env_method(0, "deactivate_envs", indices=[1, 2])  # worker 0's second env, worker 1's first
        result = group.step(0, np.zeros((4, 2, 2), np.float32))
        assert result.steps_executed.tolist() == [2, 0, 0, 2]
        assert group.env_method(0, "pop_video_records") == {}
    finally:
        group.close()


@contextlib.contextmanager
def group_whose_second_worker_crashes_at_its_next_step():
    """Two workers x two stages x two envs, reset; worker 1 dies at its next step. Yields (group, chunks)."""
    group = EnvWorkerGroup(config(num_stages=2), num_workers=2, num_cpus_per_worker=0.5)
    try:
        for stage in range(2):
            group.reset(stage)
        ray.get(group.workers[1].inject_crash.remote(after_steps=0))
        yield group, np.zeros((4, 2, 2), np.float32)
    finally:
        group.close()


def test_a_crashed_worker_is_replaced_and_its_episodes_truncated(ray_session):
    with group_whose_second_worker_crashes_at_its_next_step() as (group, chunks):
        result = group.step(0, chunks)
        assert group.restarts == 1
        assert result.truncated.tolist() == [False, False, True, True]
        assert result.steps_executed.tolist() == [2, 2, 0, 0]
        # The other stage of the replaced worker reports truncation once, then runs normally.
        other = group.step(1, chunks)
        assert other.truncated.tolist() == [False, False, True, True]
        again = group.step(1, chunks)
        assert again.steps_executed.tolist() == [2, 2, 2, 2]


def test_a_step_queued_at_a_worker_that_crashes_meanwhile_is_truncated_not_restarted_again(ray_session):
    """A rollout queues the next stage's step before the current one returns: if the current one kills
    the worker, the queued step fails too; that is the same crash, not a second one."""
    with group_whose_second_worker_crashes_at_its_next_step() as (group, chunks):
        first, queued = group.step_async(0, chunks), group.step_async(1, chunks)
        assert group.step_wait(first).truncated.tolist() == [False, False, True, True]
        other = group.step_wait(queued)
        assert group.restarts == 1
        assert other.truncated.tolist() == [False, False, True, True]
        assert other.steps_executed.tolist() == [2, 2, 0, 0]
        assert group.step(1, chunks).steps_executed.tolist() == [2, 2, 2, 2]


def test_an_exception_in_the_env_surfaces_its_traceback(ray_session):
    group = EnvWorkerGroup(config(num_stages=1), num_workers=1, num_cpus_per_worker=0.5)
    try:
        group.reset(0)
        bad = np.zeros((2, 1, 3), np.float32)  # one action dimension too many: the env raises
        result = group.step(0, bad)
        assert group.restarts == 1 and result.truncated.all()
        assert "InvalidActionError" in group.failures[0] and "shape" in group.failures[0]
        assert "in validate_action" in group.failures[0]  # the frame that raised, from the remote traceback
    finally:
        group.close()


def test_a_nan_action_chunk_stops_the_group_naming_the_policy_without_replacing_the_worker(ray_session):
    from vla_rl.workers.chunked_envs import PolicyOutputError

    group = EnvWorkerGroup(config(num_stages=1), num_workers=1, num_cpus_per_worker=0.5)
    try:
        group.reset(0)
        with pytest.raises(PolicyOutputError, match=r"^the policy's action chunk for env .* holds NaN or inf"):
            group.step(0, np.full((2, 1, 2), np.nan, np.float32))
        assert group.restarts == 0
    finally:
        group.close()


def test_a_built_in_suite_env_worker_never_loads_torch_and_profiles_its_phases_as_spans(ray_session, tmp_path):
    """Env workers only simulate: torch would add ~2 s to their start and ~520 MiB each, and torch's
    profiler crashes a process that has rendered through EGL (docs/platform.md)."""
    group = EnvWorkerGroup(config(env_id="tabletop", env_kwargs={"image_size": 32}, tasks=("reach",), num_stages=1),
                           num_workers=1, num_cpus_per_worker=0.5)  # fmt: skip
    try:
        group.reset(0)
        chunks = np.zeros((2, 4, 4), np.float32)  # 4 actions per chunk: the images render at its end
        group.step(0, chunks)
        worker = group.workers[0]
        ray.get(worker.start_profile.remote(str(tmp_path / "profile" / "env_worker0.json")))
        group.step(0, chunks)
        group.step(0, chunks)
        trace = json.loads(Path(ray.get(worker.stop_profile.remote())).read_text())
        names = [event["name"] for event in trace["traceEvents"]]
        assert names.count("env_worker/step_chunk") == 2
        assert names.count("phase/render_at_chunk_end") >= 2
        assert all(event["dur"] >= 0 for event in trace["traceEvents"])
        assert ray.get(worker.stop_profile.remote()) is None  # nothing recorded since

        def torch_loaded(_) -> bool:
            import sys

            return "torch" in sys.modules

        assert ray.get(worker.__ray_call__.remote(torch_loaded)) is False
    finally:
        group.close()
