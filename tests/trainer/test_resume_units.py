"""Resume without Ray: which stages a resumed `vla-rl train` skips, and the error when no checkpoint loads."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from vla_rl.config.loading import load_config
from vla_rl.runtime import checkpoint
from vla_rl.stages import pipeline
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig
from vla_rl.stages.rl.trainer import Trainer, TrainerState
from vla_rl.stages.run_plan import read_run_plan


def test_a_resumed_pipeline_skips_completed_collect_and_sft_and_reruns_rl_and_eval(tmp_path, monkeypatch):
    calls: list[str] = []

    def stage(name):
        def run(cfg, run_dir, state):
            calls.append(name)
            state[f"{name}_output"] = f"{name} of attempt {len(calls)}"
            if name == "sft" and "crash" in state:
                raise RuntimeError("killed during SFT")

        return run

    monkeypatch.setattr(pipeline, "STAGES", {name: stage(name) for name in pipeline.STAGES})
    run_dir = tmp_path / "run"
    overrides = ["experiment=flow_sde_ppo", f"run_dir={run_dir}"]
    pipeline.run_experiment(read_run_plan(load_config(overrides)))
    assert calls == ["collect", "sft", "rl", "eval"]
    calls.clear()
    state = pipeline.run_experiment(read_run_plan(load_config([*overrides, "trainer.resume=true"])))
    assert calls == ["rl", "eval"]
    assert state["sft_output"] == "sft of attempt 2"  # restored from the first run, not recomputed
    assert pipeline.read_progress(run_dir)["completed"] == ["collect", "sft", "rl", "eval"]


class FailingActors:
    """Actors whose checkpoint load fails like a DCP load of a foreign or cut checkpoint."""

    def __init__(self, loadable: set[str]):
        self.loadable, self.attempts = loadable, []

    def load(self, folder: str) -> None:
        self.attempts.append(Path(folder).name)
        if Path(folder).name not in self.loadable:
            raise RuntimeError(
                "Traceback ...\nRuntimeError: Missing key in checkpoint state_dict: optim.state.head.w"
            )


def fake_run(tmp_path: Path, iterations: list[int], loadable: set[str]) -> Trainer:
    root = tmp_path / "rl" / "checkpoints"
    for iteration in iterations:
        folder = root / checkpoint.checkpoint_name(iteration)
        folder.mkdir(parents=True)
        torch.save(
            vars(TrainerState(iteration=iteration, env_steps=10 * iteration)), folder / "trainer_state.pt"
        )
    (root / checkpoint.LATEST).write_text(checkpoint.checkpoint_name(iterations[-1]))
    tracker = SimpleNamespace(rewound=[], rewind=lambda step: tracker.rewound.append(step))
    return Trainer(TrainerConfig(resume=True), AlgoConfig(), collector=None, actors=FailingActors(loadable),
                   rollout_worker=None, tracker=tracker, run_dir=tmp_path / "rl", seed=0)  # fmt: skip


def test_resume_falls_back_to_the_previous_checkpoint_and_sets_the_corrupt_one_aside(tmp_path, caplog):
    trainer = fake_run(tmp_path, [1, 2], loadable={"iter_000001"})
    with caplog.at_level(logging.WARNING):
        trainer.resume()
    assert trainer.actors.attempts == ["iter_000002", "iter_000001"]
    assert trainer.state.iteration == 1 and trainer.state.env_steps == 10
    assert trainer.tracker.rewound == [1]
    root = tmp_path / "rl" / "checkpoints"
    assert (root / "iter_000002.corrupt" / "trainer_state.pt").is_file()  # set aside, not deleted
    assert (root / checkpoint.LATEST).read_text() == "iter_000001"
    assert "iter_000002" in caplog.text and "falling back to iter_000001" in caplog.text
    assert checkpoint.complete_checkpoints(root) == [root / "iter_000001"]


def test_resume_when_no_checkpoint_loads_names_the_folder_the_key_and_what_to_do(tmp_path):
    trainer = fake_run(tmp_path, [1, 2], loadable=set())
    with pytest.raises(checkpoint.CheckpointLoadError) as error:
        trainer.resume()
    message = str(error.value)
    assert "iter_000001" in message and "optim.state.head.w" in message and "trainer.init_policy" in message
