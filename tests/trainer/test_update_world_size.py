"""The PPO update's gradient is the same at world size 1 and 2, seen through plain SGD.

FSDP averages gradients over ranks, so each rank's loss is multiplied by the world size
(``vla_rl/workers/ppo_update.py``). Adam is nearly blind to a constant gradient scale, so the
Adam-based 2-rank test in ``test_trainer_update.py`` would pass without that factor; SGD's step is
proportional to the gradient, so here a missing or wrong factor moves the weights by a different amount.
"""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp
from tensordict import TensorDict
from torch import nn

from vla_rl.runtime.distributed import free_port, init_distributed, shutdown_distributed
from vla_rl.runtime.fsdp import full_state_dict, shard_model
from vla_rl.workers.ppo_update import UpdateConfig, UpdateContext, ppo_update

STATE_DIM, CHUNK, ACTION_DIM, STEPS = 3, 2, 2, 11  # 11 steps: mini-batches of 6 and 5, padded at 2 ranks
# Two epochs of two mini-batches, micro-batches of 2 (gradient accumulation); no gradient clipping,
# which would rescale the gradients of both world sizes to the same norm and hide a wrong scale.
CONFIG = UpdateConfig(epochs=2, num_minibatches=2, micro_batch_size=2, max_grad_norm=1e6)
LEARNING_RATE = 0.5


class LinearGaussianPolicy(nn.Module):
    """Chunks ~ N(linear(state), 0.5) and a linear critic: the smallest policy ``ppo_update`` accepts."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.actor = nn.Linear(STATE_DIM, CHUNK * ACTION_DIM)
        self.value_head = nn.Linear(STATE_DIM, 1)

    def fsdp_blocks(self):
        return [self.actor, self.value_head]

    def evaluate(self, observation, extras):
        state = observation["state"]
        mean = self.actor(state).view(-1, CHUNK, ACTION_DIM)
        log_prob = torch.distributions.Normal(mean, 0.5).log_prob(extras["action_chunk"])
        return log_prob, None, self.value_head(state).sum(dim=-1)  # (B,), not a view (FSDP warns about views)


def make_batch() -> TensorDict:
    generator = torch.Generator().manual_seed(1)
    state = torch.randn(STEPS, STATE_DIM, generator=generator)
    actions = torch.randn(STEPS, CHUNK, ACTION_DIM, generator=generator)
    with torch.no_grad():
        log_prob, _, value = LinearGaussianPolicy().evaluate({"state": state}, {"action_chunk": actions})
    return TensorDict(
        {
            "observation": {
                "images": {"front": torch.zeros(STEPS, 4, 4, 3, dtype=torch.uint8)},
                "state": state,
                "instruction_id": torch.zeros(STEPS, dtype=torch.long),
            },
            "extras": {"action_chunk": actions},
            "old_log_prob": log_prob + 0.1 * torch.randn(log_prob.shape, generator=generator),
            "value": value,
            "advantage": torch.randn(STEPS, generator=generator),
            "return": torch.randn(STEPS, generator=generator),
            "mask": torch.ones(STEPS, dtype=torch.bool),
        },
        batch_size=[STEPS],
    )


def sgd_update(model: nn.Module, rank: int, world_size: int) -> dict[str, float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    context = UpdateContext(model, optimizer, None, rank=rank, world_size=world_size)
    return ppo_update(context, CONFIG, make_batch(), ["reach"], seed=3)


def worker(rank: int, world_size: int, port: int, folder: str):
    mesh = init_distributed(rank, world_size, "127.0.0.1", port, torch.device("cpu"), timeout_s=120)
    try:
        model = shard_model(LinearGaussianPolicy(), mesh)
        metrics = sgd_update(model, rank, world_size)
        weights = full_state_dict(model)
        if rank == 0:
            torch.save({"weights": weights, "grad_norm": metrics["optim/grad_norm"]}, f"{folder}/rank0.pt")
    finally:
        shutdown_distributed()


def test_two_ranks_take_the_same_sgd_steps_as_one(tmp_path):
    """Weights after SGD (no momentum, no clipping) and the gradient norms agree at 1 and 2 ranks."""
    single = LinearGaussianPolicy()
    single_metrics = sgd_update(single, rank=0, world_size=1)

    port = free_port()
    rank_1 = mp.get_context("spawn").Process(target=worker, args=(1, 2, port, str(tmp_path)))
    rank_1.start()
    try:
        worker(0, 2, port, str(tmp_path))  # rank 0 here: one interpreter start-up (~5 s of imports) less
    finally:
        rank_1.join(timeout=120)
    assert rank_1.exitcode == 0
    two_ranks = torch.load(tmp_path / "rank0.pt")

    start = LinearGaussianPolicy().state_dict()
    for name, value in single.state_dict().items():
        assert (value - start[name]).abs().max() > 1e-2, f"{name} did not move; the check would be vacuous"
        torch.testing.assert_close(two_ranks["weights"][name], value, atol=1e-6, rtol=1e-5)
    assert two_ranks["grad_norm"] == pytest.approx(single_metrics["optim/grad_norm"], rel=1e-5)
