"""`--compare KEY=V1,V2` of the trainer benchmarks: alternating rounds, figures and same-round ratios."""

from __future__ import annotations

import statistics

import pytest

from vla_rl.benchmarks.compare import CompareError, compare_settings, parse_compare
from vla_rl.cli import main


def test_parse_compare_splits_key_and_values_and_rejects_what_it_cannot_run():
    assert parse_compare("trainer.num_env_workers=1, 2,4") == ("trainer.num_env_workers", ["1", "2", "4"])
    for text in ("trainer.num_env_workers", "trainer.num_env_workers=2", "=1,2", "trainer.torch_threads=1,1"):
        with pytest.raises(CompareError, match="--compare"):
            parse_compare(text)


def test_values_alternate_within_rounds_and_ratios_pair_figures_of_the_same_round():
    # A machine that slows down round by round: each value's figure is its speed times the round's load factor.
    speed, load = {"1": 100.0, "2": 150.0}, [1.0, 0.5, 0.8]
    calls: list[str] = []

    def run(value: str) -> dict:
        round_index = len(calls) // 2
        calls.append(value)
        return {"samples_per_s": speed[value] * load[round_index], "extra": value}

    result = compare_settings(run, "trainer.torch_threads", ["1", "2"], rounds=3, figure="samples_per_s")
    assert result["order"] == calls == ["1", "2", "1", "2", "1", "2"]
    first, second = result["values"]["1"], result["values"]["2"]
    assert first["samples_per_s"] == {"median": 80.0, "min": 50.0, "max": 100.0}
    assert second["samples_per_s"]["median"] == pytest.approx(statistics.median([150, 75, 120]))
    # same-round ratios cancel the load: exactly 1.5 every round, although the figures vary 2x
    assert second["ratio_to_first"] == {"median": 1.5, "min": 1.5, "max": 1.5}
    assert "ratio_to_first" not in first
    assert [r["extra"] for r in second["results"]] == ["2", "2", "2"]


def test_a_benchmark_without_the_figure_is_an_error_naming_it():
    with pytest.raises(CompareError, match="'samples_per_s'"):
        compare_settings(lambda value: {"other": 1.0}, "k", ["1", "2"], rounds=1, figure="samples_per_s")


def test_the_command_rejects_compare_for_other_targets_and_a_key_also_overridden(capsys):
    assert main(["bench", "env", "--compare", "trainer.torch_threads=1,2"]) == 2
    assert "--compare is for rollout and update" in capsys.readouterr().err
    assert main(["bench", "update", "trainer.torch_threads=2", "--compare", "trainer.torch_threads=1,2"]) == 2
    assert "trainer.torch_threads is also among the overrides" in capsys.readouterr().err
