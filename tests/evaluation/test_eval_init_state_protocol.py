"""`eval.protocol`: its validation, the init-state check of `protocol=libero`, and the per-suite pooling."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from contract.config_reader import FieldError
from vla_rl.stages.evaluation.config import EvalConfig
from vla_rl.stages.evaluation.metrics import wilson_interval
from vla_rl.stages.evaluation.report import suite_summaries
from vla_rl.stages.evaluation.runner import EvalOutcome, TaskOutcome, check_init_state_protocol


def test_protocol_is_validated():
    assert EvalConfig().protocol == "seeded" and EvalConfig(protocol="libero").protocol == "libero"
    with pytest.raises(FieldError, match="protocol"):
        EvalConfig(protocol="official")


def test_libero_protocol_needs_enough_numbered_init_states():
    plain = SimpleNamespace(name="tabletop", task="reach", extra={})
    with pytest.raises(ValueError, match="num_init_states.*eval.protocol=seeded"):
        check_init_state_protocol(plain, 10)
    libero = SimpleNamespace(name="libero", task="libero_goal/0", extra={"num_init_states": 50})
    check_init_state_protocol(libero, 50)
    with pytest.raises(ValueError, match="episodes_per_task <= 50"):
        check_init_state_protocol(libero, 51)


def _episodes(successes: int, count: int) -> list[dict]:
    return [{"success": i < successes, "return": float(i < successes), "length": 10 + i} for i in range(count)]


def test_suites_pool_their_tasks_episodes():
    outcome = EvalOutcome(
        tasks={
            "libero_spatial/0": TaskOutcome("libero_spatial/0", _episodes(9, 10), 1.0),
            "libero_spatial/1": TaskOutcome("libero_spatial/1", _episodes(6, 10), 2.0),
            "libero_goal/0": TaskOutcome("libero_goal/0", _episodes(1, 4), 0.5),
        },
        wall_time_s=3.5, control_hz=20.0, cameras=("agentview",),
    )  # fmt: skip
    suites = suite_summaries(outcome)
    assert set(suites) == {"libero_spatial", "libero_goal"}
    spatial = suites["libero_spatial"]
    assert (spatial["successes"], spatial["episodes"], spatial["tasks"]) == (15, 20, ["libero_spatial/0", "libero_spatial/1"])
    assert spatial["success_ci95"] == list(wilson_interval(15, 20)) and spatial["wall_time_s"] == 3.0
    plain = EvalOutcome({"reach": TaskOutcome("reach", _episodes(1, 2), 1.0)}, 1.0, 10.0, ("front",))
    assert suite_summaries(plain) == {}
