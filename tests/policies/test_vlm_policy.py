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


def bench_policy_vlm(capsys, *options):
    """The JSON document of ``vla-rl bench policy --vlm OPTIONS`` at batch 2, one timed round."""
    import json

    from vla_rl.cli import main

    assert main(["bench", "policy", "--vlm", "--batch-size", "2", "--repeats", "1", *options]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def bytes_that_should_travel(policy, train):
    """The bytes of a weight sync after the first, counted from the weights' names: everything but the frozen
    backbone's own weights (with LoRA, its ``lora_`` adapters travel), so the action rows, the expert, the heads and
    the critic do."""

    def travels(key):
        in_backbone = ".backbone." in f".{key}"
        return train in (None, "full") or not in_backbone or (train == "lora" and "lora_" in key)

    weights = policy.state_dict()
    return sum(w.numel() * w.element_size() for key, w in weights.items() if travels(key))


def assert_figures_and_sync(result, source, batch_size):
    import math

    from vla_rl.benchmarks.vlm_policies import BENCHMARK_SPEC, benched_policies, benchmark_stats

    families = {name: benched for name, benched in benched_policies(["pooled", "tokens", "expert"]).items()
                if name in result}  # fmt: skip
    assert set(result) == set(families)
    for name, row in result.items():
        for figure in ("act_chunks_per_s", "ppo_update_samples_per_s"):
            rates = row[figure]
            assert all(math.isfinite(rates[key]) and rates[key] > 0 for key in ("median", "min", "max", "per_cpu_s"))
            assert rates["min"] <= rates["median"] <= rates["max"]
        benched = families[name]
        policy = build_from_factory(benched.factory, benched.config(str(source)), BENCHMARK_SPEC.to_dict(),
                                    benchmark_stats(BENCHMARK_SPEC))  # fmt: skip
        sync = row["weight_sync"]
        everything = sum(w.numel() * w.element_size() for w in policy.state_dict().values())
        assert sync["all_weights"]["bytes"] == everything
        assert sync["changing_only"]["bytes"] == bytes_that_should_travel(policy, benched.train), name
        assert sync["bytes_ratio"] == round(sync["changing_only"]["bytes"] / everything, 4)
        assert (sync["bytes_ratio"] == 1.0) is (benched.train in (None, "full")), name
        assert row["trainable_parameters"] < row["parameters"] or benched.train in (None, "full")


def test_bench_policy_vlm_measures_every_family_and_syncs_what_trains(capsys, tmp_path):
    document = bench_policy_vlm(capsys, "--vlm-hidden-size", "32")
    assert (document["batch_size"], document["repeats"], document["families"]) == (2, 1, ["pooled", "tokens", "expert"])
    assert document["vlm"] == {"source": None, "architecture": "idefics3", "hidden_size": 32, "num_layers": 2,
                               "image_size": 64}  # fmt: skip
    result = document["policies"]
    assert set(result) == {"compact_film", "vlm_frozen", "vlm_lora", "vlm_full", "token_vla_lora",
                           "token_vla_lora_autoregressive", "expert_vla_lora"}  # fmt: skip
    assert result["token_vla_lora"]["options"]["tokens"]["decoding"] == "parallel"
    assert result["token_vla_lora_autoregressive"]["options"]["tokens"]["decoding"] == "autoregressive"
    assert result["token_vla_lora"]["log_prob_granularity"] == "dimension"
    assert result["expert_vla_lora"]["options"]["flow"]["num_inference_steps"] == 5
    # the same random model the benchmark wrote (the counts depend on its shapes only)
    source = write_tiny_vlm(tmp_path / "tiny", "idefics3", image_size=64, hidden_size=32, num_layers=2)
    assert_figures_and_sync(result, source, 2)
    assert result["vlm_frozen"]["trainable_parameters"] < result["vlm_lora"]["trainable_parameters"]


def test_bench_policy_vlm_benches_the_model_folder_it_is_given_for_the_chosen_families(capsys, tiny_vlms):
    source = tiny_vlms["paligemma"]
    document = bench_policy_vlm(capsys, "--vlm-source", str(source), "--families", "expert", "expert")
    assert document["families"] == ["expert"]
    assert document["vlm"] == {"source": str(source), "architecture": "paligemma", "hidden_size": 32, "num_layers": 2,
                               "image_size": 32}  # fmt: skip
    assert set(document["policies"]) == {"compact_film", "expert_vla_lora"}
    assert_figures_and_sync(document["policies"], source, 2)


def test_the_vlm_bench_families_are_those_the_cli_offers():
    from vla_rl.benchmarks.vlm_policies import FAMILIES
    from vla_rl.commands.bench import VLM_FAMILIES

    assert tuple(FAMILIES) == VLM_FAMILIES


@pytest.mark.parametrize(("options", "named"), [
    (["--vlm", "--vlm-source", "{missing}"], "--vlm-source"),
    (["--vlm", "--vlm-source", "{tiny}", "--vlm-hidden-size", "32"], "--vlm-hidden-size"),
    (["--vlm", "--vlm-source", "{tiny}", "--vlm-architecture", "smolvlm"], "--vlm-architecture"),
    (["--vlm", "--vlm-hidden-size", "30"], "--vlm-hidden-size"),
    (["--vlm", "--batch-size", "0"], "--batch-size"),
    (["--vlm", "--repeats", "0"], "--repeats"),
    (["--families", "tokens"], "--families"),
    (["--vlm-source", "{tiny}"], "--vlm-source"),
])  # fmt: skip
def test_bench_policy_vlm_names_the_option_that_is_wrong(capsys, tiny_vlms, tmp_path, monkeypatch, options, named):
    import vla_rl.benchmarks.vlm_policies as benchmark
    from vla_rl.cli import main

    monkeypatch.setattr(benchmark, "run_vlm_benchmark", lambda **_: pytest.fail("ran despite a wrong option"))
    paths = {"missing": tmp_path / "nope", "tiny": tiny_vlms["idefics3"]}
    assert main(["bench", "policy", *[option.format(**paths) for option in options]]) == 2
    error = capsys.readouterr().err
    assert named in error and "Traceback" not in error


def test_an_unknown_family_is_refused_by_the_parser_naming_the_option(capsys):
    from vla_rl.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "policy", "--vlm", "--families", "pooled", "diffusion"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "--families" in error and "'diffusion'" in error and "tokens" in error


def test_bench_policy_vlm_without_options_leaves_the_benchmark_its_defaults(monkeypatch, capsys):
    """`vla-rl bench policy --vlm` as docs/new_policy_guide.md writes it (no --repeats): the benchmark's own
    defaults (a count of rounds, not None, which crashed in ``timed``). The benchmark itself runs in the tests above."""
    import inspect
    import json

    import vla_rl.benchmarks.vlm_policies as benchmark
    from vla_rl.cli import main

    defaults = {name: p.default for name, p in inspect.signature(benchmark.run_vlm_benchmark).parameters.items()}
    calls = []
    monkeypatch.setattr(benchmark, "run_vlm_benchmark", lambda **kwargs: calls.append(kwargs) or {"ok": True})
    assert main(["bench", "policy", "--vlm"]) == 0
    assert calls == [{"batch_size": 32}]
    assert isinstance(defaults["repeats"], int) and defaults["repeats"] >= 1
    assert (defaults["source"], tuple(defaults["families"])) == (None, ("pooled", "tokens", "expert"))
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"ok": True}
