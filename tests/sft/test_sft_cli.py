"""`vla-rl sft` from the command line: a tiny run end to end, and the missing-dataset error."""

from __future__ import annotations

import json

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
