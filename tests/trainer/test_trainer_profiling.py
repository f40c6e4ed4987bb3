"""Profiling a chosen iteration writes a Chrome trace per worker group and the per-phase timing table."""

from __future__ import annotations

import json

import pytest
from shared_ray import start_shared_ray
from tiny_training import TINY_TRAINING as TINY

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from vla_rl.config.loading import load_config
from vla_rl.stages.rl.experiment import plan_rl_run, rl_trainer
from vla_rl.stages.run_plan import read_run_plan

PHASES = ["advantages", "rollout", "sync_weights", "update"]  # the fit loop's phases without eval/checkpoint


def trace_event_names(path) -> list[str]:
    document = json.loads(path.read_text())
    return [event.get("name", "") for event in document["traceEvents"]]


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory):
    """One tiny run of 2 iterations that profiles the first: its config and its folder (both tests read it)."""
    start_shared_ray()
    run_dir = tmp_path_factory.mktemp("profiled")
    cfg = load_config([*TINY, "trainer.iterations=2", "trainer.profile_iterations=[0]", "trainer.checkpoint_every=0"])
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), run_dir) as trainer:
        trainer.fit()
    return cfg, run_dir


def test_profiled_iteration_writes_traces_of_every_worker_group_and_a_timing_table(profiled_run):
    cfg, tmp_path = profiled_run
    folder = tmp_path / "profile" / "iter_000000"
    assert sorted(p.name for p in folder.iterdir()) == [
        "actor_rank0.json", "env_worker0.json", "rollout_profile.json", "rollout_profile.md", "rollout_worker.json",
    ]  # fmt: skip
    assert not (tmp_path / "profile" / "iter_000001").exists()  # only the chosen iteration

    # The env worker's trace holds one step_chunk span per chunk step: rollout_steps x num_stages calls.
    env_names = trace_event_names(folder / "env_worker0.json")
    assert env_names.count("env_worker/step_chunk") == cfg.trainer.rollout_steps * cfg.trainer.num_stages
    # The rollout worker ran inference, the actor rank ran forward and backward passes.
    assert any(name.startswith("aten::conv") for name in trace_event_names(folder / "rollout_worker.json"))
    actor_names = trace_event_names(folder / "actor_rank0.json")
    assert any("backward" in name.lower() for name in actor_names)
    assert any(name.startswith("aten::conv") for name in actor_names)

    # The timing table has the fit loop's phases as columns and the profiled iteration's seconds, the
    # same figures the trackers logged for that iteration.
    lines = (tmp_path / "profile" / "timings.md").read_text().splitlines()
    assert lines[0] == "| iteration | " + " | ".join(PHASES) + " |"
    assert lines[1] == "|---" * (len(PHASES) + 1) + "|"
    assert len(lines) == 3
    cells = [cell.strip() for cell in lines[2].strip("|").split("|")]
    logged = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert logged["step"] == 1 and cells[0] == "0"
    for phase, cell in zip(PHASES, cells[1:], strict=True):
        assert float(cell) == round(logged[f"timing/{phase}_s"], 3)
        assert float(cell) >= 0.0
    assert float(cells[1 + PHASES.index("rollout")]) > 0.0


def test_the_rollout_profile_counts_every_env_step_render_and_denoising_step(profiled_run):
    cfg, tmp_path = profiled_run
    profile = json.loads((tmp_path / "profile" / "iter_000000" / "rollout_profile.json").read_text())
    steps, stages, envs = cfg.trainer.rollout_steps, cfg.trainer.num_stages, cfg.trainer.envs_per_stage
    worker = profile["env_workers"]["env_worker0"]
    for stage in range(stages):
        assert worker[f"stage{stage}/step_call"]["calls"] == steps
        assert worker[f"stage{stage}/env_step"]["calls"] == steps * envs  # one chunk per env and step
        # the tabletop suite renders once per chunk, at its end (reach episodes outlast this window)
        assert worker[f"stage{stage}/render_at_chunk_end"]["calls"] == steps * envs
        assert worker[f"stage{stage}/env_step"]["seconds"] <= worker[f"stage{stage}/step_call"]["seconds"]
        assert profile["driver"][f"stage{stage}/wait_for_actions"]["calls"] == steps
    inference = profile["rollout_worker"]
    assert inference["act_call"]["calls"] == steps * stages
    # the flow head's velocity network runs once per denoising step of every act (and again for its log-prob)
    denoising = [name for name in inference if name.startswith("forward/head.")]
    assert denoising and max(inference[n]["calls"] for n in denoising) % (steps * stages) == 0
    table = (tmp_path / "profile" / "iter_000000" / "rollout_profile.md").read_text()
    assert "| env_worker0 | stage0/env_step |" in table and "| rollout_worker | act_call |" in table
