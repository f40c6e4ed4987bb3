"""`vla-rl train` runs the whole workflow: collect -> SFT -> RL -> eval, on the built-in suite and on
the external example env (registered by import path only)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tiny_training import TINY_TRAINING

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from vla_rl.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "planar_pusher"
# As `pip install -e examples/planar_pusher` would: importable here and in the Ray workers started later.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(EXAMPLE), os.environ.get("PYTHONPATH", "")) if p)
PIPELINE = [
    "experiment.stages=[collect,sft,rl,eval]",
    "collect.episodes_per_task=2",
    "sft.max_steps=5",
    "sft.valid_every=5",
    "sft.show_progress=false",
    "trainer.iterations=1",
    "eval.episodes_per_task=2",
    "eval.num_envs=2",
    "eval.trackers=[]",
    "eval.video.episodes_per_task=1",
    "eval.video.grid_envs=0",
]


def check_run(run_dir: Path) -> None:
    assert (run_dir / "config.yaml").is_file()
    assert (run_dir / "sft" / "last" / "model.safetensors").is_file()
    assert (run_dir / "rl" / "checkpoints" / "iter_000001" / "policy" / "model.safetensors").is_file()
    for name in ("sft", "final"):
        info = json.loads((run_dir / "eval" / name / "eval_info.json").read_text())
        assert info["overall"]["episodes"] == 2
        assert info["tasks"][next(iter(info["tasks"]))]["videos"]["episodes"]
        assert info["run_record"] == "../../run.json" and info["settings"]["split"] == "test"
    # Both policies were scored on the same test episodes, so the summary tests final against SFT.
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["final_vs_sft"]["same_episodes"] and 0 < summary["final_vs_sft"]["fisher_p_rl_improved"] <= 1
    assert json.loads((run_dir / "run.json").read_text())["stage_seconds"].keys() == {"collect", "sft", "rl", "eval"}


@pytest.mark.end_to_end  # `make test` leaves it out; CI runs it after (`pytest -m end_to_end`)
def test_default_workflow_on_the_builtin_suite(ray_session, tmp_path):
    run_dir = tmp_path / "run"
    code = main(["train", *TINY_TRAINING, *PIPELINE, f"run_dir={run_dir}", f"collect.output={tmp_path / 'demos'}"])
    assert code == 0
    check_run(run_dir)
    assert (tmp_path / "demos" / "demos.hdf5").is_file()


def test_external_env_trains_by_import_path(ray_session, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    run_dir = tmp_path / "run"
    overrides = [o for o in TINY_TRAINING if not o.startswith("env.")]
    code = main(["train", "--config-dir", str(EXAMPLE / "planar_pusher" / "configs"), "env=planar_pusher", "env.kwargs.image_size=32", *overrides, *PIPELINE,
                 f"run_dir={run_dir}", f"collect.output={tmp_path / 'demos'}"])  # fmt: skip
    assert code == 0
    check_run(run_dir)
    assert "planar_pusher" not in sys.modules["envs.registry"].registered()
