"""The VLM-backbone policy: tiny random models of each architecture, written as Hugging Face folders and loaded
through from_pretrained, pass the policy conformance kit with every head, and SFT trains what each mode says."""

from __future__ import annotations

import pytest
import torch

from policies.backbones.tiny import write_tiny_vlm
from policies.checks import run_checks, synthetic_io_spec, synthetic_observation, synthetic_stats
from policies.factory import build_from_factory

FACTORY = "policies.backbones.vlm_policy:build_policy"


@pytest.fixture(scope="module")
def tiny_vlms(tmp_path_factory):
    root = tmp_path_factory.mktemp("vlms")
    return {arch: write_tiny_vlm(root / arch, arch) for arch in ("idefics3", "smolvlm", "paligemma")}


def config(source, train="lora", head="gaussian", **options):
    return {"backbone": {"source": str(source), "train": train}, "embedding_dim": 32, "value": {"hidden_dims": [32]},
            "head": {"name": head, "options": options}}  # fmt: skip


@pytest.mark.parametrize("arch", ["idefics3", "smolvlm", "paligemma"])
def test_each_architecture_passes_the_kit_with_lora(tiny_vlms, arch):
    policy = run_checks(FACTORY, config(tiny_vlms[arch]))
    names = [name for name, p in policy.named_parameters() if p.requires_grad and ".backbone." in name]
    assert names and all("lora_" in name for name in names)


@pytest.mark.parametrize(("head", "options"), [("diffusion", {"num_train_timesteps": 12, "num_inference_steps": 3}),
                                               ("flow", {"num_inference_steps": 3, "rl_method": "noise"})])  # fmt: skip
def test_the_denoising_heads_read_the_vlm_embedding(tiny_vlms, head, options):
    run_checks(FACTORY, config(tiny_vlms["paligemma"], "frozen", head, **options))


def sft_steps(policy, steps=6):
    io_spec = synthetic_io_spec()
    obs = synthetic_observation(io_spec, 4)
    actions, _ = policy.act(obs, generator=torch.Generator().manual_seed(0))
    batch = {**obs, "action": actions.numpy()}
    optimizer = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    policy.train()
    for _ in range(steps):
        loss = policy.bc_loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize(("arch", "train"), [("idefics3", "frozen"), ("idefics3", "lora"), ("idefics3", "full"),
                                           ("smolvlm", "lora"), ("paligemma", "lora")])  # fmt: skip
def test_sft_trains_what_the_mode_says(tiny_vlms, arch, train):
    io_spec = synthetic_io_spec()
    torch.manual_seed(0)
    policy = build_from_factory(FACTORY, config(tiny_vlms[arch], train), io_spec, synthetic_stats(io_spec))
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    losses = sft_steps(policy)
    assert losses[-1] < losses[0]
    changed = {name for name, p in policy.named_parameters() if not torch.equal(p, before[name])}
    backbone = {name for name in before if ".backbone." in name}
    lora = {name for name in backbone if "lora_" in name}
    assert {n for n in changed if n.startswith("head.")}  # the head always learns
    if train == "frozen":
        assert not changed & backbone
    elif train == "lora":
        assert changed & backbone and changed & backbone <= lora
    else:
        assert len(changed & backbone) > len(backbone) // 2  # most backbone weights (some get no gradient)


def test_lora_starts_equal_to_the_frozen_backbone(tiny_vlms):
    io_spec = synthetic_io_spec()
    obs = synthetic_observation(io_spec, 2)
    embeddings = []
    for train in ("frozen", "lora"):
        torch.manual_seed(0)
        policy = build_from_factory(FACTORY, config(tiny_vlms["paligemma"], train), io_spec, synthetic_stats(io_spec))
        images, _, instructions = policy.prepare_observation(obs)
        with torch.no_grad():
            embeddings.append(policy.encoder.hidden_states(images, instructions))
    torch.testing.assert_close(embeddings[0], embeddings[1], rtol=0, atol=1e-6)


def test_the_image_tokens_follow_the_cameras_and_the_instruction_the_text(tiny_vlms):
    io_spec = synthetic_io_spec()
    policy = build_from_factory(FACTORY, config(tiny_vlms["idefics3"]), io_spec, synthetic_stats(io_spec))
    obs = synthetic_observation(io_spec, 2)
    images, _, instructions = policy.prepare_observation(obs)
    with torch.no_grad():
        base = policy.encoder.hidden_states(images, instructions)
        swapped = policy.encoder.hidden_states(images, instructions[::-1])
        darker = policy.encoder.hidden_states({k: v // 2 for k, v in images.items()}, instructions)
    assert not torch.allclose(base, swapped) and not torch.allclose(base, darker)
    ids, _ = policy.encoder.tokens(instructions, torch.device("cpu"))
    assert (ids[:, : 2 * policy.encoder.architecture.tokens_per_image] == 4).all()  # 2 cameras x 4 tokens each


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a local model folder"):
        build_from_factory(FACTORY, config(tmp_path / "nope"), synthetic_io_spec(), None)


def test_bench_policy_vlm_reports_every_mode_and_what_its_sync_carries(capsys):
    import json

    from vla_rl.cli import main

    assert main(["bench", "policy", "--vlm", "--batch-size", "2", "--repeats", "1", "--vlm-hidden-size", "32"]) == 0
    document = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (document["batch_size"], document["repeats"], document["vlm"]["hidden_size"]) == (2, 1, 32)
    result = document["policies"]
    assert set(result) == {"compact_film", "vlm_frozen", "vlm_lora", "vlm_full", "token_vla_lora", "expert_vla_lora"}
    for name, row in result.items():
        assert row["act_chunks_per_s"]["min"] <= row["act_chunks_per_s"]["median"] <= row["act_chunks_per_s"]["max"]
        sync = row["weight_sync"]
        full_training = name in ("compact_film", "vlm_full")
        assert (sync["bytes_ratio"] == 1.0) is full_training
        assert row["trainable_parameters"] < row["parameters"] or full_training
        # the bytes are those of the trainable parameters (float32; the policies have no persistent buffers)
        assert round(4 * row["trainable_parameters"] / 2**20, 3) == sync["changing_only"]["megabytes"]
    assert result["vlm_frozen"]["trainable_parameters"] < result["vlm_lora"]["trainable_parameters"]



def test_bench_policy_vlm_without_repeats_hands_the_benchmark_its_default_count(monkeypatch, capsys):
    """`vla-rl bench policy --vlm` as docs/new_policy_guide.md writes it (no --repeats): an integer count of
    rounds, not None (which crashed in ``timed``). The benchmark itself runs in the test above."""
    import json

    import policies.backbones.benchmark as benchmark
    from vla_rl.cli import main

    calls = []
    monkeypatch.setattr(benchmark, "run_vlm_benchmark", lambda *args: calls.append(args) or {"repeats": args[1]})
    assert main(["bench", "policy", "--vlm"]) == 0
    (batch_size, repeats, architecture, hidden_size), = calls
    assert isinstance(repeats, int) and repeats >= 1
    assert (batch_size, architecture, hidden_size) == (32, "idefics3", 64)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"repeats": repeats}
