"""`vla-rl collect` end to end on the built-in suite: files, statistics, resume, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vla_rl.cli import main
from vla_rl.stages.collect import CollectConfig, collect_demonstrations
from vla_rl.stages.sft.datasets import load_demonstrations, load_statistics
from vla_rl.stages.sft.demos import ChunkDataset, EpisodeStore
from vla_rl.stages.sft.episodes import split_names

KWARGS = {"image_size": 32, "cameras": ("front", "wrist")}
NOISY_3 = CollectConfig(episodes_per_task=3, noise_std=0.005)


def per_task(count: int, **options) -> CollectConfig:
    """The collect section with ``count`` episodes per task (and ``options``), defaults otherwise."""
    return CollectConfig(episodes_per_task=count, **options)


def test_collect_writes_loadable_demos_and_resume_gives_the_same_episodes(tmp_path):
    full = collect_demonstrations(
        "tabletop", ["reach", "lift"], KWARGS, tmp_path / "full", NOISY_3, show_progress=False
    )
    episodes, attrs = load_demonstrations(full.dataset_path)
    assert full.episodes_by_task == {"reach": 3, "lift": 3}
    assert all(e.success and e.successes[-1] for e in episodes)
    assert attrs["env_kwargs"] == {"image_size": 32, "cameras": ["front", "wrist"]}
    first = episodes[0]
    assert first.images["front"].shape == (len(first), 32, 32, 3) and first.states.shape[1] == 9
    assert first.instruction == first.init_state["instruction"] and len(first.instruction.split()) >= 3
    stats = load_statistics(full.stats_path)
    actions = np.concatenate([e.actions for e in episodes]).astype(np.float64)
    np.testing.assert_allclose(stats["action"]["max"], actions.max(0), rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["q01"], np.quantile(actions, 0.01, axis=0), rtol=1e-6)

    # Interrupted after 2 lift episodes: keep only those files, rerun, get the same data set.
    partial = tmp_path / "partial"
    collect_demonstrations("tabletop", ["reach", "lift"], KWARGS, partial, NOISY_3, show_progress=False)
    store = EpisodeStore(partial)
    for path in store.paths()[-1:]:
        path.unlink()
    (partial / "demos.hdf5").unlink()
    resumed = collect_demonstrations(
        "tabletop", ["reach", "lift"], KWARGS, partial, NOISY_3, show_progress=False
    )
    assert resumed.attempts_by_task == {"lift": 1}
    again, _ = load_demonstrations(resumed.dataset_path)
    key = lambda e: (e.task, e.seed)  # noqa: E731
    for a, b in zip(sorted(episodes, key=key), sorted(again, key=key), strict=True):
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.images["wrist"], b.images["wrist"])

    sample = ChunkDataset(episodes, chunk_size=4)[0]
    assert sample["action"].shape == (4, 4) and sample["images"]["front"].shape == (32, 32, 3)


def test_the_dataset_holds_only_the_requested_tasks_and_episodes(tmp_path):
    """A folder that an earlier run filled with more tasks (or more episodes per task) gives a dataset of
    what this run asks for: the same demos, split and statistics as a folder that never held more."""
    shared, fresh = tmp_path / "shared", tmp_path / "fresh"
    collect_demonstrations(
        "tabletop", ["reach", "open_drawer", "lift"], KWARGS, shared, per_task(2), show_progress=False
    )
    result = collect_demonstrations(
        "tabletop", ["lift", "reach"], KWARGS, shared, per_task(1), show_progress=False
    )
    assert result.attempts_by_task == {}  # nothing new to collect
    assert result.episodes_by_task == {"lift": 1, "reach": 1}
    assert EpisodeStore(shared).count_by_task() == {"reach": 2, "open_drawer": 2, "lift": 2}  # kept for reuse
    collect_demonstrations("tabletop", ["lift", "reach"], KWARGS, fresh, per_task(1), show_progress=False)
    for split in ("train", "valid"):
        ours, theirs = load_demonstrations(shared, split)[0], load_demonstrations(fresh, split)[0]
        assert [(e.task, e.seed) for e in ours] == [(e.task, e.seed) for e in theirs]
    assert json.loads((shared / "stats.json").read_text()) == json.loads((fresh / "stats.json").read_text())
    episodes, fresh_episodes = load_demonstrations(shared)[0], load_demonstrations(fresh)[0]
    assert [e.task for e in episodes] == ["lift", "reach"]  # the requested order, not the stored one
    for ours, theirs in zip(episodes, fresh_episodes, strict=True):
        np.testing.assert_array_equal(ours.actions, theirs.actions)


def test_split_names_partitions_the_names_and_the_seed_chooses_the_split() -> None:
    names = [f"demo_{i}" for i in range(30)]
    splits = {seed: split_names(names, 0.1, seed) for seed in range(4)}
    for split in splits.values():
        assert len(split["valid"]) == 3 and len(split["train"]) == 27
        assert sorted(split["train"] + split["valid"]) == sorted(names)
        assert split["train"] == sorted(split["train"]) and split["valid"] == sorted(split["valid"])
    assert len({tuple(split["valid"]) for split in splits.values()}) == 4
    assert split_names(names[:1], 0.5, 0) == {"train": ["demo_0"], "valid": []}


def test_sft_draws_its_split_with_its_own_seed_from_a_file_that_other_seeds_share(tmp_path):
    """The runs of an experiment share its data folder: the file is the same whichever seed wrote it last
    (``collect.seed``), and each run's SFT split follows from the run's seed alone."""
    first, second = tmp_path / "first", tmp_path / "second"
    collect_demonstrations("tabletop", ["reach", "lift"], KWARGS, first, per_task(5), show_progress=False)
    collect_demonstrations(
        "tabletop", ["reach", "lift"], KWARGS, second, per_task(5, seed=3), show_progress=False
    )
    everything = {folder: load_demonstrations(folder)[0] for folder in (first, second)}
    for seed in (0, 3):
        reference = split_names([f"demo_{i}" for i in range(10)], 0.1, seed)
        for folder in (first, second):
            for split in ("train", "valid"):
                drawn = load_demonstrations(folder, split, split_seed=seed)[0]
                expected = [everything[folder][int(name.split("_")[1])] for name in reference[split]]
                assert [(e.task, e.seed) for e in drawn] == [(e.task, e.seed) for e in expected]
    # Without split_seed the file's own mask, written with its collect seed.
    assert [e.seed for e in load_demonstrations(second, "valid")[0]] == [
        e.seed for e in load_demonstrations(second, "valid", split_seed=3)[0]
    ]


def test_the_run_seed_does_not_choose_the_demonstrations(tmp_path):
    """`seed=S` seeds SFT, RL and evaluation; the demos come from `collect.seed` (default 0), so the seeds of
    an experiment train on the same demos whichever of them collected into the shared folder first."""
    common = ["collect", "env.tasks=[reach]", "collect.episodes_per_task=2", "env.kwargs.image_size=16"]
    for name, extra in (("default", []), ("run_seed", ["seed=5"]), ("collect_seed", ["collect.seed=5"])):
        assert main([*common, *extra, f"collect.output={tmp_path / name}"]) == 0
    seeds = {
        name: [e.seed for e in load_demonstrations(tmp_path / name)[0]]
        for name in ("default", "run_seed", "collect_seed")
    }
    assert seeds["run_seed"] == seeds["default"] != seeds["collect_seed"]


def test_collect_command_line(tmp_path, capsys):
    code = main(["collect", "env.tasks=[open_drawer]", "collect.episodes_per_task=2", "env.kwargs.image_size=16",
                 f"collect.output={tmp_path}"])  # fmt: skip
    assert code == 0
    assert f"demonstrations: {tmp_path / 'demos.hdf5'}" in capsys.readouterr().out
    assert len(load_demonstrations(tmp_path)[0]) == 2


def test_collect_refuses_a_folder_collected_with_other_env_settings(tmp_path):
    output = tmp_path / "demos"
    collect_demonstrations("tabletop", ["reach"], KWARGS, output, per_task(1), show_progress=False)
    settings = json.loads((output / "collection.json").read_text())
    assert settings["env_kwargs"] == {"image_size": 32, "cameras": ["front", "wrist"]}
    again = collect_demonstrations("tabletop", ["reach"], KWARGS, output, per_task(1), show_progress=False)
    assert again.attempts_by_task == {}  # same settings: the stored episode is kept
    with pytest.raises(ValueError, match=r"collect.output=.*other settings \(env_kwargs"):
        collect_demonstrations("tabletop", ["reach"], {**KWARGS, "fixed_scenes": True}, output, per_task(2),
                               show_progress=False)  # fmt: skip
    assert EpisodeStore(output).count_by_task() == {"reach": 1}  # nothing added, nothing lost

    # A folder from before collection.json: its demos.hdf5 attributes are the record.
    (output / "collection.json").unlink()
    with pytest.raises(ValueError, match="noise_std|env_kwargs"):
        collect_demonstrations("tabletop", ["reach"], {**KWARGS, "image_size": 16}, output, per_task(1),
                               show_progress=False)  # fmt: skip
