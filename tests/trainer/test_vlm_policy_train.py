"""A tiny VLM policy (random Idefics3 / PaliGemma from a local folder, LoRA) trains through the real paths: RL
with weight syncs that carry only what training changes, and `vla-rl train` end to end (collect, SFT, PPO, eval
with videos)."""

from __future__ import annotations

import json

import numpy as np
import ray
import torch
from tiny_training import TINY_TRAINING

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import resolve
from policies.backbones.tiny import write_tiny_vlm
from vla_rl.cli import main
from vla_rl.config import env_kwargs, resolve_tasks
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.experiment import plan_rl_run, policy_spec_from_config, rl_trainer
from vla_rl.stages.run_plan import read_run_plan
from vla_rl.stages.sft.training import torch_threads
from vla_rl.workers.weight_sync import num_bytes

HEAD_OPTIONS = ("+policy.head.options.hidden_dim=", "+policy.head.options.num_blocks=")


def vlm_overrides(source, train="lora"):
    return [*(o for o in TINY_TRAINING if not o.startswith(HEAD_OPTIONS)), "policy=vlm", "policy.head.name=gaussian",
            f"policy.backbone.source={source}", f"policy.backbone.train={train}", "policy.embedding_dim=32",
            "policy.backbone.lora_rank=4"]  # fmt: skip


def test_lora_syncs_adapters_and_head_only_and_the_rollout_worker_acts_as_the_actor(ray_session, tmp_path):
    source = write_tiny_vlm(tmp_path / "vlm", "paligemma")
    cfg = load_config([*vlm_overrides(source), f"run_dir={tmp_path}", "trainer.eval_every=0"])
    entry, _ = resolve(str(cfg.env.id))
    io_spec = env_io_spec(entry.name, resolve_tasks(cfg.env, entry.tasks)[0], env_kwargs(cfg.env))
    spec = policy_spec_from_config(cfg, io_spec, None)
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), tmp_path / "rl") as trainer:
        trainer.sync_weights()  # the first sync: everything
        rollout = trainer.collect_rollout(0)
        batch, _ = trainer.compute_advantages(rollout)
        trainer.actors.update(batch, rollout.instructions, 0)
        trainer.state.weights_version += 1
        trainer.sync_weights()  # the next: only what training changes
        full, changing = trainer.actors.full_weights(), trainer.actors.full_weights(True)
        observation = {"images": {c: np.asarray(rollout.batch["observation", "images", c][0, :2]) for c in
                       io_spec["camera_names"]}, "state": np.asarray(rollout.batch["observation", "state"][0, :2]),
                       "instruction": [rollout.instructions[0]] * 2}  # fmt: skip
        ray.get(trainer.rollout_worker.set_seed.remote(5))
        remote_actions, _ = ray.get(trainer.rollout_worker.act.remote(observation))
    backbone = {key for key in full if ".backbone." in key}
    assert {key for key in changing if ".backbone." in key} == {key for key in backbone if "lora_" in key}
    assert set(full) - backbone <= set(changing)  # head, critic, projection, state MLP
    frozen = {key: value for key, value in full.items() if key in backbone and "lora_" not in key}
    assert num_bytes(changing) == num_bytes(full) - num_bytes(frozen) and num_bytes(frozen) > 0
    local = spec.build("cpu").eval()
    local.load_state_dict(full)
    # The worker's thread count: with another one, matrix products may sum in another order (AVX-512 CPUs).
    with torch_threads(int(cfg.trainer.torch_threads)):
        actions, _ = local.act(observation, generator=torch.Generator().manual_seed(5))
    assert np.array_equal(actions.numpy(), remote_actions)  # the rollout worker holds the actor's weights exactly


def test_a_tiny_vlm_policy_trains_through_vla_rl_train(ray_session, tmp_path, capsys):
    source = write_tiny_vlm(tmp_path / "vlm", "idefics3")
    run_dir = tmp_path / "run"
    code = main([
        "train", "experiment=gaussian_ppo", "policy=vlm", "policy.head.name=gaussian", f"policy.backbone.source={source}",
        "policy.embedding_dim=32",
        "policy.value.hidden_dims=[32]", "env.tasks=[reach]", "env.kwargs.image_size=32", f"run_dir={run_dir}",
        f"collect.output={tmp_path / 'demos'}", "collect.episodes_per_task=2", "sft.max_steps=4", "sft.valid_every=4",
        "sft.show_progress=false", "trainer.iterations=2", "trainer.envs_per_stage=2", "trainer.trackers=[jsonl]",
        "trainer.checkpoint_every=2", "algo.critic_warmup_iterations=1", "algo.update.epochs=1",
        "algo.update.num_minibatches=2", "eval.episodes_per_task=1", "eval.num_envs=2", "eval.trackers=[]",
        "eval.video.grid_envs=0",
    ])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "[gaussian_ppo] policy: policies.backbones.vlm_policy:build_policy, head gaussian" in captured.out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["policies"]) == {"sft", "final"} and summary["rl_iterations"] == 2
    folder = run_dir / "rl" / "checkpoints" / "iter_000002" / "policy"
    assert json.loads((folder / "config.json").read_text())["policy"]["head"]["name"] == "gaussian"  # the printed one
    saved = json.loads((folder / "config.json").read_text())
    assert saved["factory"] == "policies.backbones.vlm_policy:build_policy"
    assert saved["policy"]["backbone"] == {**saved["policy"]["backbone"], "source": str(source), "train": "lora"}
    info = json.loads((run_dir / "eval" / "final" / "eval_info.json").read_text())
    assert (run_dir / "eval" / "final" / info["tasks"]["reach"]["videos"]["episodes"][0]).is_file()
