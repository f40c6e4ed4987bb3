"""The policy kit on a policy of one's own (tests/support/dict_policy.py): a plain-dict config passes; each usual
mistake fails one check, printed as one [FAIL] line naming the method, not a traceback."""

from __future__ import annotations

import pytest

import policies  # noqa: F401  (before any rendering in this process: see docs/platform.md)
from policies.checks import (
    CheckResult,
    PolicyConformanceError,
    run_checks,
    synthetic_io_spec,
    synthetic_stats,
)
from policies.factory import PolicyProtocolError, build_from_factory, chunk_size_of, save_policy
from vla_rl.cli import main

CHECKS = ["build", "config", "act", "units", "seeded", "evaluate", "gradients", "bc_loss", "save_load"]


def test_a_policy_whose_config_is_a_plain_dict_passes_every_check():
    results: list[CheckResult] = []
    policy = run_checks("dict_policy:make", {"chunk_size": 3}, report=results.append)
    assert [r.name for r in results] == CHECKS and all(r.passed for r in results)
    assert isinstance(policy.config, dict) and chunk_size_of(policy) == 3


@pytest.mark.parametrize(
    ("factory", "check", "message"),
    [
        # the synthetic env's bounds: clipped to the lower bound, far from the statistics' range
        ("make_forgetful", "units", "[units] deterministic actions [2.0, 10.0, 100.0]..[2.0, 10.0, 100.0] lie far from "
                                    "the dataset's action range"),
        ("make_saving_without_return", "save_load", "[save_load] SavesWithoutReturning.save_pretrained(folder) returned "
                                                    "None; it must return the folder it wrote"),
        ("make_numpy_bc_loss", "bc_loss", "[bc_loss] NumpyOnlyBCLoss.bc_loss raised AttributeError: 'Tensor' object "
                                          "has no attribute 'astype' (at "),
    ],
)  # fmt: skip
def test_each_mistake_fails_its_check_naming_the_method(factory, check, message):
    results: list[CheckResult] = []
    with pytest.raises(PolicyConformanceError) as error:
        run_checks(f"dict_policy:{factory}", {}, report=results.append)
    assert error.value.check == check and str(error.value).startswith(message), str(error.value)
    assert [r.name for r in results] == CHECKS[: CHECKS.index(check) + 1]
    assert [r.passed for r in results] == [True] * CHECKS.index(check) + [False]


def test_forgetting_to_unnormalise_fails_with_the_env_of_a_wide_symmetric_box(capsys):
    """Box(-2, 2): the head's normalised output lies inside the bounds and near the statistics' range centred on 0,
    so only moving the statistics tells a policy that unnormalises from one that does not."""
    assert main(["policies", "check", "dict_policy:make_forgetful", "--env", "point_env:make_wide"]) == 1
    out = capsys.readouterr().out
    assert "actions (-2.0, -2.0)..(2.0, 2.0)" in out
    assert "[FAIL] units: [units] with the dataset's action statistics moved by [0.8, 0.8] (env units) the " \
           "deterministic actions moved by [0.0, 0.0]" in out  # fmt: skip
    assert main(["policies", "check", "dict_policy:make", "--env", "point_env:make_wide"]) == 0


def test_an_exception_inside_the_policy_is_one_fail_line(capsys):
    assert main(["policies", "check", "dict_policy:make_numpy_bc_loss"]) == 1
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if "[FAIL]" in line]
    assert len(lines) == 1 and lines[0].startswith("  [FAIL] bc_loss: [bc_loss] NumpyOnlyBCLoss.bc_loss raised")
    assert "Traceback" not in captured.out + captured.err
    assert main(["policies", "check", "dict_policy:make", "+policy.dropout=0.1"]) == 2  # overrides need a config file
    capsys.readouterr()
    assert main(["policies", "check", "dict_policy:make_forgetful"]) == 1
    assert "[FAIL] build" not in capsys.readouterr().out


def test_save_policy_names_a_save_pretrained_that_returns_nothing(tmp_path):
    io_spec = synthetic_io_spec(16)
    policy = build_from_factory("dict_policy:make_saving_without_return", {}, io_spec, synthetic_stats(io_spec))
    with pytest.raises(PolicyProtocolError, match=r"dict_policy.SavesWithoutReturning.save_pretrained\('.*/p'\) "
                                                  r"returned None; it must return the folder it wrote"):  # fmt: skip
        save_policy(policy, tmp_path / "p")
    good = build_from_factory("dict_policy:make", {}, io_spec, synthetic_stats(io_spec))
    assert save_policy(good, tmp_path / "q") == tmp_path / "q" and (tmp_path / "q" / "config.json").is_file()


def test_a_config_without_chunk_size_is_refused_by_the_kit():
    with pytest.raises(PolicyConformanceError) as error:
        run_checks("dict_policy:make_without_chunk_size", {})
    assert str(error.value) == ("[config] the config of HorizonInsteadOfChunkSize must hold chunk_size, a positive "
                                "integer (actions per chunk); got None among keys ['hidden_dim', 'horizon']")
