"""``trainer.dump_rollouts_every``: a tiny training run dumps each iteration's finished episodes, and the dump
agrees with what the run logged and with the env's action bounds."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from shared_ray import start_shared_ray

from vla_rl.cli import main
from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config
from vla_rl.logging.rollout_dump import read_rollout_dump
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.config import validate_rl_sections

TINY = [
    "experiment=rl_only",
    "policy=gaussian",
    "env.tasks=[reach]",
    "env.kwargs.image_size=32",
    "trainer.envs_per_stage=2",
    "trainer.num_stages=2",
    "trainer.rollout_steps=10",  # reach episodes end after at most 30 steps: 8 chunks of 4
    "trainer.trackers=[jsonl]",
    "trainer.checkpoint_every=0",
    "trainer.iterations=2",
    "trainer.time_limit_minutes=null",
    "algo.update.epochs=1",
    "algo.update.num_minibatches=2",
    "algo.update.micro_batch_size=4",
    "policy.embedding_dim=32",
    "policy.value.hidden_dims=[16]",
]


# GRPO with dynamic sampling: the batch merges the groups of each collection; every group passes the bounds here
GRPO = ["algo=grpo", "algo.group_size=2", "algo.dynamic_sampling=true", "algo.min_success_rate=0",
        "algo.max_success_rate=1"]  # fmt: skip


#: PPO, dumping every iteration, a checkpoint after each: the dump test reads it, the resume test resumes a copy of it
DUMPING = [*TINY, "trainer.checkpoint_every=1", "trainer.dump_rollouts_every=1"]


@pytest.fixture(scope="module")
def dumping_run(tmp_path_factory):
    """The folder of one uninterrupted ``DUMPING`` run (read, never written, by the tests)."""
    start_shared_ray()
    run_dir = tmp_path_factory.mktemp("dumping") / "run"
    assert main(["train", *DUMPING, f"run_dir={run_dir}"]) == 0
    return run_dir


@pytest.mark.parametrize("algo", ["ppo", "grpo_dynamic_sampling"])
def test_dumped_episodes_agree_with_the_logged_metrics_and_the_env_bounds(ray_session, tmp_path, request, algo):
    if algo == "ppo":
        run_dir = request.getfixturevalue("dumping_run")
    else:
        run_dir = tmp_path / "run"
        assert main(["train", *TINY, *GRPO, "trainer.dump_rollouts_every=1", f"run_dir={run_dir}"]) == 0
    rl_dir = run_dir / "rl"
    rows = [json.loads(line) for line in (rl_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [row for row in rows if "train/episodes" in row]
    assert [row["step"] for row in rows] == [1, 2]
    assert sorted(p.name for p in (rl_dir / "rollouts").iterdir()) == ["iter_000001.npz", "iter_000002.npz"]
    spec = env_io_spec("tabletop", "reach", {"image_size": 32})
    low, high = np.array(spec["action_low"], np.float32), np.array(spec["action_high"], np.float32)
    chunk = 4  # policy.chunk_size of the gaussian policy
    for row in rows:
        episodes = read_rollout_dump(rl_dir / "rollouts" / f"iter_{row['step']:06d}.npz")
        assert len(episodes) == row["train/episodes"] > 0
        from_reset = [e for e in episodes if e["from_reset"]]
        # one episode from each env's reset at the start of the rollout: 2 stages x 2 envs
        assert sorted(e["env"] for e in from_reset) == [0, 1, 2, 3]
        assert np.mean([e["success"] for e in from_reset]) == pytest.approx(row["train/success_rate"])
        assert np.mean([e["length"] for e in from_reset]) == pytest.approx(row["train/episode_length"])
        assert np.mean([e["return"] for e in from_reset]) == pytest.approx(row["train/episode_return"], abs=1e-5)
        for episode in episodes:
            assert episode["iteration"] == row["step"]
            assert episode["return"] == pytest.approx(float(episode["rewards"].sum()))
            chunks, horizon, dims = episode["actions"].shape
            assert (horizon, dims) == (chunk, len(low)) and len(episode["rewards"]) == chunks
            assert (chunks - 1) * chunk < episode["length"] <= min(chunks * chunk, spec["max_episode_steps"])
            assert np.all(episode["actions"] >= low) and np.all(episode["actions"] <= high)
            assert episode["task"] == "reach" and episode["instruction"]


def test_dump_interval_must_not_be_negative():
    with pytest.raises(ConfigError, match=r"'trainer.dump_rollouts_every'=-1: must be >= 0"):
        validate_rl_sections(load_config([*TINY, "trainer.dump_rollouts_every=-1", "run_dir=x"]))


def test_dumping_changes_no_number_and_a_resumed_run_dumps_the_same_episodes(ray_session, tmp_path, dumping_run):
    """Dumping draws from no RNG: a run that dumps logs what one that does not logs, and resumed from its first
    checkpoint (the second does not load) it logs and dumps what the uninterrupted run did."""
    plain = [o for o in DUMPING if not o.startswith("trainer.dump_rollouts_every=")]
    assert main(["train", *plain, f"run_dir={tmp_path / 'plain'}"]) == 0
    dumping, full = DUMPING, dumping_run
    assert not (tmp_path / "plain" / "rl" / "rollouts").exists()
    assert metrics_of(full / "rl") == metrics_of(tmp_path / "plain" / "rl")
    crashed = tmp_path / "crashed"
    shutil.copytree(full, crashed)
    (crashed / "rl" / "checkpoints" / "iter_000002" / "model_optim" / ".metadata").write_bytes(b"cut short")
    (crashed / "rl" / "rollouts" / "iter_000002.npz").unlink()
    assert main(["train", *dumping, f"run_dir={crashed}", "trainer.resume=true"]) == 0
    assert metrics_of(crashed / "rl") == metrics_of(full / "rl")
    resumed = read_rollout_dump(crashed / "rl" / "rollouts" / "iter_000002.npz")
    assert len(resumed) > 0
    for mine, theirs in zip(resumed, read_rollout_dump(full / "rl" / "rollouts" / "iter_000002.npz"), strict=True):
        np.testing.assert_array_equal(mine.pop("actions"), theirs.pop("actions"))
        np.testing.assert_array_equal(mine.pop("rewards"), theirs.pop("rewards"))
        assert mine == theirs


def metrics_of(rl_dir) -> list[dict]:
    rows = [json.loads(line) for line in (rl_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(("time", "timing/", "memory/"))} for row in rows]
