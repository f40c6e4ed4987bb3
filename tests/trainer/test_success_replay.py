"""The success replay in the update (vla_rl/workers/success_replay.py): its gradient is ``weight`` times the
gradient of the policy's own ``bc_loss`` on the replayed chunks, computed directly; it trains nothing during the
critic warm-up; and one rank and two FSDP ranks give the same update with it."""

from __future__ import annotations

import copy

import numpy as np
import torch
from test_trainer_update import rollout_like_batch
from tiny_training import TINY_TRAINING as TINY

from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig, section
from vla_rl.stages.rl.experiment import policy_spec_from_config
from vla_rl.workers.ppo_update import UpdateContext, ppo_update
from vla_rl.workers.success_replay import LOSS_KEY, SuccessReplay, micro_seed, replay_loss


def spec_and_algo(*overrides: str):
    cfg = load_config([*TINY, *overrides])
    spec = policy_spec_from_config(cfg, env_io_spec("tabletop", "reach", {"image_size": 32}), None)
    return spec, section(cfg, "algo", AlgoConfig), section(cfg, "trainer", TrainerConfig)


def replay_from(batch, instructions: list[str], steps: int, chunks: int, weight: float, chunk_size: int,
                action_dim: int) -> SuccessReplay:  # fmt: skip
    """``steps`` x ``chunks`` replayed chunks: the batch's observations (rolled per step), random actions in
    [-1, 1] and masks that cut some chunks short."""
    generator = torch.Generator().manual_seed(11)
    rows = torch.stack([torch.roll(torch.arange(chunks), step) % batch.shape[0] for step in range(steps)])
    observation = batch["observation"]
    mask = torch.ones(steps, chunks, chunk_size, dtype=torch.bool)
    mask[:, ::2, chunk_size // 2 :] = False
    return SuccessReplay(weight, {
        "images": {camera: observation["images", camera][rows] for camera in observation["images"].keys()},
        "state": observation["state"][rows],
        "action": torch.rand(steps, chunks, chunk_size, action_dim, generator=generator) * 2 - 1,
        "action_mask": mask,
        "instruction": [[instructions[int(observation["instruction_id"][row])] for row in step] for step in rows],
    })  # fmt: skip


def sgd_update(model, update, batch, instructions, replay, train_policy=True) -> dict[str, float]:
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    return ppo_update(UpdateContext(model, optimizer, None, train_policy=train_policy), update, batch, instructions,
                      seed=5, replay=replay)  # fmt: skip


def test_the_replay_adds_weight_times_the_gradient_of_the_policys_bc_loss_on_the_replayed_chunks():
    spec, algo, _ = spec_and_algo("algo.update.epochs=1", "algo.update.num_minibatches=1",
                                  "algo.update.micro_batch_size=64", "algo.update.max_grad_norm=1e9")  # fmt: skip
    batch, instructions = rollout_like_batch(spec, 6)
    start = spec.build()
    chunk_size, action_dim = start.config.chunk_size, start.io_spec.action_dim
    replay = replay_from(batch, instructions, steps=1, chunks=4, weight=0.7, chunk_size=chunk_size, action_dim=action_dim)

    without = copy.deepcopy(start)
    metrics_without = sgd_update(without, algo.update, batch, instructions, None)
    with_replay = copy.deepcopy(start)
    metrics = sgd_update(with_replay, algo.update, batch, instructions, replay)

    direct = copy.deepcopy(start)
    shard, offset = replay.shard(0, 0, 1)
    bc = replay_loss(direct, shard, micro_seed(5, 0, offset), torch.device("cpu"))
    bc.backward()
    assert metrics[LOSS_KEY] == float(bc.detach())  # the same chunks, the same noise
    assert LOSS_KEY not in metrics_without
    unchanged = {k: v for k, v in metrics.items() if k != LOSS_KEY and "grad_norm" not in k}
    assert unchanged == {k: v for k, v in metrics_without.items() if "grad_norm" not in k}  # the RL losses
    reached = 0
    for (name, p_without), p_with, p_direct in zip(without.named_parameters(), with_replay.parameters(),
                                                   direct.parameters(), strict=True):  # fmt: skip
        if p_direct.grad is None or not p_direct.requires_grad:
            torch.testing.assert_close(p_with, p_without, rtol=0, atol=0, msg=name)
            continue
        reached += 1
        # SGD with lr 1: the replay moves every parameter by -weight * its bc_loss gradient
        torch.testing.assert_close(p_with - p_without, -0.7 * p_direct.grad, rtol=1e-4, atol=1e-6, msg=name)
    assert reached > 0


def test_the_replay_trains_nothing_during_the_critic_warmup():
    spec, algo, _ = spec_and_algo("algo.update.epochs=1")
    batch, instructions = rollout_like_batch(spec, 6)
    start = spec.build()
    replay = replay_from(batch, instructions, 2, 4, 1.0, start.config.chunk_size, start.io_spec.action_dim)
    models = [copy.deepcopy(start), copy.deepcopy(start)]
    metrics = [sgd_update(model, algo.update, batch, instructions, r, train_policy=False)
               for model, r in zip(models, (None, replay), strict=True)]  # fmt: skip
    assert metrics[0] == metrics[1]
    for a, b in zip(models[0].state_dict().values(), models[1].state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_two_ranks_update_like_one_rank_with_the_replay(ray_session):
    from vla_rl.workers.actor_group import ActorGroup

    spec, algo, trainer = spec_and_algo("algo.update.epochs=2", "algo.update.micro_batch_size=2")
    batch, instructions = rollout_like_batch(spec, 8)
    policy = spec.build()
    # 4 chunks a step: one rank's micro-batches of 2 cut them where two ranks' shards do
    replay = replay_from(batch, instructions, 3, 4, 0.5, policy.config.chunk_size, policy.io_spec.action_dim)
    weights, losses = {}, {}
    for world_size in (1, 2):
        group = ActorGroup(world_size, spec, algo.optim, algo.update, trainer.sharding)
        try:
            losses[world_size] = group.update(batch, instructions, seed=3, replay=replay)[LOSS_KEY]
            weights[world_size] = group.full_weights()
        finally:
            group.shutdown()
    start = policy.state_dict()
    assert max((weights[1][k] - start[k]).abs().max().item() for k in start) > 1e-4
    assert max((weights[1][k] - weights[2][k]).abs().max().item() for k in weights[1]) < 1e-5
    assert np.isclose(losses[1], losses[2], rtol=1e-5)
