"""run.json (the run record of train/sft/eval/collect), `vla-rl reproduce`, and plans committed before runs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from vla_rl.cli import main
from vla_rl.runtime.run_record import (
    RECORD_FILE,
    SCHEMA,
    VERSION,
    RecordError,
    git_state,
    plan_state,
    read_record,
)
from vla_rl.stages.evaluation.metrics import evaluation_seed

REPO = Path(__file__).resolve().parents[2]
#: A `vla-rl train` of a few seconds: 2 demonstrations, 3 SFT steps, 2 evaluation episodes (no RL: no Ray).
TINY_TRAIN = [
    "train", "experiment=rl_only", "policy=gaussian", "env.tasks=[reach]", "env.kwargs.image_size=32",
    "policy.embedding_dim=64", "policy.value.hidden_dims=[32]", "experiment.stages=[collect,sft,eval]",
    "collect.episodes_per_task=2", "collect.valid_fraction=0", "sft.max_steps=3", "sft.batch_size=4",
    "sft.show_progress=false", "eval.episodes_per_task=2", "eval.num_envs=2", "eval.trackers=[]",
    "eval.video.episodes_per_task=0", "eval.video.grid_envs=0",
]  # fmt: skip
TINY_EVAL = ["eval", "eval.policy=expert", "env.tasks=[reach]", "env.kwargs.image_size=32", "eval.episodes_per_task=2",
             "eval.num_envs=2", "eval.trackers=[]", "eval.video.episodes_per_task=0", "eval.video.grid_envs=0"]  # fmt: skip


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def tiny_train_run(tmp_path_factory):
    """One tiny `vla-rl train` run for the tests of this module (a test that changes it works on a copy)."""
    root = tmp_path_factory.mktemp("tiny_train")
    run_dir = root / "run"
    assert main([*TINY_TRAIN, f"collect.output={root / 'demos'}", f"run_dir={run_dir}"]) == 0
    return run_dir


def test_train_writes_a_complete_record_that_the_results_point_at(tiny_train_run):
    record, path = read_record(tiny_train_run)
    assert path == tiny_train_run / RECORD_FILE and record["schema"] == SCHEMA and record["version"] == VERSION
    assert record["command"] == "train" and record["status"] == "completed" and record["error"] is None
    assert record["argv"][0] == "train" and record["argv"][-1] == f"run_dir={tiny_train_run}"
    assert record["command_line"].startswith("vla-rl train experiment=rl_only policy=gaussian")
    assert record["config"]["run_dir"] == str(tiny_train_run) and record["config"]["eval"]["split"] == "test"
    assert record["git"]["commit"] == _git("rev-parse", "HEAD")
    assert record["git"]["dirty"] == bool(_git("status", "--porcelain"))
    assert record["packages"]["torch"] and record["packages"]["numpy"] and record["python"]["version"]
    assert record["numerics"]["mode"] == "portable" and isinstance(record["numerics"]["cpu_flags"], list)
    assert record["machine"]["cpu_count"] >= 1 and record["machine"]["memory_bytes"] > 0
    assert record["seeds"] == {"seed": 0, "collect.seed": 0}
    assert list(record["stage_seconds"]) == ["collect", "sft", "eval"] and record["wall_seconds"] > 0
    assert record["started"] <= record["finished"]
    protocol = record["evaluation"]
    assert protocol["split"] == "test" and protocol["episodes_per_task"] == 2 and protocol["deterministic"]
    # The record's seeds are the ones the evaluation reset its envs with: the test split's.
    eval_info = json.loads((tiny_train_run / "eval" / "sft" / "eval_info.json").read_text())
    assert protocol["seeds"] == eval_info["seeds"] == {"reach": [evaluation_seed(0, "reach", k, "test") for k in range(2)]}
    assert eval_info["settings"]["split"] == "test"
    summary = json.loads((tiny_train_run / "summary.json").read_text())
    assert summary["eval_split"] == "test" and summary["policies"]["sft"]["episodes"] == 2
    assert (tiny_train_run / summary["run_record"]).resolve() == path.resolve()
    assert (tiny_train_run / "eval" / "sft" / eval_info["run_record"]).resolve() == path.resolve()
    assert record["outputs"]["summary"] == "summary.json"


def test_reproduce_says_identical_then_reports_a_planted_difference(tiny_train_run, tmp_path, capsys, load_script):
    assert main(["reproduce", str(tiny_train_run), "--run-dir", str(tmp_path / "again")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("identical: ") and (tmp_path / "again" / RECORD_FILE).is_file()
    assert read_record(tmp_path / "again")[0]["argv"][-1] == f"run_dir={tmp_path / 'again'}"
    # A published copy (record and results, no checkpoints) reproduces as well...
    published = tmp_path / "docs" / "study" / "seed0"
    copies = load_script("publish_run").publish(tiny_train_run, published)
    assert published / RECORD_FILE in copies and not (published / "sft" / "last").exists()
    # ...until a difference is planted in its result: the rerun no longer agrees, and says where.
    summary_path = published / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["policies"]["sft"]["successes"] = 1
    summary_path.write_text(json.dumps(summary))
    assert main(["reproduce", str(published / RECORD_FILE), "--run-dir", str(tmp_path / "third")]) == 1
    out = capsys.readouterr().out
    assert "summary.json: policies.sft.successes 1 != 0" in out
    assert not any(line.startswith("identical") for line in out.splitlines())


def test_reproduce_refuses_another_commit_unless_told(tiny_train_run, tmp_path, capsys):
    tiny_train_run = Path(shutil.copytree(tiny_train_run, tmp_path / "copy"))
    record_path = tiny_train_run / RECORD_FILE
    record = json.loads(record_path.read_text())
    record["git"]["commit"] = "0" * 40
    record_path.write_text(json.dumps(record))
    assert main(["reproduce", str(tiny_train_run), "--run-dir", str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err
    assert "commit: the record's 000000000000" in err and "--allow-commit-mismatch" in err
    assert not (tmp_path / "again").exists()
    assert main(["reproduce", str(tiny_train_run), "--run-dir", str(tmp_path / "again"), "--allow-commit-mismatch"]) == 0
    assert "warning (--allow-commit-mismatch): commit" in capsys.readouterr().out


def test_reproduce_results_script_reruns_the_records_it_is_given(tiny_train_run, tmp_path):
    import os
    import sys

    environment = {**os.environ, "VLA_RL": f"{sys.executable} -m vla_rl.cli", "REPRODUCE_ROOT": str(tmp_path / "re"),
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    done = subprocess.run([str(REPO / "scripts" / "reproduce_results.sh"), str(tiny_train_run / RECORD_FILE)],
                          env=environment, capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"identical  {tiny_train_run}"
    assert list((tmp_path / "re").rglob(RECORD_FILE))


def test_eval_records_itself_and_reproduces(tmp_path, capsys):
    output = tmp_path / "eval"
    assert main([*TINY_EVAL, "eval.split=dev", f"eval.output={output}"]) == 0
    record, _ = read_record(output)
    eval_info = json.loads((output / "eval_info.json").read_text())
    assert record["command"] == "eval" and record["folder_key"] == "eval.output"
    assert eval_info["run_record"] == RECORD_FILE and eval_info["settings"]["split"] == "dev"
    assert record["evaluation"]["seeds"] == eval_info["seeds"] and record["evaluation"]["split"] == "dev"
    assert record["outputs"]["eval_info"] == "eval_info.json"
    assert main(["reproduce", str(output), "--run-dir", str(tmp_path / "again")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("identical: ")


def test_reproduce_names_a_missing_or_foreign_record(tmp_path, capsys):
    assert main(["reproduce", str(tmp_path)]) == 2
    assert f"{tmp_path / RECORD_FILE} does not exist" in capsys.readouterr().err
    (tmp_path / RECORD_FILE).write_text(json.dumps({"hello": 1}))
    assert main(["reproduce", str(tmp_path)]) == 2
    assert "is not a vla-rl run record" in capsys.readouterr().err


def test_git_state_outside_a_checkout(tmp_path):
    state = git_state(tmp_path)
    assert state["commit"] is None and state["dirty"] is None and "not a git checkout" in state["note"]


def test_a_plan_must_be_committed_before_the_run(tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs" / "results" / "study").mkdir(parents=True)
    _git("init", "-q", cwd=repo)
    plan = repo / "docs" / "results" / "study" / "plan.md"
    plan.write_text("# plan\n")
    with pytest.raises(RecordError, match="is not committed"):
        plan_state(str(plan), root=repo)
    _git("add", ".", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "plan", cwd=repo)
    state = plan_state(str(plan), root=repo)
    assert state["path"] == "docs/results/study/plan.md" and state["commit"] == _git("rev-parse", "HEAD", cwd=repo)
    plan.write_text("# plan, changed after the fact\n")
    with pytest.raises(RecordError, match="uncommitted changes"):
        plan_state(str(plan), root=repo)
    with pytest.raises(RecordError, match="does not exist"):
        plan_state(str(repo / "nowhere.md"), root=repo)
    with pytest.raises(RecordError, match="not a git checkout"):
        plan_state(str(plan), root=tmp_path / "elsewhere")


def test_a_run_with_an_uncommitted_plan_does_not_start(tmp_path, capsys):
    plan = REPO / "docs" / "results" / "PLAN_TEMPLATE.md"
    output = tmp_path / "eval"
    assert main([*TINY_EVAL, f"record.plan={tmp_path / 'plan.md'}", f"eval.output={output}"]) == 2
    assert "record error: 'record.plan'" in capsys.readouterr().err and not output.exists()
    assert main([*TINY_EVAL, f"+plan={tmp_path / 'plan.md'}", f"eval.output={output}"]) == 2  # the shorthand
    assert "record error: 'record.plan'" in capsys.readouterr().err and not (output / "eval_info.json").exists()
    # The committed template is accepted, and the record names the commit that last touched it.
    assert main([*TINY_EVAL, f"record.plan={plan}", f"eval.output={output}"]) == 0
    recorded = read_record(output)[0]["plan"]
    assert recorded["path"] == "docs/results/PLAN_TEMPLATE.md"
    assert recorded["commit"] == _git("log", "-1", "--format=%H", "--", "docs/results/PLAN_TEMPLATE.md")


def test_collect_and_sft_record_themselves_and_reproduce(tmp_path, capsys):
    demos, sft = tmp_path / "demos", tmp_path / "sft"
    scene = ["env.tasks=[reach]", "env.kwargs.image_size=32"]
    assert main(["collect", *scene, "collect.episodes_per_task=2", f"collect.output={demos}"]) == 0
    assert main(["sft", *scene, "policy=gaussian", "policy.embedding_dim=64", f"sft.dataset={demos}",
                 f"sft.output={sft}", "sft.max_steps=3", "sft.batch_size=4", "sft.show_progress=false"]) == 0  # fmt: skip
    collected, trained = read_record(demos)[0], read_record(sft)[0]
    assert collected["command"] == "collect" and collected["outputs"]["statistics"] == "stats.json"
    assert trained["command"] == "sft" and trained["outputs"]["metrics"] == "sft_metrics.jsonl"
    assert collected["evaluation"] is None and trained["status"] == "completed"
    capsys.readouterr()
    for folder in (demos, sft):
        assert main(["reproduce", str(folder), "--run-dir", str(tmp_path / f"{folder.name}_again")]) == 0
        assert capsys.readouterr().out.splitlines()[-1].startswith("identical: ")


def test_reproduce_pins_the_iterations_a_time_limited_run_ran(tmp_path):
    from vla_rl.commands.reproduce import pinned_iterations

    (tmp_path / "summary.json").write_text(json.dumps({"rl_iterations": 7}))
    limited = {"config": {"trainer": {"time_limit_minutes": 25, "iterations": 360}}}
    assert pinned_iterations(limited, tmp_path) == ["trainer.iterations=7", "trainer.time_limit_minutes=null"]
    unlimited = {"config": {"trainer": {"time_limit_minutes": None, "iterations": 360}}}
    assert pinned_iterations(unlimited, tmp_path) == []
    assert pinned_iterations(limited, tmp_path / "no_such_run") == []


def test_a_resumed_run_reproduces_as_one_uninterrupted_run(tiny_train_run, tmp_path, capsys):
    resumed = Path(shutil.copytree(tiny_train_run, tmp_path / "resumed"))
    demos = tiny_train_run.parent / "demos"
    assert main([*TINY_TRAIN, f"collect.output={demos}", f"run_dir={resumed}", "trainer.resume=true"]) == 0
    record = read_record(resumed)[0]
    assert record["argv"][-1] == "trainer.resume=true" and record["resumed_from"]["argv"][:-1] == record["argv"][:-2]
    assert main(["reproduce", str(resumed), "--run-dir", str(tmp_path / "again")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("identical: ")
    assert "trainer.resume=true" not in read_record(tmp_path / "again")[0]["argv"]
    # A run whose parts ran different commands cannot be rerun as one.
    record["resumed_from"]["argv"] = [*record["resumed_from"]["argv"], "sft.max_steps=4"]
    (resumed / RECORD_FILE).write_text(json.dumps(record))
    assert main(["reproduce", str(resumed), "--run-dir", str(tmp_path / "third")]) == 2
    assert "part 1 of this resumed run ran" in capsys.readouterr().err and not (tmp_path / "third").exists()


def test_a_resumed_sft_reruns_as_one_uninterrupted_sft():
    from vla_rl.commands.reproduce import rerun_argv

    first = ["sft", "seed=2", "sft.output=a"]
    record = {"argv": [*first, "sft.resume=true"], "folder_key": "sft.output", "git": {"commit": "c"},
              "resumed_from": {"argv": first, "git": {"commit": "c"}}}  # fmt: skip
    assert rerun_argv(record, Path("again")) == ["sft", "seed=2", "sft.output=again"]
