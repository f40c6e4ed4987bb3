"""`--compare KEY=V1,V2` and `--variants` of the trainer benchmarks: alternating rounds, figures and same-round ratios."""

from __future__ import annotations

import statistics

import pytest

from vla_rl.benchmarks.compare import (
    CompareError,
    check_variants,
    compare_variants,
    parse_compare,
    variant_keys,
)
from vla_rl.cli import main


def test_compare_expands_into_one_variant_per_value_and_rejects_what_it_cannot_run():
    assert parse_compare("trainer.num_env_workers=1, 2,4") == [
        "trainer.num_env_workers=1", "trainer.num_env_workers=2", "trainer.num_env_workers=4",
    ]  # fmt: skip
    for text in ("trainer.num_env_workers", "trainer.num_env_workers=2", "=1,2", "a b=1,2"):
        with pytest.raises(CompareError, match="--compare"):
            parse_compare(text)
    with pytest.raises(CompareError, match="repeated"):
        parse_compare("trainer.torch_threads=1,1")


def test_variants_are_normalised_sets_of_overrides_whose_keys_are_known():
    assert check_variants(["a=1  b=2", " a=2 b=1"]) == ["a=1 b=2", "a=2 b=1"]
    assert variant_keys("+a.b=1 ~c d=[1,2]") == {"a.b", "c", "d"}
    for variants in (["a=1"], ["a=1", " "], ["a=1 b=2", "a=1  b=2"]):
        with pytest.raises(CompareError, match="variant"):
            check_variants(variants)


def test_values_alternate_within_rounds_and_ratios_pair_figures_of_the_same_round():
    # A machine that slows down round by round: each value's figure is its speed times the round's load factor.
    speed, load = {"1": 100.0, "2": 150.0}, [1.0, 0.5, 0.8]
    calls: list[str] = []

    def run(overrides: list[str]) -> dict:
        round_index = len(calls) // 2
        value = overrides[0].partition("=")[2]
        calls.append(value)
        return {"samples_per_s": speed[value] * load[round_index], "extra": overrides}

    result = compare_variants(run, ["t=1", "t=2"], rounds=3, figure="samples_per_s")
    assert calls == ["1", "2", "1", "2", "1", "2"]
    assert result["order"] == ["t=1", "t=2"] * 3
    first, second = result["variants"]["t=1"], result["variants"]["t=2"]
    assert first["samples_per_s"] == {"median": 80.0, "min": 50.0, "max": 100.0}
    assert second["samples_per_s"]["median"] == pytest.approx(statistics.median([150, 75, 120]))
    # same-round ratios cancel the load: exactly 1.5 every round, although the figures vary 2x
    assert second["ratio_to_first"] == {"median": 1.5, "min": 1.5, "max": 1.5}
    assert "ratio_to_first" not in first
    assert [r["extra"] for r in second["results"]] == [["t=2"]] * 3


def test_a_benchmark_without_the_figure_is_an_error_naming_it():
    with pytest.raises(CompareError, match="'samples_per_s'"):
        compare_variants(lambda overrides: {"other": 1.0}, ["k=1", "k=2"], rounds=1, figure="samples_per_s")


def test_the_command_rejects_compare_for_other_targets_and_a_key_also_overridden(capsys):
    assert main(["bench", "env", "--compare", "trainer.torch_threads=1,2"]) == 2
    assert "--compare and --variants are for rollout and update" in capsys.readouterr().err
    assert main(["bench", "update", "trainer.torch_threads=2", "--compare", "trainer.torch_threads=1,2"]) == 2
    assert "['trainer.torch_threads'] set both by the variant" in capsys.readouterr().err
    assert main(["bench", "update", "--compare", "a=1,2", "--variants", "a=1", "a=2"]) == 2
    assert "not both" in capsys.readouterr().err
