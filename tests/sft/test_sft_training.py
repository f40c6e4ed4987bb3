"""`run_sft` end to end on a tiny collected dataset, for every action head."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import ENV_KWARGS
from omegaconf import OmegaConf

from envs.registry import make
from policies.config import PolicyIOSpec
from policies.vla import VLAPolicy
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.sft.batches import DatasetError, MissingDatasetError, collate_chunks
from vla_rl.stages.sft.datasets import load_demonstrations, load_statistics
from vla_rl.stages.sft.demos import ChunkDataset, write_dataset
from vla_rl.stages.sft.training import UNDERTRAINED_DROP, SFTConfig, run_sft
from vla_rl.workers.policy_factory import PolicySpec

CAMERAS = ["front", "wrist"]
SEED = 5


def policy_config(head: str) -> dict:
    """The config group's policy with ``head``, narrowed so that a test trains it in seconds on 2 cores."""
    config = OmegaConf.to_container(load_config([f"policy={head}"]).policy, resolve=True)
    config["vision"]["backbone_kwargs"].update(channels=[8, 16, 16, 32], stem_width=8)
    config["head"]["options"]["hidden_dim"] = 64
    config["embedding_dim"] = 64
    return config


def mean_loss(policy, dataset: ChunkDataset, seed: int, batch_size: int = 16) -> float:
    """Sample-weighted mean bc_loss over ``dataset`` in order, the loss noise drawn from ``seed``."""
    policy.eval()
    total = 0.0
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for start in range(0, len(dataset), batch_size):
            items = [dataset[i] for i in range(start, min(start + batch_size, len(dataset)))]
            total += float(policy.bc_loss(collate_chunks(items, CAMERAS))) * len(items)
    return total / len(dataset)


@pytest.mark.parametrize("head", ["gaussian", "diffusion", "flow"])
def test_sft_lowers_the_loss_and_exports_a_policy_that_acts(head, tiny_dataset, tmp_path, capsys):
    config = SFTConfig(max_steps=24, batch_size=16, learning_rate=1e-3, warmup_steps=3, valid_every=8,
                       log_every=4, show_progress=False, num_threads=1)  # fmt: skip
    result = run_sft(policy_config(head), "tabletop", ENV_KWARGS, tiny_dataset, tmp_path, config, seed=SEED)

    train_episodes, _ = load_demonstrations(tiny_dataset, split="train", split_seed=SEED)  # the run's split
    valid_episodes, _ = load_demonstrations(tiny_dataset, split="valid", split_seed=SEED)
    train_set, valid_set = ChunkDataset(train_episodes, 4), ChunkDataset(valid_episodes, 4)
    assert result.num_steps == 24 and len(result.train_losses) == 24
    assert result.num_train_samples == len(train_set) and result.num_valid_samples == len(valid_set) > 0

    # Against an untrained policy with the same statistics, on the whole training set with the same noise.
    stats = load_statistics(tiny_dataset / "stats.json")
    config = {k: v for k, v in policy_config(head).items() if k != "factory"}
    io_spec = PolicyIOSpec.from_spec(env_io_spec("tabletop", None, dict(ENV_KWARGS))).to_dict()
    untrained = PolicySpec(config, io_spec, {k: stats[k] for k in ("action", "state")}).build()
    trained = VLAPolicy.from_pretrained(result.last_dir)
    before, after = mean_loss(untrained, train_set, seed=0), mean_loss(trained, train_set, seed=0)
    assert after < before - 0.2 * abs(before), (before, after)
    assert np.mean(result.train_losses[-4:]) < np.mean(result.train_losses[:4])

    # Validation at steps 8, 16, 24; the best one is the exported best policy's loss on the valid split.
    assert [step for step, _ in result.valid_losses] == [8, 16, 24]
    best_loss = min(loss for _, loss in result.valid_losses)
    assert result.best_valid_loss == best_loss and result.policy_dir == result.best_dir == tmp_path / "best"
    best = VLAPolicy.from_pretrained(result.best_dir)
    assert mean_loss(best, valid_set, seed=SEED, batch_size=16) == pytest.approx(best_loss, rel=1e-5)

    # The metrics file holds the same numbers.
    records = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    assert [(r["step"], r["loss"]) for r in records if r["split"] == "valid"] == result.valid_losses
    train_records = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in train_records] == [4, 8, 12, 16, 20, 24]
    assert train_records[0]["loss"] == pytest.approx(np.mean(result.train_losses[:4]))
    assert records[-1]["split"] == "summary" and records[-1]["samples_per_s"] > 0
    # Validations at 8, 16, 24: the first half's best is step 8's loss.
    first_loss = result.valid_losses[0][1]
    drop = (first_loss - best_loss) / first_loss
    assert records[-1]["valid_loss_drop_second_half"] == pytest.approx(drop)
    assert ("likely undertrained" in capsys.readouterr().out) == (drop > UNDERTRAINED_DROP)

    # The statistics saved with the policy are the dataset's; the policy acts within the env's bounds.
    for feature in ("action", "state"):
        np.testing.assert_allclose(best.stats[feature]["q99"], stats[feature]["q99"])
    env = make("tabletop/lift", **ENV_KWARGS)
    observation, _ = env.reset(seed=11)
    batch = {"images": {c: observation["images"][c][None] for c in CAMERAS}, "state": observation["state"][None],
             "instruction": [observation["instruction"]]}  # fmt: skip
    actions, _ = best.act(batch, deterministic=True)
    assert actions.shape == (1, 4, 4) and torch.isfinite(actions).all()
    assert (actions >= torch.tensor(env.action_space.low)).all() and (actions <= torch.tensor(env.action_space.high)).all()
    env.close()


def test_without_a_valid_split_sft_says_so_and_returns_the_last_policy(tiny_dataset, tmp_path, capsys):
    episodes, attrs = load_demonstrations(tiny_dataset)
    data = tmp_path / "data"
    write_dataset(data, episodes, "tabletop", attrs["env_kwargs"], valid_fraction=0.0)
    config = SFTConfig(max_steps=2, batch_size=8, valid_every=1, show_progress=False)
    result = run_sft(policy_config("gaussian"), "tabletop", ENV_KWARGS, data, tmp_path / "out", config)
    assert "has an empty 'valid' split" in capsys.readouterr().out
    assert result.valid_losses == [] and result.best_dir is None and result.best_valid_loss is None
    assert result.policy_dir == result.last_dir == tmp_path / "out" / "last"
    assert not (tmp_path / "out" / "best").exists() and (result.last_dir / "model.safetensors").is_file()


def test_missing_and_mismatched_datasets_are_clear_errors(tiny_dataset, tmp_path):
    config = SFTConfig(max_steps=1, show_progress=False)
    missing = tmp_path / "nowhere"
    with pytest.raises(MissingDatasetError, match=rf"{missing / 'demos.hdf5'} does not exist.*vla-rl collect"):
        run_sft(policy_config("gaussian"), "tabletop", ENV_KWARGS, missing, tmp_path / "out", config)
    with pytest.raises(DatasetError, match=r"'front' images of 32x32 but the policy needs 16x16"):
        run_sft(policy_config("gaussian"), "tabletop", {**ENV_KWARGS, "image_size": 16}, tiny_dataset,
                tmp_path / "out", config)  # fmt: skip
    with pytest.raises(DatasetError, match=r"actions of 4 dimensions but the env gives the policy 5"):
        run_sft(policy_config("gaussian"), "tabletop", {**ENV_KWARGS, "control_yaw": True}, tiny_dataset,
                tmp_path / "out", config)  # fmt: skip
    episodes, attrs = load_demonstrations(tiny_dataset)
    for episode in episodes:
        del episode.images["wrist"]
    front_only = tmp_path / "front_only"
    write_dataset(front_only, episodes, "tabletop", {"image_size": 32, "cameras": ["front"]})
    with pytest.raises(DatasetError, match=r"cameras \['front'\] but the policy needs \['front', 'wrist'\] "
                                           r"\(missing in the dataset: \['wrist'\]\)"):  # fmt: skip
        run_sft(policy_config("gaussian"), "tabletop", ENV_KWARGS, front_only, tmp_path / "out", config)
