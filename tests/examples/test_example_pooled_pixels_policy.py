"""A policy of one's own, by import path: examples/pooled_pixels_policy passes the policy conformance kit, the kit
catches the usual mistakes, and the policy trains end to end through `vla-rl train` with a named experiment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import policies  # noqa: F401  (before any rendering in this process: see docs/platform.md)
from policies.checks import PolicyConformanceError, run_checks
from policies.hub import load_pretrained
from vla_rl.cli import main

FACTORY = "pooled_pixels_policy.policy:make"
CONFIGS = str(Path(__file__).resolve().parents[2] / "examples" / "pooled_pixels_policy" / "pooled_pixels_policy" / "configs")
SMALL = {"pool_size": 4, "hidden_dims": [32]}


def test_the_conformance_kit_passes_through_the_command(capsys):
    assert main(["policies", "check", "--config-dir", CONFIGS, "pooled_pixels", "policy.hidden_dims=[32]"]) == 0
    out = capsys.readouterr().out
    for check in ("build", "act", "units", "seeded", "evaluate", "gradients", "bc_loss", "save_load"):
        assert f"[ok  ] {check}" in out
    assert "all checks passed" in out
    assert main(["policies", "check", FACTORY]) == 0  # the factory with its default config


def test_the_kit_catches_a_policy_that_forgets_to_unnormalise(monkeypatch):
    from pooled_pixels_policy.policy import PooledPixelsPolicy

    monkeypatch.setattr(PooledPixelsPolicy, "act", _without_unnormalising(PooledPixelsPolicy.act))
    with pytest.raises(PolicyConformanceError, match=r"\[units\].*unnormalise"):
        run_checks(FACTORY, SMALL)


def _without_unnormalising(act):
    def wrapped(self, obs, deterministic=False, generator=None):
        _, extras = act(self, obs, deterministic, generator)
        actions = torch.maximum(torch.minimum(extras["action_normalized"], self.action_high), self.action_low)
        return actions, extras

    return wrapped


def test_the_kit_catches_log_probs_that_evaluate_does_not_recompute(monkeypatch):
    from pooled_pixels_policy.policy import PooledPixelsPolicy

    evaluate = PooledPixelsPolicy.evaluate

    def resampling(self, obs, extras):  # evaluates a fresh sample instead of the stored one
        log_prob, entropy, value = evaluate(self, obs, {**extras, "action_normalized": extras["action_normalized"] + 0.1})
        return log_prob, entropy, value

    monkeypatch.setattr(PooledPixelsPolicy, "evaluate", resampling)
    with pytest.raises(PolicyConformanceError, match=r"\[evaluate\] evaluate's log_prob differs"):
        run_checks(FACTORY, SMALL)


def test_a_bad_key_is_a_config_error_naming_it(capsys):
    code = main(["config", "--config-dir", CONFIGS, "policy=pooled_pixels", "+policy.dropout=0.1"])
    assert code == 2
    assert "dropout" in capsys.readouterr().err


def test_rl_from_a_folder_of_another_factory_is_a_config_error(tmp_path):
    from policies.checks import synthetic_io_spec, synthetic_stats
    from policies.factory import build_from_factory
    from vla_rl.config import ConfigError
    from vla_rl.config.loading import load_config
    from vla_rl.stages.rl.experiment import policy_spec_from_config

    io_spec = synthetic_io_spec()
    folder = build_from_factory(FACTORY, SMALL, io_spec, synthetic_stats(io_spec)).save_pretrained(tmp_path / "p")
    with pytest.raises(ConfigError, match=r"built by 'pooled_pixels_policy.policy:make'.*policy.factory="):
        policy_spec_from_config(load_config(["experiment=gaussian_ppo"]), io_spec, str(folder))
    spec = policy_spec_from_config(_own_config(), io_spec, str(folder))  # the same factory: its config and weights
    assert spec.factory == FACTORY and spec.config == json.loads((folder / "config.json").read_text())["policy"]


def _own_config():
    from vla_rl.config.loading import load_config, searching_config_dirs

    with searching_config_dirs([CONFIGS]):
        return load_config(["experiment=gaussian_ppo", "policy=pooled_pixels"])


def test_it_trains_end_to_end_and_loads_through_its_factory(ray_session, tmp_path, capsys):
    """collect -> SFT -> PPO -> eval with videos on the tabletop's reach task, with gaussian_ppo unchanged but for
    policy=pooled_pixels; every policy folder it writes names the factory and loads back through it."""
    run_dir = tmp_path / "run"
    code = main([
        "train", "--config-dir", CONFIGS, "experiment=gaussian_ppo", "policy=pooled_pixels", "policy.hidden_dims=[32]",
        "env.tasks=[reach]", "env.kwargs.image_size=32", f"run_dir={run_dir}", f"collect.output={tmp_path / 'demos'}",
        "collect.episodes_per_task=2", "sft.max_steps=4", "sft.valid_every=4", "sft.show_progress=false",
        "trainer.iterations=1", "trainer.envs_per_stage=2", "trainer.trackers=[jsonl]", "trainer.checkpoint_every=1",
        "algo.critic_warmup_iterations=0", "algo.update.epochs=1", "algo.update.num_minibatches=2",
        "eval.episodes_per_task=1", "eval.num_envs=2", "eval.trackers=[]", "eval.video.grid_envs=0",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["policies"]) == {"sft", "final"} and summary["rl_iterations"] == 1
    for folder in (run_dir / "sft" / "last", run_dir / "rl" / "checkpoints" / "iter_000001" / "policy"):
        assert json.loads((folder / "config.json").read_text())["factory"] == FACTORY
        assert type(load_pretrained(folder)).__name__ == "PooledPixelsPolicy"
    info = json.loads((run_dir / "eval" / "final" / "eval_info.json").read_text())
    assert (run_dir / "eval" / "final" / info["tasks"]["reach"]["videos"]["episodes"][0]).is_file()
