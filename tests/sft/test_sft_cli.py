"""`vla-rl sft` from the command line: a tiny run end to end, and the missing-dataset error."""

from __future__ import annotations

import json

import pytest

from vla_rl.cli import main

TINY = ["policy=flow", "env.tasks=[reach,lift]", "env.kwargs.image_size=32", "policy.embedding_dim=64",
        "policy.vision.backbone_kwargs.channels=[8,16,16,32]", "policy.vision.backbone_kwargs.stem_width=8",
        "sft.batch_size=8", "sft.max_steps=6", "sft.valid_every=3", "sft.warmup_steps=1", "sft.num_threads=1",
        "sft.show_progress=false"]  # fmt: skip


def test_sft_command_trains_and_writes_best_last_and_metrics(tiny_dataset, tmp_path, capsys):
    output = tmp_path / "sft"
    assert main(["sft", *TINY, f"sft.dataset={tiny_dataset}", f"sft.output={output}", "seed=2"]) == 0
    printed = capsys.readouterr().out
    assert f"policy:       {output / 'best'}" in printed and f"last policy:  {output / 'last'}" in printed
    for folder in ("best", "last"):
        saved = json.loads((output / folder / "config.json").read_text())
        assert saved["policy"]["head"]["name"] == "flow" and saved["policy"]["embedding_dim"] == 64
        assert saved["io_spec"]["image_size"] == [32, 32]
    records = [json.loads(line) for line in (output / "sft_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "valid"] == [3, 6]
    assert records[-1]["split"] == "summary" and records[-1]["num_steps"] == 6
    assert not list(tmp_path.glob("sft/.*")), "no temporary folders are left behind"


def test_sft_command_without_demos_says_to_collect(tmp_path, capsys):
    missing = tmp_path / "no_demos"
    assert main(["sft", *TINY, f"sft.dataset={missing}", f"sft.output={tmp_path / 'out'}"]) == 2
    error = capsys.readouterr().err
    assert f"demonstration dataset {missing / 'demos.hdf5'} does not exist" in error
    assert "`vla-rl collect`" in error
    assert not (tmp_path / "out").exists()


def _crash_at_step(monkeypatch, step: int) -> None:
    from vla_rl.stages.sft import training

    augment, calls = training.augment_batch, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            raise RuntimeError("the machine went away")
        return augment(*args, **kwargs)

    monkeypatch.setattr(training, "augment_batch", failing)


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_sft_and_train_resume_a_crashed_sft_from_its_checkpoint(tiny_dataset, tmp_path, monkeypatch, capsys):
    settings = [*TINY, f"sft.dataset={tiny_dataset}", "seed=2", "sft.checkpoint_every=2"]
    assert main(["sft", *settings, f"sft.output={tmp_path / 'whole'}"]) == 0
    expected = _weights(tmp_path / "whole" / "last")
    # `vla-rl sft sft.resume=true`
    with monkeypatch.context() as patch, pytest.raises(RuntimeError, match="went away"):
        _crash_at_step(patch, 5)
        main(["sft", *settings, f"sft.output={tmp_path / 'sft'}"])
    assert main(["sft", *settings, f"sft.output={tmp_path / 'sft'}", "sft.resume=true"]) == 0
    assert "sft: resumed from step 4" in capsys.readouterr().out
    assert all(_weights(tmp_path / "sft" / "last")[k].equal(v) for k, v in expected.items())
    # `vla-rl train trainer.resume=true` of an experiment whose only stage is SFT: its checkpoint is what resumes
    train = ["train", "experiment=flow_sde_ppo", *settings, "experiment.stages=[sft]", f"run_dir={tmp_path / 'run'}"]
    with monkeypatch.context() as patch, pytest.raises(RuntimeError, match="went away"):
        _crash_at_step(patch, 3)
        main(train)
    assert main([*train, "trainer.resume=true"]) == 0
    printed = capsys.readouterr().out
    assert "sft: resumed from step 2" in printed
    assert all(_weights(tmp_path / "run" / "sft" / "last")[k].equal(v) for k, v in expected.items())
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["resumed_from"]["argv"] == train  # the crashed part's record is kept
