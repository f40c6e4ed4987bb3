from __future__ import annotations

import point_env
import pytest

from envs.checks import CheckResult, ConformanceError, run_checks

NAMES = ["spec", "observation", "gymnasium", "determinism", "success", "reset-options", "json", "bad-action"]


def test_a_conforming_env_passes_every_check():
    results: list[CheckResult] = []
    run_checks(lambda: point_env.make("reach_red"), report=results.append)
    assert [r.name for r in results] == NAMES
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


@pytest.mark.parametrize(
    ("env_class", "failing_check", "message"),
    [
        (point_env.WrongActionBoundsPointEnv, "spec", "action_space bounds differ from env_spec.action_low/high"),
        (point_env.WrongCameraNamesPointEnv, "spec", "image keys ('top',) differ from env_spec.camera_names ('front',)"),
        (point_env.DriftingPointEnv, "determinism", "observations differ at step 2 for seed 123"),
        (point_env.FloatSuccessPointEnv, "success", "info['is_success'] must be a bool"),
        (point_env.SilentSuccessPointEnv, "success", "step info lacks 'is_success'"),
    ],
)
def test_spec_determinism_and_success_checks_catch_their_defect(env_class, failing_check, message):
    """Each env passes every check before ``failing_check`` and fails that one, with its message.

    The drifting env is deterministic for one step, so gymnasium's own checker passes it and only
    our multi-step determinism check can catch it; the success envs report a float or nothing.
    """
    results: list[CheckResult] = []
    with pytest.raises(ConformanceError) as error:
        run_checks(lambda: env_class("reach_red"), report=results.append)
    assert error.value.check == failing_check
    assert str(error.value) == f"[{failing_check}] {message}"
    assert [r.name for r in results] == NAMES[: NAMES.index(failing_check) + 1]
    assert [r.passed for r in results] == [True] * (len(results) - 1) + [False]


def test_actions_in_robot_units_pass_though_gymnasium_advises_normalised_ones():
    """An asymmetric Box beyond [-1, 1] is the protocol's own units; gymnasium's advice is no failure."""
    run_checks(lambda: point_env.RobotUnitsPointEnv("reach_red"))


@pytest.mark.parametrize(
    ("env_class", "failing_check", "message"),
    [
        (point_env.UnboundedActionPointEnv, "spec", "action_space is unbounded (low=[-inf, -inf], high=[inf, inf]): "
                                                    "give finite bounds in the robot's own units"),
        (point_env.NoInstructionPointEnv, "observation", "after reset: the observation lacks key(s) ['instruction']"),
        (point_env.ColonInstructionPointEnv, "observation",
         "after reset: observation['instruction'] 'goal: the red square' has characters outside the allowed set: "
         "':'; allowed: ASCII letters, digits, space and , . ' - ! ? (envs.base.INSTRUCTION_CHARSET)"),
        (point_env.BlankAfterResetPointEnv, "observation", "after step 1: observation['images']['top'] is blank"),
        (point_env.ListRewardPointEnv, "gymnasium", "UserWarning: WARN: The reward returned by `step()` must be a float"),
    ],
)  # fmt: skip
def test_failures_name_the_key_in_the_frameworks_words_in_plain_text(env_class, failing_check, message):
    with pytest.raises(ConformanceError) as error:
        run_checks(lambda: env_class("reach_red"))
    assert error.value.check == failing_check
    assert str(error.value).startswith(f"[{failing_check}] {message}"), str(error.value)
    assert "\x1b" not in str(error.value)  # gymnasium colours its warnings; the kit prints plain text


def _expert_of(factory_name: str):
    from envs.experts import get_expert

    return lambda env: get_expert(f"point_env:{factory_name}", env.unwrapped.task, env)


def test_the_kit_runs_the_scripted_expert_last_and_a_good_one_passes():
    results: list[CheckResult] = []
    run_checks(lambda: point_env.make_with_expert("reach_blue"), report=results.append,
               make_expert=_expert_of("make_with_expert"))  # fmt: skip
    assert [r.name for r in results] == [*NAMES, "expert"] and all(r.passed for r in results)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("make_with_broken_expert", "[expert] point_env.ThreeDimensionalExpert.act returned an action of shape (3,) for "
                                    "the action space of shape (2,) (seed 0, step 0)"),
        ("make_with_useless_expert", "[expert] point_env.StandStillExpert succeeded on 0 of 3 seeded episodes"),
    ],
)  # fmt: skip
def test_an_expert_of_the_wrong_shape_or_without_success_fails_naming_it(factory, message):
    results: list[CheckResult] = []
    with pytest.raises(ConformanceError) as error:
        run_checks(lambda: getattr(point_env, factory)("reach_red"), report=results.append, make_expert=_expert_of(factory))
    assert error.value.check == "expert" and str(error.value).startswith(message), str(error.value)
    assert [r.passed for r in results] == [True] * len(NAMES) + [False]


def test_an_init_state_that_json_cannot_store_fails_naming_the_key():
    """Restoring from the in-memory init state works (reset-options passes); writing it to demos.hdf5 would not."""
    results: list[CheckResult] = []
    with pytest.raises(ConformanceError) as error:
        run_checks(lambda: point_env.ArrayInitStatePointEnv("reach_red"), report=results.append)
    assert str(error.value).startswith("[json] reset info['init_state']['position'] is a numpy.ndarray"), str(error.value)
    assert [r.name for r in results if r.passed] == NAMES[: NAMES.index("json")]


def test_envs_check_runs_the_expert_and_prints_one_fail_line_naming_it(capsys):
    from vla_rl.cli import main

    assert main(["envs", "check", "point_env:make_with_broken_expert/reach_blue"]) == 1
    captured = capsys.readouterr()
    assert "[FAIL] expert: [expert] point_env.ThreeDimensionalExpert.act returned an action of shape (3,)" in captured.out
    assert "Traceback" not in captured.out + captured.err
    assert main(["envs", "check", "point_env:make_with_expert", "--all-tasks"]) == 0
    out = capsys.readouterr().out
    assert out.count("[ok  ] expert") == 2
    assert main(["envs", "check", "point_env:make/reach_blue"]) == 0
    assert "[--  ] expert: none" in capsys.readouterr().out
