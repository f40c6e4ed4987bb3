"""On a real rollout of a chain head reading RL-only pooled pixels (policy=flow_noise_pixels: Flow-Noise
fine-tuning of the flow; policy=diffusion_pixels: DPPO-style fine-tuning of the diffusion head), the actor
recomputes the rollout's log-probs and values from the stored chain and the stored embedding
(tests/trainer/test_rollout_log_probs.py does the same for the other heads)."""

from __future__ import annotations

import pytest
import torch
from tiny_training import TINY_TRAINING as TINY

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import resolve
from vla_rl.config import env_kwargs, resolve_tasks
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.experiment import plan_rl_run, policy_spec_from_config, rl_trainer
from vla_rl.stages.run_plan import read_run_plan
from vla_rl.workers.ppo_update import extras_of, observation_of


@pytest.mark.parametrize("policy", ["flow_noise_pixels", "diffusion_pixels"])
def test_actor_recomputes_the_rollout_log_probs_of_the_fine_tuned_chain_reading_pixels(ray_session, tmp_path, policy):
    cfg = load_config([*TINY, f"policy={policy}", "policy.rl_vision.feature_dim=8", f"run_dir={tmp_path}",
                       "trainer.eval_every=0"])  # fmt: skip
    entry, _ = resolve(str(cfg.env.id))
    io_spec = env_io_spec(entry.name, resolve_tasks(cfg.env, entry.tasks)[0], env_kwargs(cfg.env))
    start = policy_spec_from_config(cfg, io_spec, None).build("cpu")
    with torch.no_grad():  # as after some RL: the pixels reach the denoiser
        start.head.feature_projection.weight.normal_(0.0, 0.1)
    folder = start.save_pretrained(tmp_path / "start")
    spec = policy_spec_from_config(cfg, io_spec, str(folder))
    with rl_trainer(plan_rl_run(read_run_plan(cfg), str(folder)), tmp_path / "rl") as trainer:
        trainer.sync_weights()
        rollout = trainer.collect_rollout(0)
        batch, _ = trainer.compute_advantages(rollout)
        weights = trainer.actors.full_weights()
    model = spec.build("cpu")
    model.load_state_dict(weights)
    model.eval()
    with torch.no_grad():
        log_prob, entropy, values = model.evaluate(
            observation_of(batch, rollout.instructions), extras_of(batch)
        )
    assert batch.shape[0] > 0 and log_prob.shape == batch["old_log_prob"].shape
    assert (entropy is None) == (policy == "diffusion_pixels")  # Flow-Noise's kernels' entropies
    assert (
        "embedding" in batch["extras"].keys() and not model.rl_moves_encoders and model.rl_vision is not None
    )
    torch.testing.assert_close(log_prob, batch["old_log_prob"], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(values.reshape(-1), batch["value"].reshape(-1), atol=1e-5, rtol=1e-5)
