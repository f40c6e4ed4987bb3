from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from vla_rl.stages.sft.datasets import load_demonstrations, load_statistics
from vla_rl.stages.sft.demos import ChunkDataset, EpisodeStore, write_dataset
from vla_rl.stages.sft.episodes import Episode


def make_episode(rng: np.random.Generator, length: int, task: str, seed: int) -> Episode:
    return Episode(
        task=task,
        instruction=f"do {task}",
        seed=seed,
        success=True,
        images={"front": rng.integers(0, 255, (length, 8, 8, 3), dtype=np.uint8)},
        states=rng.normal(size=(length, 3)).astype(np.float32),
        actions=rng.normal(size=(length, 2)).astype(np.float32),
        rewards=np.zeros(length, np.float32),
        successes=np.arange(length) == length - 1,
        init_state={"task": task, "qpos": [0.1, 0.2]},
    )


def test_write_load_round_trip_and_statistics(tmp_path):
    rng = np.random.default_rng(0)
    episodes = [make_episode(rng, length, "lift" if i % 2 else "reach", i) for i, length in enumerate([5, 7, 3, 9])]
    dataset, stats_path = write_dataset(tmp_path, episodes, "tabletop", {"image_size": 8}, valid_fraction=0.25)
    loaded, attrs = load_demonstrations(tmp_path)
    assert attrs["env_id"] == "tabletop" and attrs["env_kwargs"] == {"image_size": 8} and attrs["total"] == 24
    for original, back in zip(episodes, loaded, strict=True):
        np.testing.assert_array_equal(original.images["front"], back.images["front"])
        np.testing.assert_array_equal(original.actions, back.actions)
        np.testing.assert_array_equal(original.successes, back.successes)
        assert (back.task, back.instruction, back.seed, back.init_state) == (
            original.task, original.instruction, original.seed, original.init_state,
        )  # fmt: skip
    # robomimic layout: data/demo_i/obs/<camera>_image, dones ending each demo, mask filter keys
    with h5py.File(dataset) as file:
        assert file["data/demo_1/obs/front_image"].shape == (7, 8, 8, 3)
        assert file["data/demo_1/dones"][()].tolist() == [0] * 6 + [1]
        train = {n.decode() for n in file["mask/train"][()]}
        valid = {n.decode() for n in file["mask/valid"][()]}
    assert len(valid) == 1 and train | valid == {f"demo_{i}" for i in range(4)} and not train & valid
    assert [e.seed for e in load_demonstrations(dataset, split="valid")[0]] == [int(valid.pop()[5:])]

    stats = load_statistics(stats_path)
    all_actions = np.concatenate([e.actions for e in episodes]).astype(np.float64)
    np.testing.assert_allclose(stats["action"]["mean"], all_actions.mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats["action"]["std"], all_actions.std(0), rtol=1e-12)
    np.testing.assert_allclose(stats["action"]["q99"], np.percentile(all_actions, 99, axis=0), rtol=1e-12)
    np.testing.assert_allclose(stats["state"]["min"], np.concatenate([e.states for e in episodes]).min(0))
    assert stats["num_episodes"] == 4 and stats["num_samples"] == 24


def test_chunk_dataset_pads_past_the_episode_end_and_masks_it():
    rng = np.random.default_rng(1)
    episode = make_episode(rng, 5, "reach", 0)
    dataset = ChunkDataset([episode], chunk_size=3)
    assert len(dataset) == 5
    item = dataset[3]
    np.testing.assert_array_equal(item["action"].numpy(), episode.actions[[3, 4, 4]])
    assert item["action_mask"].tolist() == [True, True, False]
    np.testing.assert_array_equal(item["images"]["front"].numpy(), episode.images["front"][3])
    assert item["instruction"] == "do reach"


def test_episode_store_keeps_finished_episodes_and_knows_their_seeds(tmp_path):
    rng = np.random.default_rng(2)
    store = EpisodeStore(tmp_path)
    store.add(make_episode(rng, 4, "reach", 11))
    store.add(make_episode(rng, 4, "lift", 12))
    (store.folder / "episode_000002.hdf5.tmp").write_bytes(b"half-written")  # an interrupted write
    again = EpisodeStore(tmp_path)
    assert again.count_by_task() == {"reach": 1, "lift": 1}
    assert again.seeds_of_task("lift") == {12}


def test_missing_files_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "demos.hdf5")):
        load_demonstrations(tmp_path)
    with pytest.raises(FileNotFoundError, match="stats.json"):
        load_statistics(tmp_path / "stats.json")
    (tmp_path / "stats.json").write_text(json.dumps({"action": {"mean": [0]}, "state": {}}))
    with pytest.raises(KeyError, match="'action' lacks"):
        load_statistics(tmp_path / "stats.json")
