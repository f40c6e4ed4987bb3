"""Demonstrations in LeRobot's dataset layout, version 3.0 (read and write).

The layout (docs/datasets.md has the mapping to vla-rl's episodes)::

    meta/info.json                                         codebase_version "v3.0", fps, features, path templates
    meta/stats.json                                        per feature: min, max, mean, std, count (+ q01, q99)
    meta/tasks.parquet                                     task (the language instruction) -> task_index
    meta/episodes/chunk-000/file-000.parquet               one row per episode: length, tasks, where its rows
                                                           and video frames are, its statistics
    data/chunk-000/file-000.parquet                        one row per frame: observation.state, action,
                                                           timestamp, frame_index, episode_index, index, task_index
    videos/observation.images.<camera>/chunk-000/file-000.mp4   the frames of every episode, one after another

Videos are encoded and decoded with PyAV (LeRobot's ``pyav`` video backend; the ``lerobot`` extra installs it).
Codecs: ``h264`` (libx264, yuv420p, crf 18: what players and LeRobot's visualiser show), ``av1`` (libsvtav1,
yuv420p: LeRobot's own default) and ``lossless`` (libx264rgb at qp 0: the decoded frames equal the rendered
ones bit for bit). Arrays are read from Parquet with pyarrow; nothing of LeRobot itself is imported.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from vla_rl.runtime.files import write_json_atomic
from vla_rl.stages.sft.episodes import Episode, split_names
from vla_rl.stages.sft.statistics import feature_statistics

CODEBASE_VERSION = "v3.0"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
IMAGE_PREFIX = "observation.images."
STATE_KEY = "observation.state"
ACTION_KEY = "action"
#: Where ``vla-rl collect`` writes the layout inside ``collect.output`` (a dataset root of its own).
LEROBOT_FOLDER = "lerobot"
#: codec name -> (PyAV encoder, pixel format, encoder options)
VIDEO_CODECS = {
    "h264": ("libx264", "yuv420p", {"crf": "18"}),
    "av1": ("libsvtav1", "yuv420p", {}),
    "lossless": ("libx264rgb", "rgb24", {"qp": "0"}),
}
#: LeRobot datasets carry no validation split; SFT holds out this fraction of episodes unless the file says.
DEFAULT_VALID_FRACTION = 0.1


class LeRobotFormatError(ValueError):
    """A folder that is not a LeRobot v3 dataset, or one vla-rl cannot train on; the message names the file."""


def _dependencies():
    try:
        import av
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as error:
        raise ImportError(f"LeRobot datasets need pyarrow and av: pip install 'vla-rl[lerobot]' ({error})") from None
    return av, pa, pq


def is_lerobot_dataset(path: str | Path) -> bool:
    """Whether ``path`` is the root of a LeRobot dataset (it holds ``meta/info.json``)."""
    return (Path(path) / "meta" / "info.json").is_file()


def lerobot_root(path: str | Path) -> Path | None:
    """The LeRobot dataset at ``path``, or in the ``lerobot/`` folder that ``vla-rl collect`` writes there; None."""
    path = Path(path)
    for candidate in (path, path / LEROBOT_FOLDER):
        if is_lerobot_dataset(candidate):
            return candidate
    return None


# ---------------------------------------------------------------------------------------------- writing
def _write_video(path: Path, frames: np.ndarray, fps: Fraction, codec: str) -> None:
    """Encode ``frames`` uint8 ``(N, H, W, 3)`` into the mp4 ``path``, frame i at time i / fps."""
    av, _, _ = _dependencies()
    encoder, pixel_format, options = VIDEO_CODECS[codec]
    height, width = frames.shape[1:3]
    if pixel_format == "yuv420p" and (height % 2 or width % 2):
        raise ValueError(f"video codec {codec!r} (yuv420p) needs even image sizes, got {height}x{width}; use "
                         "collect.video_codec=lossless or an even image size")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w", format="mp4") as container:
        stream = container.add_stream(encoder, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, pixel_format
        stream.options = dict(options)
        for index, image in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode())


def _image_statistics(frames: np.ndarray) -> dict[str, Any]:
    """Per-channel statistics of uint8 ``(N, H, W, 3)`` frames in [0, 1], shaped (3, 1, 1) as LeRobot stores them."""
    values = frames.reshape(-1, 3).astype(np.float64) / 255.0
    shaped = lambda v: np.asarray(v).reshape(3, 1, 1).tolist()  # noqa: E731
    return {"min": shaped(values.min(0)), "max": shaped(values.max(0)), "mean": shaped(values.mean(0)),
            "std": shaped(values.std(0)), "count": [int(frames.shape[0])]}  # fmt: skip


def _vector_statistics(values: np.ndarray) -> dict[str, Any]:
    stats = feature_statistics(values)
    return {**stats, "count": [int(len(values))]}


def write_lerobot_dataset(
    root: str | Path,
    episodes: Sequence[Episode],
    env_id: str,
    env_kwargs: dict[str, Any],
    fps: float,
    action_names: Sequence[str] | None = None,
    robot_type: str | None = None,
    valid_fraction: float = 0.1,
    seed: int = 0,
    codec: str = "h264",
) -> Path:
    """Write ``episodes`` as a LeRobot v3 dataset at ``root`` (built in a temporary folder, then moved there).

    The language instruction of an episode is its LeRobot task; the vla-rl task name, seed, success and
    initial state ride along in the episodes table (``vla_rl/...`` columns) and the settings in
    ``info.json["vla_rl"]``, so that reading it back gives the episodes and the split that ``demos.hdf5`` gives.
    """
    _, pa, pq = _dependencies()
    if not episodes:
        raise ValueError(f"no episodes to write to {root}")
    if codec not in VIDEO_CODECS:
        raise ValueError(f"video codec {codec!r} is not one of {', '.join(VIDEO_CODECS)}")
    root = Path(root)
    staging = root.with_name(f"{root.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    fps_fraction = Fraction(str(fps)).limit_denominator(1001)
    cameras = list(episodes[0].images)
    instructions = sorted({episode.instruction for episode in episodes})
    task_index = {text: index for index, text in enumerate(instructions)}
    lengths = [len(episode) for episode in episodes]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    total = int(sum(lengths))
    names = [f"demo_{i}" for i in range(len(episodes))]
    valid = split_names(names, valid_fraction, seed)["valid"]

    # data/: one row per frame
    states = np.concatenate([e.states for e in episodes]).astype(np.float32)
    actions = np.concatenate([e.actions for e in episodes]).astype(np.float32)
    frame_index = np.concatenate([np.arange(n) for n in lengths]).astype(np.int64)
    episode_index = np.repeat(np.arange(len(episodes)), lengths).astype(np.int64)
    dones = np.concatenate([np.arange(n) == n - 1 for n in lengths])

    def fixed(values: np.ndarray):
        return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])

    table = pa.table({
        STATE_KEY: fixed(states),
        ACTION_KEY: fixed(actions),
        "timestamp": pa.array((frame_index / float(fps_fraction)).astype(np.float32)),
        "frame_index": pa.array(frame_index),
        "episode_index": pa.array(episode_index),
        "index": pa.array(np.arange(total, dtype=np.int64)),
        "task_index": pa.array(np.repeat([task_index[e.instruction] for e in episodes], lengths).astype(np.int64)),
        "next.reward": pa.array(np.concatenate([e.rewards for e in episodes]).astype(np.float32)),
        "next.done": pa.array(dones),
        "next.success": pa.array(np.concatenate([e.successes for e in episodes]).astype(bool)),
    })  # fmt: skip
    data_path = staging / DATA_PATH.format(chunk_index=0, file_index=0)
    data_path.parent.mkdir(parents=True)
    pq.write_table(table, data_path)

    # videos/: every episode's frames one after another, per camera
    features: dict[str, Any] = {}
    stats: dict[str, Any] = {}
    encoder, pixel_format, _ = VIDEO_CODECS[codec]
    for camera in cameras:
        key = IMAGE_PREFIX + camera
        frames = np.concatenate([e.images[camera] for e in episodes]).astype(np.uint8)
        _write_video(staging / VIDEO_PATH.format(video_key=key, chunk_index=0, file_index=0), frames, fps_fraction, codec)
        height, width = frames.shape[1:3]
        features[key] = {"dtype": "video", "shape": [height, width, 3], "names": ["height", "width", "channels"],
                         "info": {"video.height": height, "video.width": width, "video.codec": encoder,
                                  "video.pix_fmt": pixel_format, "video.is_depth_map": False,
                                  "video.fps": float(fps_fraction), "video.channels": 3, "has_audio": False}}  # fmt: skip
        stats[key] = _image_statistics(frames)
    features[STATE_KEY] = {"dtype": "float32", "shape": [states.shape[1]], "names": None}
    features[ACTION_KEY] = {"dtype": "float32", "shape": [actions.shape[1]],
                            "names": list(action_names) if action_names else None}  # fmt: skip
    for key, dtype in (("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"),
                       ("index", "int64"), ("task_index", "int64"), ("next.reward", "float32"), ("next.done", "bool"),
                       ("next.success", "bool")):  # fmt: skip
        features[key] = {"dtype": dtype, "shape": [1], "names": None}
    stats[STATE_KEY] = _vector_statistics(states)
    stats[ACTION_KEY] = _vector_statistics(actions)
    stats["next.reward"] = _vector_statistics(table["next.reward"].to_numpy()[:, None])

    # meta/: tasks, episodes, info, stats
    task_table = pa.table({"task": pa.array(instructions, pa.string()),
                           "task_index": pa.array(np.arange(len(instructions), dtype=np.int64))})  # fmt: skip
    pandas_index = {"index_columns": ["task"], "column_indexes": [], "columns": [
        {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
         "metadata": None}]}  # fmt: skip
    task_table = task_table.replace_schema_metadata({b"pandas": json.dumps(pandas_index).encode()})
    (staging / "meta").mkdir(parents=True, exist_ok=True)
    pq.write_table(task_table, staging / "meta" / "tasks.parquet")
    rows: dict[str, list[Any]] = {
        "episode_index": list(range(len(episodes))),
        "tasks": [[e.instruction] for e in episodes],
        "length": lengths,
        "data/chunk_index": [0] * len(episodes),
        "data/file_index": [0] * len(episodes),
        "dataset_from_index": starts.tolist(),
        "dataset_to_index": (starts + np.asarray(lengths)).tolist(),
        "meta/episodes/chunk_index": [0] * len(episodes),
        "meta/episodes/file_index": [0] * len(episodes),
    }
    for camera in cameras:
        key = IMAGE_PREFIX + camera
        rows[f"videos/{key}/chunk_index"] = [0] * len(episodes)
        rows[f"videos/{key}/file_index"] = [0] * len(episodes)
        rows[f"videos/{key}/from_timestamp"] = [float(s / fps_fraction) for s in starts]
        rows[f"videos/{key}/to_timestamp"] = [float((s + n) / fps_fraction) for s, n in zip(starts, lengths, strict=True)]
    for key, values in ((STATE_KEY, [e.states for e in episodes]), (ACTION_KEY, [e.actions for e in episodes])):
        per_episode = [_vector_statistics(v) for v in values]
        for stat in ("min", "max", "mean", "std", "count", "q01", "q99"):
            rows[f"stats/{key}/{stat}"] = [s[stat] for s in per_episode]
    rows["vla_rl/task"] = [e.task for e in episodes]
    rows["vla_rl/seed"] = [int(e.seed) for e in episodes]
    rows["vla_rl/success"] = [bool(e.success) for e in episodes]
    rows["vla_rl/init_state"] = [json.dumps(e.init_state) for e in episodes]
    episodes_path = staging / EPISODES_PATH.format(chunk_index=0, file_index=0)
    episodes_path.parent.mkdir(parents=True)
    pq.write_table(pa.table(rows), episodes_path)
    info = {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(episodes),
        "total_frames": total,
        "total_tasks": len(instructions),
        "chunks_size": 1000,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "fps": float(fps_fraction),
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH,
        "features": features,
        "vla_rl": {"env_id": env_id, "env_kwargs": env_kwargs, "valid_fraction": float(valid_fraction),
                   "valid_episodes": sorted(int(n.split("_")[1]) for n in valid)},  # fmt: skip
    }
    (staging / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    write_json_atomic(staging / "meta" / "stats.json", stats)
    if root.exists():
        shutil.rmtree(root)
    os.replace(staging, root)
    return root


# ---------------------------------------------------------------------------------------------- reading
def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise LeRobotFormatError(f"{path} does not exist: the folder is not a LeRobot v3 dataset")
    return json.loads(path.read_text())


def _column(table: Any, name: str, where: Path) -> np.ndarray:
    """A Parquet column as a numpy array; list columns (vectors) become ``(N, D)``."""
    if name not in table.column_names:
        raise LeRobotFormatError(f"{where} has no column {name!r}; columns: {', '.join(table.column_names)}")
    column = table[name].combine_chunks()
    import pyarrow as pa

    if pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type) or pa.types.is_large_list(column.type):
        flat = column.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(column), -1) if len(column) else flat.reshape(0, 0)
    return column.to_numpy(zero_copy_only=False)


def decode_video(path: Path, fps: float) -> dict[int, np.ndarray]:
    """Every frame of the mp4 ``path`` by its frame number (its timestamp times ``fps``, rounded)."""
    av, _, _ = _dependencies()
    if not path.is_file():
        raise LeRobotFormatError(f"video {path} does not exist")
    frames: dict[int, np.ndarray] = {}
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        for frame in container.decode(stream):
            seconds = float(frame.pts * stream.time_base) if frame.pts is not None else float(frame.time)
            frames[int(round(seconds * fps))] = frame.to_ndarray(format="rgb24")
    return frames


def _decode_image(cell: Any, where: str) -> np.ndarray:
    """An ``image`` feature's cell (``{"bytes": PNG/JPEG, "path": ...}``) as uint8 (H, W, 3)."""
    import cv2

    data = cell.get("bytes") if isinstance(cell, dict) else cell
    if not data:
        raise LeRobotFormatError(f"{where}: an image cell without bytes")
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def read_lerobot_info(root: Path) -> dict[str, Any]:
    """``meta/info.json`` of a v3 dataset.

    Raises:
        LeRobotFormatError: no info.json, another codebase version, or no ``observation.state`` / ``action``.
    """
    info = _read_json(root / "meta" / "info.json")
    version = str(info.get("codebase_version", ""))
    if not version.startswith("v3"):
        raise LeRobotFormatError(f"{root / 'meta/info.json'}: codebase_version {version!r}; vla-rl reads v3.0 "
                                 "datasets (convert with LeRobot's convert_dataset_v21_to_v30)")  # fmt: skip
    for key in (STATE_KEY, ACTION_KEY):
        if key not in info.get("features", {}):
            raise LeRobotFormatError(f"{root / 'meta/info.json'} has no feature {key!r}; features: "
                                     f"{', '.join(info.get('features', {}))}")  # fmt: skip
    return info


def load_lerobot_demonstrations(
    root: str | Path, split: str | None = None, split_seed: int | None = None
) -> tuple[list[Episode], dict[str, Any]]:
    """The episodes of a LeRobot v3 dataset as :func:`vla_rl.stages.sft.datasets.load_demonstrations` returns them.

    Cameras are the features ``observation.images.<camera>`` (``video`` or ``image``); the state is
    ``observation.state``, the actions ``action``; the instruction is the episode's first task. ``split`` and
    ``split_seed`` work as for ``demos.hdf5``: the split is drawn over the episodes (named ``demo_<episode
    index>``) with the dataset's ``valid_fraction`` (0.1 for datasets from elsewhere); without ``split_seed``
    the validation episodes recorded by ``vla-rl collect`` (none for datasets from elsewhere) are used.
    """
    _, _, pq = _dependencies()
    root = Path(root)
    info = read_lerobot_info(root)
    fps = float(info["fps"])
    features = info["features"]
    extra = info.get("vla_rl", {})
    cameras = [key[len(IMAGE_PREFIX) :] for key, feature in features.items()
               if key.startswith(IMAGE_PREFIX) and feature.get("dtype") in ("video", "image")]  # fmt: skip
    tasks_path = root / "meta" / "tasks.parquet"
    if not tasks_path.is_file():
        raise LeRobotFormatError(f"{tasks_path} does not exist: the folder is not a LeRobot v3 dataset")
    task_table = pq.read_table(tasks_path)
    task_column = "task" if "task" in task_table.column_names else "__index_level_0__"
    task_of = dict(zip(_column(task_table, "task_index", tasks_path).tolist(),
                       task_table[task_column].to_pylist(), strict=True))  # fmt: skip

    episode_files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    if not episode_files:
        raise LeRobotFormatError(f"{root / 'meta/episodes'} holds no chunk-*/file-*.parquet")
    episode_rows: list[dict[str, Any]] = []
    for path in episode_files:
        episode_rows.extend(pq.read_table(path).to_pylist())
    episode_rows.sort(key=lambda row: int(row["episode_index"]))

    data: dict[tuple[int, int], dict[str, np.ndarray]] = {}
    videos: dict[Path, dict[int, np.ndarray]] = {}
    names = [f"demo_{int(row['episode_index'])}" for row in episode_rows]
    chosen = set(names)
    if split is not None:
        valid_fraction = float(extra.get("valid_fraction", DEFAULT_VALID_FRACTION))
        if split not in ("train", "valid"):
            raise KeyError(f"split={split!r}; the splits are 'train' and 'valid'")
        if split_seed is not None:
            chosen = set(split_names(names, valid_fraction, split_seed)[split])
        else:
            valid = {f"demo_{i}" for i in extra.get("valid_episodes", [])}
            chosen = valid if split == "valid" else set(names) - valid
    episodes = []
    for name, row in zip(names, episode_rows, strict=True):
        if name not in chosen:
            continue
        file_key = (int(row.get("data/chunk_index", 0)), int(row.get("data/file_index", 0)))
        if file_key not in data:
            path = root / info.get("data_path", DATA_PATH).format(chunk_index=file_key[0], file_index=file_key[1])
            if not path.is_file():
                raise LeRobotFormatError(f"data file {path} (episode {row['episode_index']}) does not exist")
            table = pq.read_table(path)
            columns = {key: _column(table, key, path) for key in (STATE_KEY, ACTION_KEY, "index")}
            for key in ("next.reward", "next.success"):
                if key in table.column_names:
                    columns[key] = _column(table, key, path)
            for camera in cameras:
                if features[IMAGE_PREFIX + camera]["dtype"] == "image":
                    columns[IMAGE_PREFIX + camera] = table[IMAGE_PREFIX + camera].to_pylist()
            data[file_key] = columns
        columns = data[file_key]
        start, stop = int(row["dataset_from_index"]), int(row["dataset_to_index"])
        rows = np.flatnonzero((columns["index"] >= start) & (columns["index"] < stop))
        rows = rows[np.argsort(columns["index"][rows])]
        if len(rows) != stop - start:
            raise LeRobotFormatError(f"episode {row['episode_index']}: rows {start}..{stop} of its data file are "
                                     f"not all there ({len(rows)} found)")  # fmt: skip
        images = {}
        for camera in cameras:
            key = IMAGE_PREFIX + camera
            if features[key]["dtype"] == "image":
                images[camera] = np.stack([_decode_image(columns[key][i], f"{key} row {i}") for i in rows])
                continue
            path = root / info.get("video_path", VIDEO_PATH).format(
                video_key=key, chunk_index=int(row[f"videos/{key}/chunk_index"]),
                file_index=int(row[f"videos/{key}/file_index"]))  # fmt: skip
            if path not in videos:
                videos[path] = decode_video(path, fps)
            first = int(round(float(row[f"videos/{key}/from_timestamp"]) * fps))
            missing = [first + t for t in range(len(rows)) if first + t not in videos[path]]
            if missing:
                raise LeRobotFormatError(f"video {path} lacks frames {missing[:5]} of episode {row['episode_index']}")
            images[camera] = np.stack([videos[path][first + t] for t in range(len(rows))])
        success_column = columns.get("next.success")
        successes = success_column[rows].astype(bool) if success_column is not None else np.zeros(len(rows), bool)
        reward_column = columns.get("next.reward")
        rewards = reward_column[rows].astype(np.float32) if reward_column is not None else np.zeros(len(rows), np.float32)
        tasks = list(row.get("tasks") or [])
        instruction = str(tasks[0]) if tasks else str(task_of.get(0, ""))
        episodes.append(Episode(
            task=str(row.get("vla_rl/task") or instruction),
            instruction=instruction,
            seed=int(row.get("vla_rl/seed", row["episode_index"])),
            success=bool(row.get("vla_rl/success", bool(successes.any()))),
            images=images,
            states=columns[STATE_KEY][rows].astype(np.float32),
            actions=columns[ACTION_KEY][rows].astype(np.float32),
            rewards=rewards,
            successes=successes,
            init_state=json.loads(row["vla_rl/init_state"]) if row.get("vla_rl/init_state") else None,
        ))  # fmt: skip
    attrs = {"env_id": extra.get("env_id", ""), "env_kwargs": dict(extra.get("env_kwargs", {})),
             "total": int(info.get("total_frames", 0)), "format": f"lerobot/{info['codebase_version']}",
             "valid_fraction": float(extra.get("valid_fraction", DEFAULT_VALID_FRACTION)), "fps": fps}  # fmt: skip
    return episodes, attrs


def lerobot_statistics(root: str | Path) -> dict[str, Any]:
    """``meta/stats.json`` as vla-rl's statistics (``action``, ``state``: mean, std, min, max, q01, q99).

    Quantiles that the file lacks (LeRobot writes them only in newer versions) are computed from the data.
    """
    root = Path(root)
    stats = _read_json(root / "meta" / "stats.json")
    mapped: dict[str, Any] = {}
    computed: dict[str, Any] | None = None
    for ours, theirs in (("action", ACTION_KEY), ("state", STATE_KEY)):
        if theirs not in stats:
            raise LeRobotFormatError(f"{root / 'meta/stats.json'} has no statistics of {theirs!r}")
        entry = {key: np.asarray(value, np.float64).reshape(-1).tolist() for key, value in stats[theirs].items()
                 if key in ("mean", "std", "min", "max", "q01", "q99")}  # fmt: skip
        if "q01" not in entry or "q99" not in entry:
            if computed is None:
                episodes, _ = load_lerobot_demonstrations(root)
                computed = {"action": feature_statistics(np.concatenate([e.actions for e in episodes])),
                            "state": feature_statistics(np.concatenate([e.states for e in episodes]))}  # fmt: skip
            entry.update({k: computed[ours][k] for k in ("q01", "q99")})
        mapped[ours] = entry
    info = read_lerobot_info(root)
    mapped["num_episodes"] = int(info.get("total_episodes", 0))
    mapped["num_samples"] = int(info.get("total_frames", 0))
    return mapped
