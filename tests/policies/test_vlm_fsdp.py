"""FSDP2 shards the VLM policy per transformer block (the unit verl and RLinf wrap): two gloo ranks on CPU, each on
half the batch, take the same SFT steps as one process on the whole batch, with LoRA and full fine-tuning, with
and without CPU offload; and bfloat16 mixed precision. The same code runs on a GPU (nccl): only the device differs."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp

from policies.backbones.tiny import write_tiny_vlm
from policies.checks import synthetic_io_spec, synthetic_observation, synthetic_stats
from policies.factory import build_from_factory
from vla_rl.runtime.distributed import free_port, init_distributed, shutdown_distributed
from vla_rl.runtime.fsdp import ShardingConfig, full_state_dict, shard_model

FACTORY = "policies.backbones.vlm_policy:build_policy"
BATCH = 4


def build(source: str, train: str):
    io_spec = synthetic_io_spec()
    config = {"backbone": {"source": source, "train": train, "lora_rank": 4}, "embedding_dim": 32,
              "value": {"hidden_dims": [16]}, "head": {"name": "gaussian", "options": {}}}  # fmt: skip
    torch.manual_seed(0)
    return build_from_factory(FACTORY, config, io_spec, synthetic_stats(io_spec))


def batch(rank: int = 0, world_size: int = 1) -> dict:
    io_spec = synthetic_io_spec()
    obs = synthetic_observation(io_spec, BATCH, seed=3)
    generator = torch.Generator().manual_seed(4)
    low, high = torch.tensor(io_spec["action_low"]), torch.tensor(io_spec["action_high"])
    obs["action"] = (low + (high - low) * torch.rand(BATCH, 4, 3, generator=generator)).numpy()
    shard = slice(rank * BATCH // world_size, (rank + 1) * BATCH // world_size)
    return {"images": {k: v[shard] for k, v in obs["images"].items()}, "state": obs["state"][shard],
            "instruction": obs["instruction"][shard], "action": obs["action"][shard]}  # fmt: skip


def sft_steps(policy, data, steps: int = 2) -> None:
    # SGD: a step linear in the gradient (Adam would blow float round-off in near-zero gradients up to lr-sized steps:
    # LoRA's A has a gradient only through B, which is zero at the first step).
    optimizer = torch.optim.SGD([p for p in policy.parameters() if p.requires_grad], lr=0.5)
    for _ in range(steps):
        policy.bc_loss(data).backward()
        optimizer.step()
        optimizer.zero_grad()


CASES = [("lora", False), ("full", True)]  # (what trains, CPU offload)


def rank_main(rank: int, world_size: int, port: int, source: str, folder: str) -> None:
    """Every case of ``CASES`` in turn on one process group; rank 0 saves each case's full weights."""
    mesh = init_distributed(rank, world_size, "127.0.0.1", port, torch.device("cpu"))
    from torch.distributed.fsdp import FSDPModule

    for train, offload in CASES:
        policy = build(source, train)
        blocks = policy.fsdp_blocks()
        model = shard_model(policy, mesh, ShardingConfig(cpu_offload=offload))
        trained = [b for b in blocks if any(p.requires_grad for p in b.parameters())]
        layers = [b for b in trained if "Layer" in type(b).__name__]
        assert layers and all(isinstance(b, FSDPModule) for b in layers)  # each transformer block is a unit
        sft_steps(model, batch(rank, world_size))
        weights = full_state_dict(model)
        if rank == 0:
            torch.save({"weights": weights, "units": len(layers)}, f"{folder}/rank0_{train}_{offload}.pt")
    shutdown_distributed()


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory) -> tuple[str, str]:
    """The tiny VLM and the folder of rank 0's weights after two ranks ran every case (one spawn of the two
    processes for all cases: starting them costs more than the steps)."""
    folder = tmp_path_factory.mktemp("vlm_fsdp")
    source = str(write_tiny_vlm(folder / "vlm", "idefics3"))
    context, port = mp.get_context("spawn"), free_port()
    processes = [context.Process(target=rank_main, args=(r, 2, port, source, str(folder))) for r in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
        assert process.exitcode == 0
    return source, str(folder)


@pytest.mark.parametrize(("train", "offload"), CASES)
def test_two_ranks_take_the_steps_of_one_process(two_rank_runs, train, offload):
    source, folder = two_rank_runs
    reference = build(source, train)
    sft_steps(reference, batch())
    saved = torch.load(f"{folder}/rank0_{train}_{offload}.pt")
    assert saved["units"] == 4  # 2 vision + 2 language blocks of the tiny Idefics3
    initial = build(source, train).state_dict()
    moved = [name for name, value in reference.state_dict().items() if not torch.equal(value, initial[name])]
    assert any(".backbone." in name for name in moved)  # the backbone (adapters or weights) learned
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(saved["weights"][name], value, atol=2e-5, rtol=1e-4, msg=name)


def test_bfloat16_mixed_precision_computes_in_bfloat16_and_keeps_float32_weights_and_gradients(tmp_path):
    """``trainer.sharding.param_dtype=bfloat16``: FSDP2 gathers each block's weights in bfloat16 for the
    forward and backward (the CPU has bfloat16 kernels, as GPUs do) while the sharded weights, their gradients
    and so the optimizer stay float32; the loss is the float32 loss to bfloat16's precision."""
    source = str(write_tiny_vlm(tmp_path / "vlm", "idefics3"))
    reference = build(source, "full").bc_loss(batch())
    policy = build(source, "full")
    block_linear = next(m for m in policy.fsdp_blocks()[0].modules() if isinstance(m, torch.nn.Linear))
    computed: list[tuple[torch.dtype, torch.dtype]] = []
    block_linear.register_forward_hook(lambda module, args, out: computed.append((module.weight.dtype, out.dtype)))
    mesh = init_distributed(0, 1, "127.0.0.1", free_port(), torch.device("cpu"))
    try:
        model = shard_model(policy, mesh, ShardingConfig(param_dtype="bfloat16"))
        loss = model.bc_loss(batch())
        loss.backward()
    finally:
        shutdown_distributed()
    assert computed and set(computed) == {(torch.bfloat16, torch.bfloat16)}
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {p.grad.dtype for p in model.parameters() if p.grad is not None} == {torch.float32}
    assert abs(loss.item() - reference.item()) <= 2e-2 * abs(reference.item())
    assert loss.item() != reference.item()  # computed in bfloat16 indeed, not float32
