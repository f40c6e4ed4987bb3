"""The run plan: the composed config read once into typed sections, and the stage plans taken from it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from vla_rl.config import ConfigError
from vla_rl.config.loading import load_config
from vla_rl.stages.collect import CollectConfig
from vla_rl.stages.evaluation.config import EvalConfig
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig
from vla_rl.stages.run_plan import read_run_plan

OVERRIDES = ["experiment=default", "seed=3", "collect.seed=7", "run_dir=/tmp/somewhere", "algo.update.clip_low=0.1",
             "policy.chunk_size=6", "trainer.eval_every=5", "eval.episodes_per_task=2"]  # fmt: skip


def test_every_section_is_read_into_its_dataclass_once():
    run = read_run_plan(load_config(OVERRIDES))
    assert isinstance(run.collect, CollectConfig) and run.collect.seed == 7
    assert isinstance(run.algo, AlgoConfig) and run.algo.update.clip_low == 0.1
    assert isinstance(run.trainer, TrainerConfig) and run.trainer.eval_every == 5
    assert isinstance(run.eval, EvalConfig) and run.eval.episodes_per_task == 2
    assert run.policy.config["chunk_size"] == 6 and "factory" not in run.policy.config
    assert run.policy.factory == "policies.vla:build_policy"
    assert run.experiment.name == "flow_residual_pixels_ppo"
    assert run.experiment.stages == ("collect", "sft", "rl", "eval")
    assert (run.seed, run.run_dir, run.seeds) == (3, Path("/tmp/somewhere"), {"seed": 3, "collect.seed": 7})
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.seed = 4


def test_stage_plans_come_from_the_run_plan():
    cfg = load_config(OVERRIDES)
    run = read_run_plan(cfg)
    assert run.collect_plan().collect is run.collect and run.collect_plan().env is run.env
    sft = run.sft_plan()
    assert sft.policy == {"factory": run.policy.factory, **run.policy.config}
    assert (sft.dataset, sft.output, sft.seed) == (cfg.sft.dataset, cfg.sft.output, 3)
    evaluation = run.eval_plan(Path("run.json"))
    assert evaluation.eval is run.eval and evaluation.run_record == Path("run.json")
    assert evaluation.config == OmegaConf.to_container(cfg, resolve=True)


def test_a_missing_section_is_named():
    cfg = load_config(OVERRIDES)
    OmegaConf.set_struct(cfg, False)
    del cfg["eval"]
    run = read_run_plan(cfg)
    assert run.eval is None
    with pytest.raises(ConfigError, match="config lacks the section 'eval'"):
        run.eval_plan()
