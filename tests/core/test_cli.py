from __future__ import annotations

import json

import pytest

from vla_rl.cli import build_parser, main

SUBCOMMANDS = ("train", "eval", "collect", "sft", "bench", "envs", "plot", "config")


def test_help_lists_every_subcommand_and_each_has_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in text
        with pytest.raises(SystemExit) as sub_exit:
            build_parser().parse_args([name, "--help"])
        assert sub_exit.value.code == 0


def test_envs_list_and_check(capsys):
    assert main(["envs", "list"]) == 0
    listing = capsys.readouterr().out
    assert "tabletop/lift" in listing and "tabletop/open_drawer" in listing
    assert main(["envs", "check", "point_env:make/reach_blue"]) == 0
    assert "all checks passed" in capsys.readouterr().out
    assert main(["envs", "check", "point_env:BlankImagePointEnv"]) == 1
    assert "[observation]" in capsys.readouterr().err
    assert main(["envs", "check", "tabletop/juggle"]) == 2
    assert "available tasks: reach" in capsys.readouterr().err


def test_bench_env_prints_one_json_object_last(capsys):
    assert main(["bench", "env", "--task", "lift", "--steps", "100", "--repeats", "2"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["repeats"] == 2  # --repeats reaches the env's benchmark
    for key in ("steps_per_s_no_camera", "steps_per_s_camera", "physics_steps_per_s", "camera_ratio",
                "steps_per_s_camera_at_chunk_ends", "chunk_ends_ratio"):  # fmt: skip
        assert result[key] > 0
    assert result["camera_ratio"] == pytest.approx(result["steps_per_s_camera"] / result["steps_per_s_no_camera"])
    assert result["chunk_ends_ratio"] == pytest.approx(
        result["steps_per_s_camera_at_chunk_ends"] / result["steps_per_s_camera"]
    )
    rates = ("steps_per_s_no_camera", "steps_per_s_camera", "physics_steps_per_s", "steps_per_s_camera_at_chunk_ends")
    assert set(result["steps_per_cpu_s"]) == set(result["cpu_range"]) == set(rates)  # per CPU-second: per core
    for key in rates:
        low, high = result["cpu_range"][key]
        assert 0 < low <= result["steps_per_cpu_s"][key] <= high


def test_config_errors_exit_2_with_the_key(capsys):
    assert main(["collect", "collect.episodes_per_taks=1"]) == 2
    assert "collect.episodes_per_taks" in capsys.readouterr().err
