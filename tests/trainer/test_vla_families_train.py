"""Both VLA families train through `vla-rl train experiment=<family>` end to end on a tiny random Idefics3 (a real
Hugging Face folder): collect, SFT, PPO, evaluation with videos; and LoRA syncs only what training changes."""

from __future__ import annotations

import json

import pytest

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from policies.backbones.tiny import write_tiny_vlm
from vla_rl.cli import main

FAMILIES = {
    "token_vla_ppo": ("policies.backbones.token_vla:build_policy", ["policy.tokens.num_bins=16",
                                                                    "policy.backbone.max_length=8"]),
    "expert_vla_ppo": ("policies.backbones.expert_vla:build_policy", ["policy.flow.num_inference_steps=2",
                                                                      "policy.backbone.max_length=8"]),
    "token_vla_grpo": ("policies.backbones.token_vla:build_policy", ["policy.tokens.num_bins=16",
                                                                     "policy.backbone.max_length=8",
                                                                     "algo.group_size=2"]),
}  # fmt: skip


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The tiny VLM folder and the demonstrations folder the families share (the first run collects, the
    others find the collection complete)."""
    folder = tmp_path_factory.mktemp("families")
    return write_tiny_vlm(folder / "vlm", "idefics3"), folder / "demos"


@pytest.mark.parametrize("experiment", sorted(FAMILIES))
def test_each_family_trains_through_vla_rl_train(ray_session, tmp_path, capsys, experiment, shared):
    factory, overrides = FAMILIES[experiment]
    source, demos = shared
    run_dir = tmp_path / "run"
    code = main([
        "train", f"experiment={experiment}", f"policy.backbone.source={source}", "policy.backbone.lora_rank=4",
        "policy.value.hidden_dims=[16]", *overrides, "env.tasks=[reach]", "env.kwargs.image_size=32",
        f"run_dir={run_dir}", f"collect.output={demos}", "collect.episodes_per_task=2",
        "sft.max_steps=2", "sft.valid_every=2", "sft.show_progress=false", "trainer.iterations=1",
        "trainer.envs_per_stage=2", "trainer.rollout_steps=3", "trainer.trackers=[jsonl]", "trainer.checkpoint_every=1",
        "trainer.eval_every=0", "algo.critic_warmup_iterations=0", "algo.update.epochs=1",
        "algo.update.num_minibatches=1", "eval.episodes_per_task=1", "eval.num_envs=2", "eval.trackers=[]",
        "eval.video.grid_envs=0",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["policies"]) == {"sft", "final"} and summary["rl_iterations"] == 1
    folder = run_dir / "rl" / "checkpoints" / "iter_000001" / "policy"
    saved = json.loads((folder / "config.json").read_text())
    assert saved["factory"] == factory and saved["policy"]["backbone"]["source"] == str(source)
    assert json.loads((folder / "stats.json").read_text())["action"]["min"]
    info = json.loads((run_dir / "eval" / "final" / "eval_info.json").read_text())
    assert (run_dir / "eval" / "final" / info["tasks"]["reach"]["videos"]["episodes"][0]).is_file()
