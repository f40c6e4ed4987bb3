"""FSDP2 sharding and DCP checkpoints on CPU (gloo), against a single-process reference."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp
from torch import nn

from vla_rl.runtime.checkpoint import load_sharded, save_sharded
from vla_rl.runtime.distributed import free_port, init_distributed, shutdown_distributed
from vla_rl.runtime.fsdp import full_state_dict, set_gradient_sync, shard_model


class TwoBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.frozen = nn.Linear(6, 6)
        self.frozen.requires_grad_(False)
        self.encoder = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
        self.head = nn.Linear(16, 3)

    def fsdp_blocks(self):
        return [self.encoder, self.head]

    def forward(self, x):
        return self.head(self.encoder(self.frozen(x)))


def data():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(8, 6, generator=generator), torch.randn(8, 3, generator=generator)


def train_steps(model: nn.Module, inputs, targets, rank: int, world_size: int, micro_batches: int = 2):
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    shard = inputs.shape[0] // world_size
    x, y = inputs[rank * shard : (rank + 1) * shard], targets[rank * shard : (rank + 1) * shard]
    for _ in range(3):
        for index, (xm, ym) in enumerate(zip(x.chunk(micro_batches), y.chunk(micro_batches), strict=True)):
            set_gradient_sync(model, index == micro_batches - 1)
            loss = ((model(xm) - ym) ** 2).sum() / shard  # per-rank mean; FSDP averages over ranks
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return optimizer


def worker(rank: int, world_size: int, port: int, folder: str):
    mesh = init_distributed(rank, world_size, "127.0.0.1", port, torch.device("cpu"))
    model = shard_model(TwoBlocks(), mesh)
    optimizer = train_steps(model, *data(), rank, world_size)
    weights = full_state_dict(model)
    save_sharded(model, optimizer, folder)
    if rank == 0:
        torch.save(weights, f"{folder}/full_weights.pt")
    shutdown_distributed()


def test_two_ranks_match_one_process_and_the_checkpoint_loads_without_a_process_group(tmp_path):
    reference = TwoBlocks()
    reference_optimizer = train_steps(reference, *data(), rank=0, world_size=1)

    context = mp.get_context("spawn")
    port = free_port()
    processes = [context.Process(target=worker, args=(r, 2, port, str(tmp_path))) for r in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    sharded_weights = torch.load(tmp_path / "full_weights.pt")
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(sharded_weights[name], value, atol=1e-5, rtol=0)
    assert not torch.equal(sharded_weights["head.weight"], TwoBlocks().head.weight)  # training did something

    # Saved at world size 2, loaded at world size 1 without any process group.
    restored = TwoBlocks()
    optimizer = torch.optim.Adam([p for p in restored.parameters() if p.requires_grad], lr=1e-2)
    load_sharded(restored, optimizer, tmp_path)
    for name, value in restored.state_dict().items():
        torch.testing.assert_close(value, sharded_weights[name], atol=0, rtol=0)
    # Adam's moments and step count came back, as the 1-process reference has them (not a fresh state).
    reference_parameters = dict(reference.named_parameters())
    for name, parameter in restored.named_parameters():
        if not parameter.requires_grad:
            continue
        state = optimizer.state[parameter]
        expected = reference_optimizer.state[reference_parameters[name]]
        assert float(state["step"]) == float(expected["step"]) == 3.0, name
        for key in ("exp_avg", "exp_avg_sq"):
            assert expected[key].abs().max() > 0
            torch.testing.assert_close(state[key], expected[key], atol=1e-7, rtol=1e-4)


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # DCP without a process group
def test_loading_a_checkpoint_restores_the_adam_state_and_the_next_step(tmp_path):
    """``load_sharded`` brings back Adam's moments and step count, not a fresh (zero, step 0) state.

    The proof that matters: one more step from the restored model and optimizer lands on the same
    weights as one more step of the original, while a fresh optimizer (what a load that skipped the
    optimizer state leaves) lands elsewhere.
    """
    inputs, targets = data()
    trained = TwoBlocks()
    optimizer = train_steps(trained, inputs, targets, rank=0, world_size=1)
    save_sharded(trained, optimizer, tmp_path)
    saved = {name: {key: value.clone() for key, value in optimizer.state[p].items()}
             for name, p in trained.named_parameters() if p.requires_grad}  # fmt: skip

    restored = TwoBlocks()
    restored_optimizer = torch.optim.Adam([p for p in restored.parameters() if p.requires_grad], lr=1e-2)
    load_sharded(restored, restored_optimizer, tmp_path)
    for name, parameter in restored.named_parameters():
        if not parameter.requires_grad:
            continue
        state = restored_optimizer.state[parameter]
        assert float(state["step"]) == float(saved[name]["step"]) == 3.0
        for key in ("exp_avg", "exp_avg_sq"):
            assert saved[name][key].abs().max() > 0  # a fresh optimizer's zero moments would differ
            torch.testing.assert_close(state[key], saved[name][key], atol=0, rtol=0)

    def one_more_step(model, adam):
        loss = ((model(inputs) - targets) ** 2).mean()
        loss.backward()
        adam.step()
        adam.zero_grad()
        return model.state_dict()

    expected = one_more_step(trained, optimizer)
    for name, value in one_more_step(restored, restored_optimizer).items():
        torch.testing.assert_close(value, expected[name], atol=0, rtol=0)
    fresh = TwoBlocks()
    load_sharded(fresh, None, tmp_path)  # the weights only
    fresh_optimizer = torch.optim.Adam([p for p in fresh.parameters() if p.requires_grad], lr=1e-2)
    moved_elsewhere = one_more_step(fresh, fresh_optimizer)
    assert (moved_elsewhere["head.weight"] - expected["head.weight"]).abs().max() > 1e-4
