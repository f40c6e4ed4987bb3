"""LeRobot v3 datasets: our HDF5 -> LeRobot -> SFT gives the same batches (lossless video: bit-exact; h264: within
a stated tolerance), `vla-rl collect collect.format=lerobot` then `vla-rl sft` trains, and a dataset built by hand
in the layout LeRobot documents (list columns, tasks as a pandas index, AV1 video, no vla-rl extras) reads."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from vla_rl.cli import main
from vla_rl.stages.sft.batches import collate_chunks, dataset_files, shuffled_batches
from vla_rl.stages.sft.datasets import load_demonstrations, load_statistics
from vla_rl.stages.sft.demos import ChunkDataset
from vla_rl.stages.sft.lerobot import (
    LeRobotFormatError,
    _write_video,
    load_lerobot_demonstrations,
    write_lerobot_dataset,
)

SFT_TINY = ["policy=flow", "env.tasks=[reach,lift]", "env.kwargs.image_size=32", "policy.embedding_dim=64",
            "policy.vision.backbone_kwargs.channels=[8,16,16,32]", "policy.vision.backbone_kwargs.stem_width=8",
            "sft.batch_size=8", "sft.max_steps=4", "sft.valid_every=2", "sft.warmup_steps=1", "sft.num_threads=1",
            "sft.show_progress=false"]  # fmt: skip


def as_lerobot(tiny_dataset, folder, codec):
    episodes, attrs = load_demonstrations(tiny_dataset)
    return write_lerobot_dataset(folder, episodes, attrs["env_id"], attrs["env_kwargs"], fps=10.0,
                                 action_names=("dx", "dy", "dz", "gripper"), robot_type="tabletop",
                                 valid_fraction=float(attrs["valid_fraction"]), seed=0, codec=codec)  # fmt: skip


def test_hdf5_to_lerobot_to_sft_gives_the_same_batches(tiny_dataset, tmp_path):
    root = as_lerobot(tiny_dataset, tmp_path / "lerobot", "lossless")
    for split in ("train", "valid"):
        ours, _ = load_demonstrations(tiny_dataset, split=split, split_seed=2)
        theirs, attrs = load_demonstrations(root, split=split, split_seed=2)
        assert [e.seed for e in theirs] == [e.seed for e in ours] and attrs["format"] == "lerobot/v3.0"
        for a, b in zip(ours, theirs, strict=True):
            assert (a.task, a.instruction, a.success, a.init_state) == (b.task, b.instruction, b.success, b.init_state)
            for name in ("states", "actions", "rewards", "successes"):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
            for camera in a.images:
                np.testing.assert_array_equal(a.images[camera], b.images[camera])  # lossless: bit for bit
    ours_set, theirs_set = ChunkDataset(ours, 4), ChunkDataset(theirs, 4)
    batches = zip(shuffled_batches(ours_set, 4, ["front", "wrist"], torch.Generator().manual_seed(0)),
                  shuffled_batches(theirs_set, 4, ["front", "wrist"], torch.Generator().manual_seed(0)), strict=True)  # fmt: skip
    for _ in range(3):
        a, b = next(batches)
        assert a["instruction"] == b["instruction"]
        for key in ("state", "action", "action_mask"):
            assert torch.equal(a[key], b[key])
        assert all(torch.equal(a["images"][c], b["images"][c]) for c in ("front", "wrist"))
    hdf5_stats = load_statistics(dataset_files(tiny_dataset)[1])
    lerobot_stats = load_statistics(dataset_files(root)[1])
    for feature in ("action", "state"):
        for key in ("mean", "std", "min", "max", "q01", "q99"):
            np.testing.assert_allclose(lerobot_stats[feature][key], hdf5_stats[feature][key], rtol=1e-12)
    # without a split seed, the validation episodes are those of demos.hdf5's mask
    assert [e.seed for e in load_demonstrations(root, split="valid")[0]] == \
        [e.seed for e in load_demonstrations(tiny_dataset, split="valid")[0]]  # fmt: skip


def test_h264_video_keeps_images_within_the_stated_tolerance(tiny_dataset, tmp_path):
    """yuv420p h264 at crf 18 is lossy, chroma most (one colour sample per 2x2 pixels, which on 32 px frames
    blurs every object edge): the stated tolerance on rendered frames is a median absolute error of at most 3 of
    255, a mean under 6, and a luma (brightness) mean error under 3. States and actions travel exactly."""
    root = as_lerobot(tiny_dataset, tmp_path / "lerobot", "h264")
    ours, _ = load_demonstrations(tiny_dataset)
    theirs, _ = load_lerobot_demonstrations(root)
    pairs = [(a.images[c].astype(float), b.images[c].astype(float)) for a, b in zip(ours, theirs, strict=True)
             for c in a.images]  # fmt: skip
    errors = np.concatenate([np.abs(a - b).ravel() for a, b in pairs])
    luma = np.array([0.299, 0.587, 0.114])
    luma_error = np.concatenate([np.abs(a @ luma - b @ luma).ravel() for a, b in pairs]).mean()
    assert np.median(errors) <= 3 and errors.mean() < 6 and luma_error < 3, (np.median(errors), errors.mean(), luma_error)
    assert errors.max() > 0  # it is lossy: the tolerance is needed
    np.testing.assert_array_equal(np.concatenate([e.actions for e in ours]), np.concatenate([e.actions for e in theirs]))


def test_collect_writes_lerobot_and_sft_trains_on_it(tiny_dataset, tmp_path, capsys):
    folder = tmp_path / "demos"
    shutil.copytree(tiny_dataset / "episodes", folder / "episodes")  # the stored episodes: nothing to render again
    assert main(["collect", "env.tasks=[reach,lift]", "env.kwargs.image_size=32", "collect.episodes_per_task=3",
                 "collect.noise_std=0.005", f"collect.output={folder}", "collect.format=lerobot",
                 "collect.video_codec=lossless"]) == 0  # fmt: skip
    assert not (folder / "demos.hdf5").exists()
    info = json.loads((folder / "lerobot" / "meta" / "info.json").read_text())
    assert info["fps"] == 10.0 and info["total_episodes"] == 6 and info["robot_type"] == "tabletop"
    assert info["features"]["action"]["names"] == ["dx", "dy", "dz", "gripper"]
    assert info["features"]["observation.images.front"]["shape"] == [32, 32, 3]
    stats = json.loads((folder / "lerobot" / "meta" / "stats.json").read_text())
    assert np.asarray(stats["observation.images.front"]["mean"]).shape == (3, 1, 1)
    output = tmp_path / "sft"
    assert main(["sft", *SFT_TINY, f"sft.dataset={folder}", f"sft.output={output}", "seed=2"]) == 0
    assert (output / "best" / "model.safetensors").is_file()
    records = [json.loads(line) for line in (output / "sft_metrics.jsonl").read_text().splitlines()]
    assert records[-1]["split"] == "summary" and records[-1]["num_steps"] == 4


# ------------------------------------------------------------------------------ the layout as LeRobot documents it
def official_layout(root, fps=15):
    """Two episodes written by hand after LeRobot's v3 documentation: list<float> columns, tasks.parquet with the
    task string as a (pandas) index column, episode rows with their video timestamps, AV1 video, image stats of
    shape (3, 1, 1), no quantiles, nothing vla-rl-specific."""
    lengths, key = [3, 2], "observation.images.top"
    rng = np.random.default_rng(0)
    state = rng.normal(size=(5, 2)).astype(np.float32)
    action = rng.normal(size=(5, 3)).astype(np.float32)
    colours = np.array([[200, 30, 30], [30, 200, 30], [30, 30, 200], [220, 220, 40], [40, 220, 220]], np.uint8)
    frames = np.broadcast_to(colours[:, None, None, :], (5, 16, 16, 3)).copy()
    (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    (root / "data" / "chunk-000").mkdir(parents=True)
    pq.write_table(pa.table({
        "observation.state": pa.array(state.tolist(), pa.list_(pa.float32())),
        "action": pa.array(action.tolist(), pa.list_(pa.float32())),
        "timestamp": pa.array([0, 1 / fps, 2 / fps, 0, 1 / fps], pa.float32()),
        "frame_index": pa.array([0, 1, 2, 0, 1], pa.int64()), "episode_index": pa.array([0, 0, 0, 1, 1], pa.int64()),
        "index": pa.array(range(5), pa.int64()), "task_index": pa.array([0, 0, 0, 1, 1], pa.int64()),
    }), root / "data" / "chunk-000" / "file-000.parquet")  # fmt: skip
    pq.write_table(pa.table({"task_index": pa.array([0, 1], pa.int64()), "task": ["push the T", "grab the cube"]}),
                   root / "meta" / "tasks.parquet")  # fmt: skip
    pq.write_table(pa.table({
        "episode_index": [0, 1], "tasks": [["push the T"], ["grab the cube"]], "length": lengths,
        "data/chunk_index": [0, 0], "data/file_index": [0, 0], "dataset_from_index": [0, 3], "dataset_to_index": [3, 5],
        f"videos/{key}/chunk_index": [0, 0], f"videos/{key}/file_index": [0, 0],
        f"videos/{key}/from_timestamp": [0.0, 3 / fps], f"videos/{key}/to_timestamp": [3 / fps, 5 / fps],
        "meta/episodes/chunk_index": [0, 0], "meta/episodes/file_index": [0, 0],
    }), root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")  # fmt: skip
    _write_video(root / "videos" / key / "chunk-000" / "file-000.mp4", frames, Fraction(fps), "av1")
    features = {
        key: {"dtype": "video", "shape": [3, 16, 16], "names": ["c", "h", "w"],
              "info": {"video.fps": fps, "video.codec": "av1", "video.pix_fmt": "yuv420p"}},
        "observation.state": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
        "action": {"dtype": "float32", "shape": [3], "names": None},
        **{name: {"dtype": dtype, "shape": [1], "names": None} for name, dtype in (
            ("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"), ("index", "int64"),
            ("task_index", "int64"))},
    }  # fmt: skip
    (root / "meta" / "info.json").write_text(json.dumps({
        "codebase_version": "v3.0", "robot_type": None, "total_episodes": 2, "total_frames": 5, "total_tasks": 2,
        "chunks_size": 1000, "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "fps": fps,
        "splits": {"train": "0:2"}, "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4", "features": features}))
    stats = {name: {"min": v.min(0).tolist(), "max": v.max(0).tolist(), "mean": v.mean(0).tolist(),
                    "std": v.std(0).tolist(), "count": [5]} for name, v in (("observation.state", state), ("action", action))}
    stats[key] = {"mean": [[[0.5]], [[0.5]], [[0.5]]], "std": [[[0.3]], [[0.3]], [[0.3]]], "min": [[[0.0]]] * 3,
                  "max": [[[1.0]]] * 3, "count": [5]}  # fmt: skip
    (root / "meta" / "stats.json").write_text(json.dumps(stats))
    return state, action, frames


def test_a_dataset_in_the_official_layout_reads(tmp_path):
    root = tmp_path / "pusht_like"
    state, action, frames = official_layout(root)
    episodes, attrs = load_demonstrations(root)
    assert [len(e) for e in episodes] == [3, 2] and attrs["fps"] == 15.0 and attrs["env_id"] == ""
    assert [e.instruction for e in episodes] == ["push the T", "grab the cube"] and episodes[1].task == "grab the cube"
    np.testing.assert_array_equal(np.concatenate([e.states for e in episodes]), state)
    np.testing.assert_array_equal(np.concatenate([e.actions for e in episodes]), action)
    decoded = np.concatenate([e.images["top"] for e in episodes]).astype(int)
    assert np.abs(decoded - frames).mean() < 3  # flat colours through lossy AV1: the frame order and colour survive
    assert [e.success for e in episodes] == [False, False] and episodes[0].rewards.tolist() == [0, 0, 0]
    stats = load_statistics(root / "meta" / "stats.json")
    np.testing.assert_allclose(stats["state"]["mean"], state.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["q99"], np.quantile(action.astype(np.float64), 0.99, axis=0), rtol=1e-6)
    train, _ = load_demonstrations(root, split="train", split_seed=0)  # no valid split in the file: 0.1 of 2 rounds to 0
    assert len(train) == 2


def test_other_versions_and_broken_layouts_are_named(tmp_path):
    root = tmp_path / "old"
    official_layout(root)
    info = json.loads((root / "meta" / "info.json").read_text())
    (root / "meta" / "info.json").write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    with pytest.raises(LeRobotFormatError, match=r"codebase_version 'v2.1'.*convert_dataset_v21_to_v30"):
        load_demonstrations(root)
    (root / "meta" / "info.json").write_text(json.dumps(info))
    (root / "videos" / "observation.images.top" / "chunk-000" / "file-000.mp4").unlink()
    with pytest.raises(LeRobotFormatError, match=r"video .*file-000.mp4 does not exist"):
        load_demonstrations(root)
    del info["features"]["action"]
    (root / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(LeRobotFormatError, match=r"no feature 'action'"):
        load_demonstrations(root)


def test_collate_of_lerobot_episodes_is_the_policy_batch(tmp_path):
    root = tmp_path / "pusht_like"
    official_layout(root)
    episodes, _ = load_demonstrations(root)
    batch = collate_chunks([ChunkDataset(episodes, 2)[i] for i in range(3)], ["top"])
    assert batch["images"]["top"].shape == (3, 16, 16, 3) and batch["action"].shape == (3, 2, 3)


# ------------------------------------------------------------------------------ a dataset written by LeRobot itself
FIXTURES = Path(__file__).parent / "fixtures"


def test_a_dataset_written_by_lerobot_itself_reads_and_trains_batches():
    """tests/sft/fixtures/lerobot_v3_official: written by LeRobot's LeRobotDataset (lerobot-dataset 0.4.4, v3.0,
    AV1 video; fixtures/make_lerobot_v3_official.py). Flat-colour frames come back within 4 of 255 after AV1."""
    root = FIXTURES / "lerobot_v3_official"
    record = json.loads((FIXTURES / "lerobot_v3_official_frames.json").read_text())
    episodes, attrs = load_demonstrations(root)
    assert [len(e) for e in episodes] == [3, 2] and attrs["fps"] == 15.0
    assert [e.instruction for e in episodes for _ in range(len(e))] == record["tasks"]
    np.testing.assert_array_equal(np.concatenate([e.states for e in episodes]), np.float32(record["states"]))
    np.testing.assert_array_equal(np.concatenate([e.actions for e in episodes]), np.float32(record["actions"]))
    frames = np.concatenate([e.images["top"] for e in episodes]).astype(int)
    assert np.abs(frames - np.array(record["colours"])[:, None, None, :]).max() <= 4
    stats = load_statistics(dataset_files(root)[1])
    np.testing.assert_allclose(stats["action"]["mean"], np.float32(record["actions"]).mean(0), rtol=1e-5)
    batch = collate_chunks([ChunkDataset(episodes, 2)[i] for i in range(5)], ["top"])
    assert batch["images"]["top"].shape == (5, 64, 64, 3) and batch["action_mask"].tolist()[2] == [True, False]


def test_what_vla_rl_writes_has_every_part_lerobot_writes(tiny_dataset, tmp_path):
    """The same files, info.json keys, feature fields and episode columns (less the statistics of features vla-rl
    does not compute per episode) as the dataset LeRobot wrote."""
    ours = as_lerobot(tiny_dataset, tmp_path / "lerobot", "h264")
    theirs = FIXTURES / "lerobot_v3_official"

    def files(root):
        return sorted(str(p.relative_to(root)).replace("observation.images.top", "CAM").replace("observation.images.front", "CAM")
                      for p in root.rglob("*") if p.is_file() and "wrist" not in str(p))  # fmt: skip

    assert files(ours) == files(theirs)
    info, their_info = (json.loads((r / "meta" / "info.json").read_text()) for r in (ours, theirs))
    assert set(their_info) <= set(info) and set(info) - set(their_info) == {"vla_rl"}
    for key, feature in their_info["features"].items():
        mine = info["features"][key.replace(".top", ".front")]
        assert set(feature) <= set(mine) and mine["dtype"] == feature["dtype"], key
    episodes_file = "meta/episodes/chunk-000/file-000.parquet"
    their_columns = {c.replace(".top", ".front") for c in pq.read_table(theirs / episodes_file).column_names
                     if not c.startswith("stats/")}  # fmt: skip
    assert their_columns <= set(pq.read_table(ours / episodes_file).column_names)
    their_tasks = pq.read_table(theirs / "meta" / "tasks.parquet").schema.metadata[b"pandas"]
    our_tasks = pq.read_table(ours / "meta" / "tasks.parquet").schema.metadata[b"pandas"]
    assert json.loads(their_tasks)["index_columns"] and json.loads(our_tasks)["index_columns"] == ["task"]
