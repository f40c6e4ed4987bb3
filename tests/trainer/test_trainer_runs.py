"""`vla-rl train` end to end at tiny size: worker groups, checkpoints, resume, faults."""

from __future__ import annotations

import json
import os
from pathlib import Path

import ray
import torch
from tiny_training import TINY_TRAINING as TINY
from tiny_training import for_refiner

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from policies.hub import load_pretrained
from vla_rl.cli import main
from vla_rl.config.loading import load_config
from vla_rl.stages.rl.experiment import plan_rl_run, rl_trainer
from vla_rl.stages.run_plan import read_run_plan

VOLATILE = ("time", "timing/", "memory/")  # wall clock and resident memory vary run to run


def metrics_of(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(VOLATILE)} for row in rows if "train/env_steps" in row]


def test_train_command_two_env_workers_two_ranks_then_resume_at_one_rank_after_a_crash(ray_session, tmp_path):
    run_dir = tmp_path / "run"
    code = main(["train", *TINY, f"run_dir={run_dir}", "trainer.iterations=2", "trainer.num_env_workers=2",
                 "trainer.actor_world_size=2", "trainer.eval_every=2", "trainer.eval_episodes_per_task=2",
                 "eval.num_envs=2", "eval.video.episodes_per_task=1", "eval.video.grid_envs=0"])  # fmt: skip
    assert code == 0
    rl_dir = run_dir / "rl"
    rows = metrics_of(rl_dir)
    assert [row["step"] for row in rows] == [1, 2]
    # 2 workers x 2 stages x 2 envs, 3 chunks of 4 actions each, unless an episode ended inside a chunk
    assert 0 < rows[0]["train/env_steps"] <= 2 * 2 * 2 * 3 * 4
    assert all(torch.isfinite(torch.tensor(row["train/loss/policy"])) for row in rows)
    # a 12-step window against 30-step reach episodes: (nearly) every env row shows no episode end
    assert 0 < rows[0]["train/rows_without_episode_end"] <= 2 * 2 * 2
    checkpoints = sorted(p.name for p in (rl_dir / "checkpoints").glob("iter_*"))
    assert checkpoints == ["iter_000001", "iter_000002"]
    eval_info = json.loads((rl_dir / "eval" / "iter_000002" / "eval_info.json").read_text())
    assert eval_info["overall"]["episodes"] == 2
    exported = load_pretrained(rl_dir / "checkpoints" / "iter_000002" / "policy")

    # Resume at world size 1 (saved at 2) with one env worker that crashes during the rollout.
    cfg = load_config([*TINY, f"run_dir={run_dir}", "trainer.iterations=3", "trainer.resume=true"])
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), rl_dir) as trainer:
        trainer.resume()
        loaded = trainer.actors.full_weights()
        for key, value in exported.state_dict().items():
            torch.testing.assert_close(loaded[key], value, rtol=0, atol=0)
        ray.get(trainer.collector.env_group.workers[0].inject_crash.remote(after_steps=2))
        state = trainer.fit()
    assert state.iteration == 3 and state.env_restarts == 1
    last = metrics_of(rl_dir)[-1]
    assert last["step"] == 3 and last["train/env_restarts"] == 1.0


def test_run_stopped_by_its_time_limit_resumes_to_equal_an_uninterrupted_run(ray_session, tmp_path, capsys):
    uninterrupted, interrupted = tmp_path / "full", tmp_path / "split"
    assert main(["train", *TINY, f"run_dir={uninterrupted}", "trainer.iterations=2", "experiment.stages=[rl]"]) == 0
    # any iteration takes longer than 6 ms: the run stops after its first, with a checkpoint to resume from
    stopped = [*TINY, f"run_dir={interrupted}", "trainer.iterations=2", "trainer.time_limit_minutes=0.0001"]
    assert main(["train", *stopped]) == 0
    assert "[rl] 1 iterations (of 2: time limit)" in capsys.readouterr().out
    summary = json.loads((interrupted / "summary.json").read_text())
    assert summary["rl_iterations"] == 1
    # the numerics the figures came from: the CPU kernels torch used (AVX2 where they are pinned)
    assert summary["numerics"]["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert summary["numerics"]["mode"] == os.environ.get("VLA_RL_NUMERICS", "portable")
    assert (interrupted / "rl" / "checkpoints" / "latest").read_text().strip() == "iter_000001"
    assert main(["train", *TINY, f"run_dir={interrupted}", "trainer.iterations=2", "trainer.resume=true"]) == 0
    full, split = metrics_of(uninterrupted / "rl"), metrics_of(interrupted / "rl")
    assert [r["step"] for r in split] == [1, 2]
    assert split[1] == full[1]
    assert split[1]["train/loss/policy"] != split[0]["train/loss/policy"]
    # an env-step budget that is already spent: the resumed run stops before its next iteration
    budget = [*TINY, f"run_dir={interrupted}", "trainer.iterations=3", "trainer.resume=true", "trainer.max_env_steps=1"]
    assert main(["train", *budget]) == 0
    assert "[rl] 2 iterations (of 3: env-step budget)" in capsys.readouterr().out
    assert json.loads((interrupted / "summary.json").read_text())["rl_iterations"] == 2
    assert [r["step"] for r in metrics_of(interrupted / "rl")] == [1, 2]


def test_rl_trains_the_rl_only_keypoints_and_never_the_encoders_at_two_ranks(ray_session, tmp_path):
    run_dir = tmp_path / "run"
    overrides = [*for_refiner(TINY), "policy=flow_residual", "policy.value.detach_input=true", "policy.rl_vision.enabled=true",
                 "policy.rl_vision.channels=[4,8]", "policy.rl_vision.num_keypoints=2", "trainer.actor_world_size=2",
                 f"run_dir={run_dir}", "trainer.iterations=1", "experiment.stages=[rl]"]  # fmt: skip
    cfg = load_config(overrides)
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), run_dir / "rl") as trainer:
        initial = {k: v.clone() for k, v in trainer.actors.full_weights().items()}
        trainer.fit()
        trained = trainer.actors.full_weights()
    moved = {key.split(".")[0] for key in initial if not torch.equal(initial[key], trained[key])}
    # the critic reads the keypoints, so its first update moves them; the encoders and the flow stay as they were
    assert {"value_head", "rl_vision"} <= moved and "encoder" not in moved
    assert all(torch.equal(initial[key], trained[key]) for key in initial if key.startswith("head.base.denoiser."))
