"""FSDP2 on both VLA families: two gloo ranks on CPU, each on half the batch, take the same RL update steps (log-prob
and value, the critic detached as the experiments configure it) as one process on the whole batch (the token VLA
fully fine-tuned, the expert VLA with LoRA); the wrapped module tree has each transformer block of the vision tower,
the language model and the action expert as a unit, and the trainable embeddings and output rows by name."""

from __future__ import annotations

import re

import pytest
import torch
import torch.multiprocessing as mp

from policies.backbones.tiny import write_tiny_vlm
from policies.checks import synthetic_io_spec, synthetic_observation, synthetic_stats
from policies.factory import build_from_factory
from vla_rl.runtime.distributed import free_port, init_distributed, shutdown_distributed
from vla_rl.runtime.fsdp import full_state_dict, shard_model

BATCH = 4
FAMILIES = {
    "token": ("policies.backbones.token_vla:build_policy", {"tokens": {"num_bins": 16}}),
    "expert": ("policies.backbones.expert_vla:build_policy", {"flow": {"num_inference_steps": 2}}),
}


TRAIN = {"token": "full", "expert": "lora"}
#: Units by name: transformer blocks, embeddings, and each family's own trainable modules (besides the root).
BLOCK = re.compile(r"\.layers\.\d+$")
EMBEDDINGS = re.compile(r"\.(embeddings|embed_tokens)$")
OWN = {"token": {"readout", "action_embeddings", "value_head", "prefix.state_token"}, "expert": {"head", "value_head"}}


def build(source: str, family: str, train: str | None = None):
    factory, options = FAMILIES[family]
    io_spec = synthetic_io_spec()
    config = {"backbone": {"source": source, "train": train or TRAIN[family], "lora_rank": 4, "max_length": 8},
              "value": {"hidden_dims": [16], "detach_input": True}, **options}  # fmt: skip
    torch.manual_seed(0)
    return build_from_factory(factory, config, io_spec, synthetic_stats(io_spec))


def rollout(policy) -> tuple[dict, dict]:
    obs = synthetic_observation(synthetic_io_spec(), BATCH, seed=3)
    _, extras = policy.eval().act(obs, generator=torch.Generator().manual_seed(4))
    return obs, extras


def shard(obs: dict, extras: dict, rank: int, world_size: int) -> tuple[dict, dict]:
    part = slice(rank * BATCH // world_size, (rank + 1) * BATCH // world_size)
    return ({"images": {k: v[part] for k, v in obs["images"].items()}, "state": obs["state"][part],
             "instruction": obs["instruction"][part]}, {k: v[part] for k, v in extras.items()})  # fmt: skip


def update_steps(model, obs: dict, extras: dict, steps: int = 2) -> None:
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    model.train()
    for _ in range(steps):
        log_prob, _, value = model.evaluate(obs, extras)
        (-(log_prob.mean()) + value.square().mean()).backward()
        optimizer.step()
        optimizer.zero_grad()


def rank_main(rank: int, world_size: int, port: int, source: str, family: str, out: str) -> None:
    mesh = init_distributed(rank, world_size, "127.0.0.1", port, torch.device("cpu"))
    policy = build(source, family)
    obs, extras = shard(*rollout(policy), rank, world_size)
    model = shard_model(policy, mesh)
    from torch.distributed.fsdp import FSDPModule

    units = sorted(name for name, module in model.named_modules() if name and isinstance(module, FSDPModule))
    update_steps(model, obs, extras)
    weights = full_state_dict(model)
    if rank == 0:
        torch.save({"weights": weights, "units": units}, out)
    shutdown_distributed()


def expected_units(policy, family: str) -> list[str]:
    """The unit names the wrapping should give, from the module names alone."""
    trainable = {name for name, module in policy.named_modules() if any(p.requires_grad for p in module.parameters())}
    named = {name for name in trainable if BLOCK.search(name) or EMBEDDINGS.search(name)}
    return sorted(named | OWN[family])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_two_ranks_take_the_rl_steps_of_one_process(tmp_path, family):
    source = str(write_tiny_vlm(tmp_path / "vlm", "idefics3"))
    reference = build(source, family)
    update_steps(reference, *rollout(reference))
    out = str(tmp_path / "rank0.pt")
    context, port = mp.get_context("spawn"), free_port()
    processes = [context.Process(target=rank_main, args=(r, 2, port, source, family, out)) for r in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=300)
        assert process.exitcode == 0
    saved = torch.load(out)
    units = expected_units(reference, family)
    language_blocks = [u for u in units if BLOCK.search(u) and ".text_model." in u]
    assert saved["units"] == units and len(language_blocks) == 2  # the language model's blocks are units in both
    assert (family == "token") == any(EMBEDDINGS.search(u) for u in units)  # trainable only when fully fine-tuned
    initial = build(source, family).state_dict()
    moved = [name for name, value in reference.state_dict().items() if not torch.equal(value, initial[name])]
    assert any(".text_model.layers." in name and (family == "token" or "lora_" in name) for name in moved)
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(saved["weights"][name], value, atol=2e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_lora_syncs_only_the_adapters_the_expert_and_the_heads(tmp_path, family):
    from vla_rl.workers.weight_sync import changing_keys

    policy = build(str(write_tiny_vlm(tmp_path / "vlm", "idefics3")), family, train="lora")
    keys = changing_keys(policy)
    backbone = {key for key in policy.state_dict() if ".backbone." in key}
    assert {key for key in keys if key in backbone} == {key for key in backbone if "lora_" in key} != set()
    assert set(policy.state_dict()) - backbone <= keys  # action rows or expert, critic, state token
    if family == "expert":
        assert {key for key in keys if ".expert.layers." in key}
