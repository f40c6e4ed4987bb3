"""Non-finite numbers stop a run with exit status 1 and a message naming their source: an env whose state or reward
turns NaN is named (not the policy, and its worker is not replaced again and again); a run whose losses are NaN
fails instead of finishing with NaN weights; collect refuses such an env before it writes statistics."""

from __future__ import annotations

import pytest

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from vla_rl.cli import main
from vla_rl.stages.rl.trainer import NonFiniteLossError, check_finite_update

RL = ["experiment=rl_only", "env.tasks=[reach_red]", "env.kwargs.image_size=16", "trainer.envs_per_stage=2",
      "trainer.num_stages=1", "trainer.rollout_steps=3", "trainer.iterations=2", "trainer.trackers=[jsonl]",
      "trainer.checkpoint_every=1", "algo.critic_warmup_iterations=0", "algo.update.epochs=1",
      "algo.update.num_minibatches=1", "eval.trackers=[]"]  # fmt: skip


def test_rl_stops_at_a_non_finite_state_naming_the_env(ray_session, tmp_path, capsys):
    code = main(["train", *RL, "policy=gaussian", "policy.embedding_dim=32", "policy.value.hidden_dims=[16]",
                 "env.id=nan_state:make", f"run_dir={tmp_path / 'run'}"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    assert "error: env 'nan_state:make', task 'reach_red' returned a non-finite state [nan, nan] at step 3 of the " \
           "episode from reset(seed=" in err and "the env produced it, not the policy" in err  # fmt: skip
    assert "InvalidActionError" not in err and "replacing it" not in err
    assert not (tmp_path / "run" / "rl" / "checkpoints" / "latest").exists()


def test_nan_losses_fail_the_run(ray_session, tmp_path, capsys):
    configs = tmp_path / "configs" / "policy"
    configs.mkdir(parents=True)
    (configs / "nan_critic.yaml").write_text("factory: dict_policy:make_nan_critic\nchunk_size: 2\nhidden_dim: 16\n")
    code = main(["train", "--config-dir", str(tmp_path / "configs"), *RL, "policy=nan_critic", "env.id=point_env:make",
                 f"run_dir={tmp_path / 'run'}"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    assert "error: RL iteration 1: " in err and "loss/value = nan" in err
    assert not (tmp_path / "run" / "rl" / "checkpoints" / "latest").exists()


def test_a_nan_reward_is_named_where_the_env_worker_receives_it():
    import nan_state
    import numpy as np

    from vla_rl.workers.chunked_envs import ChunkedEnvs, EnvOutputError

    envs = ChunkedEnvs(lambda index: nan_state.make_nan_reward("reach_blue", image_size=16), 2, base_seed=4,
                       env_id="nan_state:make_nan_reward")  # fmt: skip
    envs.reset()
    envs.step(np.zeros((2, 2, 2), np.float32))  # steps 1-2: finite
    with pytest.raises(EnvOutputError, match=r"^env 'nan_state:make_nan_reward', task 'reach_blue' returned the reward "
                                              r"nan at step 3 of the episode from reset\(seed=4\): the env produced it"):
        envs.step(np.zeros((2, 2, 2), np.float32))
    envs.close()


def test_a_nan_action_chunk_is_named_as_the_policys_before_the_env_sees_it():
    import numpy as np
    import point_env

    from vla_rl.workers.chunked_envs import ChunkedEnvs, PolicyOutputError
    from vla_rl.workers.env_group import raise_env_output_error

    envs = ChunkedEnvs(lambda index: point_env.make("reach_red", image_size=16), 2, env_id="point_env:make")
    envs.reset()
    chunks = np.zeros((2, 2, 2), np.float32)
    chunks[1, 1, 0] = np.nan
    with pytest.raises(PolicyOutputError, match=r"^the policy's action chunk for env 'point_env:make', task 'reach_red' "
                                                r"holds NaN or inf: \[\[0.0, 0.0\], \[nan, 0.0\]\]") as error:  # fmt: skip
        envs.step(chunks)
    assert envs.lengths.tolist() == [0, 0]  # no env stepped
    envs.close()

    class RemoteFailure(Exception):  # what ray.get raises: the worker's exception as its `cause`
        cause = error.value

    with pytest.raises(PolicyOutputError, match="holds NaN or inf"):
        raise_env_output_error(RemoteFailure())
    raise_env_output_error(RuntimeError("a crash: the group replaces the worker"))  # not re-raised


def test_check_finite_update_names_each_bad_metric():
    check_finite_update(0, {"loss/policy": 0.5, "loss/value": 1.0, "optim/grad_norm": 2.0, "optim/lr": 1e-4})
    with pytest.raises(NonFiniteLossError, match=r"^RL iteration 4: loss/policy = nan, optim/grad_norm = inf\. "):
        check_finite_update(3, {"loss/policy": float("nan"), "optim/grad_norm": float("inf"), "loss/value": 1.0})


def test_collect_refuses_an_env_whose_state_turns_nan(tmp_path, capsys):
    code = main(["collect", "env.id=nan_state:make", "env.tasks=[reach_red]", "env.kwargs.image_size=16",
                 "collect.episodes_per_task=2", f"collect.output={tmp_path}"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    assert "error: env 'nan_state:make', task 'reach_red' returned a non-finite state [nan, nan] at step 3" in err
    assert not (tmp_path / "stats.json").exists() and not (tmp_path / "demos.hdf5").exists()
