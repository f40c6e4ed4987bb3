"""On a real rollout, the actor's log-probs and values at the rollout's weights equal the rollout's own.

PPO divides by the rollout's log-probs (no recompute pass: docs/architecture.md, bypass mode): if the update rebuilt a
different observation (images, state, instruction) or replayed a different sampling path, the first
ratio would not be 1 and the clipping would act on noise.
"""

from __future__ import annotations

import pytest
import torch
from tiny_training import TINY_TRAINING as TINY
from tiny_training import for_refiner

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import resolve
from vla_rl.config import env_kwargs, resolve_tasks
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.experiment import plan_rl_run, policy_spec_from_config, rl_trainer
from vla_rl.stages.run_plan import read_run_plan
from vla_rl.workers.ppo_update import extras_of, observation_of

CACHED_EMBEDDING = ["policy.value.detach_input=true"]  # with a frozen-flow head, nothing in RL moves the encoders
# ... and a keypoint CNN that only RL trains, recomputed by the update (the critic reads it)
RL_VISION = [*CACHED_EMBEDDING, "policy.rl_vision.enabled=true", "policy.rl_vision.channels=[4,8]",
             "policy.rl_vision.num_keypoints=2"]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "extra"),
    [("gaussian", []), ("flow", []), ("flow_noise", []), ("flow_steered", []), ("flow_residual", []),
     ("flow_residual", CACHED_EMBEDDING), ("flow_residual", RL_VISION)],
)  # fmt: skip
def test_actor_recomputes_the_rollout_log_probs(ray_session, tmp_path, policy, extra):
    # the tiny denoiser options of TINY do not apply to the gaussian head
    overrides = [o for o in TINY if not (policy == "gaussian" and o.startswith("+policy.head.options."))]
    overrides = for_refiner(overrides) if policy in ("flow_steered", "flow_residual") else overrides
    cfg = load_config([*overrides, f"policy={policy}", *extra, f"run_dir={tmp_path}", "trainer.eval_every=0"])
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
    model.eval()
    with torch.no_grad():
        log_prob, _, values = model.evaluate(observation_of(batch, rollout.instructions), extras_of(batch))
    assert batch.shape[0] > 0 and log_prob.shape == batch["old_log_prob"].shape
    # the update reuses the rollout's embedding exactly when RL cannot move the encoders
    assert ("embedding" in batch["extras"].keys()) is (extra in (CACHED_EMBEDDING, RL_VISION))
    assert (model.rl_vision is not None) is (extra == RL_VISION)
    torch.testing.assert_close(log_prob, batch["old_log_prob"], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(values.reshape(-1), batch["value"].reshape(-1), atol=1e-5, rtol=1e-5)
