"""On a real rollout, both VLA families' update recomputes the rollout's log-probs and values bit for bit, though
the rollout computed them in batches of one stage's envs, in the rollout worker's process and threads, and the
update recomputes them in minibatches of another size, in this process with its own threads
(``policy.batch_invariant``, :mod:`policies.backbones.batch_invariant`)."""

from __future__ import annotations

import pytest
import torch

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import resolve
from policies.backbones.tiny import write_tiny_vlm
from vla_rl.config import env_kwargs, resolve_tasks
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.experiment import plan_rl_run, policy_spec_from_config, rl_trainer
from vla_rl.stages.run_plan import read_run_plan
from vla_rl.workers.ppo_update import extras_of, observation_of

# the experiments' own recipes; tests/policies/test_batch_invariant.py covers the other decoding and chain
FAMILIES = {
    "token_vla_ppo": ["policy.tokens.num_bins=16"],
    "expert_vla_ppo": ["policy.flow.num_inference_steps=2"],
}
ROLLOUT_ENVS = 3  # envs per stage: the rollout's batch
MINIBATCH = 2  # the update's recomputation


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    return write_tiny_vlm(tmp_path_factory.mktemp("vlm") / "idefics3", "idefics3")


@pytest.mark.parametrize("experiment", sorted(FAMILIES))
def test_update_recomputes_the_rollout_log_probs_bit_for_bit(ray_session, tmp_path, tiny_vlm, experiment):
    cfg = load_config([
        f"experiment={experiment}", *FAMILIES[experiment], f"policy.backbone.source={tiny_vlm}",
        "policy.backbone.lora_rank=4", "policy.backbone.max_length=8", "policy.value.hidden_dims=[16]",
        "env.tasks=[reach,open_drawer]", "env.kwargs.image_size=32", f"trainer.envs_per_stage={ROLLOUT_ENVS}",
        "trainer.num_stages=1", "trainer.rollout_steps=3", "trainer.trackers=[jsonl]", "trainer.eval_every=0", f"run_dir={tmp_path}",
    ])  # fmt: skip
    entry, _ = resolve(str(cfg.env.id))
    io_spec = env_io_spec(entry.name, resolve_tasks(cfg.env, entry.tasks)[0], env_kwargs(cfg.env))
    spec = policy_spec_from_config(cfg, io_spec, None)
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), tmp_path / "rl") as trainer:
        trainer.sync_weights()
        rollout = trainer.collect_rollout(0)
        batch, _ = trainer.compute_advantages(rollout)
        weights = trainer.actors.full_weights()
    model = spec.build("cpu")
    model.load_state_dict(weights)
    assert model.config.batch_invariant and batch.shape[0] > ROLLOUT_ENVS
    order = torch.randperm(batch.shape[0], generator=torch.Generator().manual_seed(0))  # minibatches mix stages
    with torch.no_grad():
        for part in order.split(MINIBATCH):
            minibatch = batch[part]
            log_prob, _, values = model.evaluate(observation_of(minibatch, rollout.instructions), extras_of(minibatch))
            assert torch.equal(log_prob, minibatch["old_log_prob"])
            assert torch.equal(values.reshape(-1), minibatch["value"].reshape(-1))
