"""A 2-rank FSDP2 (gloo) update equals a 1-rank update on the same batch."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict
from tiny_training import TINY_TRAINING as TINY

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import make
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig, section
from vla_rl.stages.rl.experiment import policy_spec_from_config
from vla_rl.workers.actor_group import ActorGroup
from vla_rl.workers.chunked_envs import ChunkedEnvs


def rollout_like_batch(spec, num: int) -> tuple[TensorDict, list[str]]:
    """Observations of real envs, actions and extras of the real policy, random advantages."""
    policy = spec.build()
    envs = ChunkedEnvs(lambda i: make("tabletop/reach", image_size=32), num)
    observation = envs.reset()
    envs.close()
    _, extras = policy.act(observation, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    instructions = sorted(set(observation["instruction"]))
    batch = TensorDict(
        {
            "observation": {
                "images": {k: torch.from_numpy(v) for k, v in observation["images"].items()},
                "state": torch.from_numpy(observation["state"]),
                "instruction_id": torch.tensor([instructions.index(t) for t in observation["instruction"]]),
            },
            "extras": {k: v for k, v in extras.items() if k not in ("log_prob", "value")},
            "old_log_prob": extras["log_prob"],
            "value": extras["value"],
            "advantage": torch.randn(num, generator=generator),
            "return": torch.randn(num, generator=generator),
            "mask": torch.ones(num, dtype=torch.bool),
        },
        batch_size=[num],
    )
    return batch, instructions


def test_two_ranks_update_like_one_rank(ray_session):
    cfg = load_config([*TINY, "algo.update.epochs=2", "algo.update.micro_batch_size=2"])
    spec = policy_spec_from_config(cfg, env_io_spec("tabletop", "reach", {"image_size": 32}), None)
    algo, trainer = section(cfg, "algo", AlgoConfig), section(cfg, "trainer", TrainerConfig)
    batch, instructions = rollout_like_batch(spec, 11)  # 11 steps: mini-batches of 6 and 5, padded for 2 ranks
    weights = {}
    for world_size in (1, 2):
        group = ActorGroup(world_size, spec, algo.optim, algo.update, trainer.sharding)
        try:
            metrics = group.update(batch, instructions, seed=3)
            weights[world_size] = group.full_weights()
        finally:
            group.shutdown()
        assert np.isfinite(metrics["train/loss/policy"] if "train/loss/policy" in metrics else metrics["loss/policy"])
    start = spec.build().state_dict()
    moved = max((weights[1][k] - start[k]).abs().max().item() for k in start)
    assert moved > 1e-4  # the update changed the weights
    difference = max((weights[1][k] - weights[2][k]).abs().max().item() for k in weights[1])
    assert difference < 1e-5


def test_critic_warmup_leaves_the_action_head_alone():
    from vla_rl.workers.actor_worker import build_optimizer
    from vla_rl.workers.ppo_update import UpdateContext, ppo_update

    cfg = load_config(TINY)
    spec = policy_spec_from_config(cfg, env_io_spec("tabletop", "reach", {"image_size": 32}), None)
    algo = section(cfg, "algo", AlgoConfig)
    batch, instructions = rollout_like_batch(spec, 8)
    for train_policy in (False, True):
        model = spec.build()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        context = UpdateContext(model, build_optimizer(model, algo.optim), None, train_policy=train_policy)
        ppo_update(context, algo.update, batch, instructions, seed=0)
        after = model.state_dict()
        head_moved = any(not torch.equal(before[k], after[k]) for k in before if k.startswith("head."))
        critic_moved = any(not torch.equal(before[k], after[k]) for k in before if k.startswith("value_head."))
        assert critic_moved and head_moved == train_policy
