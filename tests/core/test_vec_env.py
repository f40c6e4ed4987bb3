"""The vectorised-env contract (contract.vec_env.VecEnv): both implementations, step_async/step_wait = step."""

from __future__ import annotations

import numpy as np
import point_env
import pytest

from contract.vec_env import VecEnv
from vla_rl.stages.evaluation.env_backends import WorkerGroupEvalEnvs
from vla_rl.workers.chunked_envs import ChunkedEnvs


def point_envs() -> ChunkedEnvs:
    return ChunkedEnvs(lambda index: point_env.make(("reach_red", "reach_blue")[index % 2], max_episode_steps=5), 3,
                       base_seed=7)  # fmt: skip


def test_the_abstract_base_refuses_an_incomplete_vec_env():
    class OnlyStep(VecEnv):
        def step(self, action_chunks):
            return None

    with pytest.raises(TypeError, match="abstract"):
        OnlyStep()


def test_in_process_envs_step_the_same_in_one_call_or_in_two():
    chunks = np.random.default_rng(0).uniform(-1, 1, (3, 2, 2)).astype(np.float32)
    one, two = point_envs(), point_envs()
    try:
        assert isinstance(one, VecEnv)
        np.testing.assert_array_equal(one.reset(seeds=[1, 2, 3])["state"], two.reset(seeds=[1, 2, 3])["state"])
        direct = one.step(chunks)
        two.step_async(chunks)
        split = two.step_wait()
        np.testing.assert_array_equal(direct.observation["state"], split.observation["state"])
        np.testing.assert_array_equal(direct.reward, split.reward)
        assert one.get_attr("tasks") == ["reach_red", "reach_blue", "reach_red"]
        with pytest.raises(RuntimeError, match=r"step_wait\(\) without step_async\(\)"):
            two.step_wait()
        with pytest.raises(AttributeError, match="allowed: init_states, tasks"):
            two.get_attr("returns")
    finally:
        one.close()
        two.close()


class RecordingGroup:
    """The calls an env worker group gets from its evaluation view (one stage of it)."""

    stage_size = 3

    def __init__(self):
        self.calls = []

    def step_async(self, stage, chunks):
        self.calls.append(("step_async", stage, chunks.shape))
        return ("pending", stage)

    def step_wait(self, pending):
        self.calls.append(("step_wait", pending))
        return "result"

    def get_attr(self, stage, name):
        self.calls.append(("get_attr", stage, name))
        return [name] * self.stage_size


def test_a_worker_group_stage_is_a_vec_env_that_forwards_to_its_stage():
    group = RecordingGroup()
    envs = WorkerGroupEvalEnvs(group, env_stage=1, owns_group=False)
    assert isinstance(envs, VecEnv) and envs.num_envs == 3
    assert envs.step(np.zeros((3, 2, 2))) == "result"
    assert envs.get_attr("tasks") == ["tasks"] * 3
    assert group.calls == [("step_async", 1, (3, 2, 2)), ("step_wait", ("pending", 1)), ("get_attr", 1, "tasks")]
    with pytest.raises(RuntimeError, match=r"step_wait\(\) without step_async\(\)"):
        envs.step_wait()
