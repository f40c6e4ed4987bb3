"""Profiling a chosen iteration writes a Chrome trace per worker group and the per-phase timing table."""

from __future__ import annotations

import json

from tiny_training import TINY_TRAINING as TINY

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from vla_rl.config import load_config
from vla_rl.experiment import rl_run

PHASES = ["advantages", "rollout", "sync_weights", "update"]  # the fit loop's phases without eval/checkpoint


def trace_event_names(path) -> list[str]:
    document = json.loads(path.read_text())
    return [event.get("name", "") for event in document["traceEvents"]]


def test_profiled_iteration_writes_traces_of_every_worker_group_and_a_timing_table(ray_session, tmp_path):
    cfg = load_config([*TINY, "trainer.iterations=2", "trainer.profile_iterations=[0]", "trainer.checkpoint_every=0"])
    with rl_run(cfg, tmp_path) as trainer:
        trainer.fit()
    folder = tmp_path / "profile" / "iter_000000"
    assert sorted(p.name for p in folder.iterdir()) == ["actor_rank0.json", "env_worker0.json", "rollout_worker.json"]
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
