"""`vla-rl eval` with the scripted expert (wandb offline), policy paths, `vla-rl plot`, and Ray workers."""

from __future__ import annotations

import json

import pytest

# Importing torchvision (policies.hub imports it through timm) after MuJoCo rendered through EGL in
# this process segfaults on this platform; importing it first is safe. `vla-rl eval` loads the
# policy before it builds envs for the same reason.
import torchvision  # noqa: F401

from vla_rl.cli import main
from vla_rl.stages.evaluation import PolicyLoadError, load_policy_for_eval, resolve_policy_folder


def test_eval_command_with_expert_logs_video_and_table_to_wandb(tmp_path, capsys):
    output = tmp_path / "eval"
    code = main([
        "eval", "eval.policy=expert", "env.tasks=[reach]", "eval.episodes_per_task=3", "eval.num_envs=3",
        f"eval.output={output}", "eval.trackers=[wandb]", "eval.video.episodes_per_task=1", f"run_dir={tmp_path}",
    ])  # fmt: skip
    assert code == 0
    info = json.loads((output / "eval_info.json").read_text())
    assert info["policy"]["kind"] == "expert" and info["env"]["control_hz"] == 10.0
    assert info["settings"]["video"]["cameras"] == ["front"]  # default: the env's first camera
    rate = info["overall"]["success_rate"]
    assert f"overall: success {rate:.3f}" in capsys.readouterr().out
    metrics = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert metrics[0]["eval/success_rate"] == rate and metrics[0]["eval/reach/mean_length"] > 0
    runs = list((output / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    videos = sorted(p.name for p in (runs[0] / "files" / "media" / "videos").rglob("*.mp4"))
    assert [name.split("_")[0] for name in videos] == ["episode", "grid"]
    tables = list((runs[0] / "files" / "media" / "table").rglob("*.table.json"))
    assert len(tables) == 1
    table = json.loads(tables[0].read_text())
    assert table["columns"] == ["task", "instruction", "success", "return", "length", "video"]
    assert len(table["data"]) == 3
    assert [row[1] for row in table["data"]] == [e["instruction"] for e in info["tasks"]["reach"]["episode_results"]]


def test_unreadable_policy_paths_give_clear_errors(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main(["eval", f"eval.policy={missing}", "env.tasks=[reach]"]) == 2
    assert f"policy path '{missing}' does not exist; pass an exported policy folder" in capsys.readouterr().err
    a_file = tmp_path / "model.pt"
    a_file.write_bytes(b"\0")
    with pytest.raises(PolicyLoadError, match="is a file, not a folder"):
        load_policy_for_eval(a_file)
    with pytest.raises(PolicyLoadError, match=r"holds no policy \(its contents: \['model.pt'\]\)"):
        load_policy_for_eval(tmp_path)
    exported = tmp_path / "exported"
    exported.mkdir()
    (exported / "config.json").write_text("{not json")
    with pytest.raises(PolicyLoadError, match=r"lacks \['model.safetensors'\]"):
        load_policy_for_eval(exported)
    (exported / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(PolicyLoadError, match=f"cannot load the policy in '{exported}'"):
        load_policy_for_eval(exported)


def test_checkpoint_and_run_folders_resolve_to_the_latest_policy(tmp_path):
    for iteration in (2, 10, 7):
        (tmp_path / "checkpoints" / f"iter_{iteration:06d}" / "policy").mkdir(parents=True)
    (tmp_path / "checkpoints" / "iter_000020").mkdir()  # an incomplete checkpoint without policy/
    latest = tmp_path / "checkpoints" / "iter_000010" / "policy"
    assert resolve_policy_folder(tmp_path) == latest
    assert resolve_policy_folder(tmp_path / "checkpoints") == latest
    assert resolve_policy_folder(tmp_path / "checkpoints" / "iter_000007") == latest.parents[1] / "iter_000007/policy"


def test_a_train_run_folder_resolves_to_its_rl_policy_else_its_sft_policy(tmp_path):
    """``eval.policy=RUN_DIR`` for a folder of `vla-rl train`: checkpoints live under RUN_DIR/rl."""
    (tmp_path / "sft" / "best").mkdir(parents=True)
    (tmp_path / "sft" / "best" / "config.json").write_text("{}")
    assert resolve_policy_folder(tmp_path) == tmp_path / "sft" / "best"  # stopped after SFT
    for iteration in (3, 12):
        (tmp_path / "rl" / "checkpoints" / f"iter_{iteration:06d}" / "policy").mkdir(parents=True)
    assert resolve_policy_folder(tmp_path) == tmp_path / "rl" / "checkpoints" / "iter_000012" / "policy"
    assert resolve_policy_folder(tmp_path / "rl") == tmp_path / "rl" / "checkpoints" / "iter_000012" / "policy"


def test_plot_command(tmp_path, capsys):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "eval/success_rate": 0.5}) + "\n")
    assert main(["plot", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "plots" / "success.png")
    assert main(["plot", str(tmp_path / "missing")]) == 2
    assert "no metrics.jsonl in" in capsys.readouterr().err


def test_plot_command_on_a_train_run_folder_draws_its_rl_metrics(tmp_path, capsys):
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "metrics.jsonl").write_text(json.dumps({"step": 1, "train/success_rate": 0.5}) + "\n")
    assert main(["plot", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "rl" / "plots" / "success.png")


def test_ray_workers_give_the_same_episodes_as_one_process(tmp_path):
    from vla_rl.runtime.ray_cluster import init_ray, shutdown_ray
    from vla_rl.stages.evaluation import (
        EvalSettings,
        ExpertActionSource,
        VideoConfig,
        evaluate_and_report,
        make_eval_envs,
    )

    settings = EvalSettings(episodes_per_task=4, seed=1, protocol="seeded", split="dev",
                            video=VideoConfig(episodes_per_task=1, grid_envs=2))  # fmt: skip
    kwargs = {"image_size": 32, "cameras": ["front"]}
    documents = []
    init_ray(num_cpus=2, temp_dir=None)
    try:
        for workers in (0, 2):
            envs = make_eval_envs("tabletop", kwargs, ["reach"], num_envs=4, num_workers=workers)
            document, _ = evaluate_and_report(envs, ExpertActionSource(), ["reach"], settings,
                                              tmp_path / str(workers), {"kind": "expert"},
                                              {"id": "tabletop", "kwargs": kwargs, "num_envs": 4,
                                               "num_workers": workers})  # fmt: skip
            envs.close()
            documents.append(document["tasks"]["reach"])
    finally:
        shutdown_ray()
    local, remote = documents
    keys = ("seed", "success", "length", "return", "instruction")
    assert [[e[k] for k in keys] for e in remote["episode_results"]] == [
        [e[k] for k in keys] for e in local["episode_results"]
    ]
    import imageio.v3 as iio

    assert iio.imread(tmp_path / "2" / remote["videos"]["episodes"][0]).shape == (
        remote["episode_results"][0]["length"] + 1, 128, 128, 3)  # fmt: skip
