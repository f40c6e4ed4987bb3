from __future__ import annotations

import point_env
import pytest

from envs.checks import CheckResult, ConformanceError, run_checks


def test_a_conforming_env_passes_every_check():
    results: list[CheckResult] = []
    run_checks(lambda: point_env.make("reach_red"), report=results.append)
    assert [r.name for r in results] == [
        "spec", "gymnasium", "observation", "determinism", "success", "reset-options", "bad-action",
    ]  # fmt: skip
    assert all(r.passed for r in results)


@pytest.mark.parametrize(
    ("env_class", "failing_check"),
    [
        (point_env.NondeterministicPointEnv, "gymnasium"),
        (point_env.BlankImagePointEnv, "observation"),
        (point_env.NaNAcceptingPointEnv, "bad-action"),
        (point_env.IgnoresInitStatePointEnv, "reset-options"),
    ],
)
def test_each_defect_fails_its_check_and_stops_there(env_class, failing_check):
    results: list[CheckResult] = []
    with pytest.raises(ConformanceError) as error:
        run_checks(lambda: env_class("reach_red"), report=results.append)
    assert error.value.check == failing_check
    assert results[-1].name == failing_check and not results[-1].passed
    assert all(r.passed for r in results[:-1])
