"""`vla-rl train`: the experiment's stages in order (``experiment.stages``).

- ``collect``: scripted demonstrations into ``collect.output``; episodes already there are kept and only
  the missing ones are collected.
- ``sft``: behaviour cloning on them; the SFT policy becomes the RL start.
- ``rl``: PPO/GRPO with the worker groups (:mod:`vla_rl.stages.rl.experiment`, :mod:`vla_rl.stages.rl.trainer`).
- ``eval``: evaluation of the final policy with videos.

Every stage writes under ``run_dir``; the resolved config is saved as ``run_dir/config.yaml``, the run record
(`vla-rl train`) as ``run_dir/run.json`` (:mod:`vla_rl.runtime.run_record`), and ``summary.json`` points at it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

# Before any stage renders in this process: torchvision (through timm) imported after MuJoCo's EGL
# rendering crashes (docs/platform.md); the collect stage renders, the later stages load policies.
import policies  # noqa: F401
from vla_rl.config import ConfigError
from vla_rl.runtime.files import write_json_atomic
from vla_rl.runtime.process_env import numerics_report
from vla_rl.runtime.run_record import RECORD_FILE
from vla_rl.stages.run_plan import RunPlan
from vla_rl.stages.sft.checkpoint import checkpoint_path as sft_checkpoint_path

logger = logging.getLogger(__name__)


def stage_collect(run: RunPlan, run_dir: Path, state: dict[str, Any]) -> None:
    from vla_rl.stages import collect

    plan = run.collect_plan()
    result = collect.run(plan, Path(plan.collect.output))
    new = sum(result.attempts_by_task.values())
    print(f"[collect] {sum(result.episodes_by_task.values())} demonstrations ({new} episodes run now) in "
          f"{result.dataset_path}" + (f"; target frames in {result.target_frames_path}" if result.target_frames_path else ""))


def stage_sft(run: RunPlan, run_dir: Path, state: dict[str, Any]) -> None:
    from vla_rl.stages.sft import training

    plan = run.sft_plan()
    result = training.run(plan, Path(plan.output), resume=run.trainer.resume)
    state["policy"] = str(result.policy_dir)
    state["sft_policy"] = str(result.policy_dir)
    print(f"[sft] {result.num_steps} steps in {result.seconds:.0f} s; policy: {result.policy_dir}")


def stage_eval(run: RunPlan, run_dir: Path, state: dict[str, Any]) -> None:
    from vla_rl.stages.evaluation.from_config import evaluate_policy_folders

    folders = {name: state[key] for name, key in (("sft", "sft_policy"), ("final", "policy")) if key in state}
    if "sft" in folders and folders["sft"] == folders.get("final"):
        folders.pop("final")
    if not folders:
        raise ConfigError("'experiment.stages': eval needs a policy from an earlier sft or rl stage")
    record = run_dir / RECORD_FILE
    plan = run.eval_plan(record if record.is_file() else None)
    state["eval"] = evaluate_policy_folders(plan, folders, run_dir / "eval")


def stage_rl(run: RunPlan, run_dir: Path, state: dict[str, Any]) -> None:
    from vla_rl.stages.rl import experiment

    result = experiment.run(experiment.plan_rl_run(run, init_policy=state.get("policy")), run_dir / "rl")
    state["env_steps"] = result.env_steps
    state["rl_iterations"] = result.iterations
    if result.policy is not None:
        state["policy"] = str(result.policy)
    stopped = f" (of {result.planned_iterations}: {result.stop_reason})" if result.stop_reason else ""
    print(f"[rl] {result.iterations} iterations{stopped}, {result.env_steps} env steps; "
          f"metrics: {run_dir / 'rl' / 'metrics.jsonl'}")
    if "policy" in state:
        print(f"[rl] policy: {state['policy']}")


STAGES: dict[str, Callable[[RunPlan, Path, dict[str, Any]], None]] = {
    "collect": stage_collect,
    "sft": stage_sft,
    "rl": stage_rl,
    "eval": stage_eval,
}


#: Stages that a resumed run (``trainer.resume=true``) skips once they have completed; RL continues from
#: its checkpoint and the evaluation runs again on what RL ends with.
SKIPPED_ONCE_DONE = ("collect", "sft")
PROGRESS_FILE = "stages.json"


def check_train_plan(run: RunPlan) -> None:
    """What only `vla-rl train` reads: ``experiment.stages`` against ``trainer.init_policy``.

    Raises:
        ConfigError: an SFT stage and ``trainer.init_policy`` both say where RL starts.
    """
    init_policy = run.trainer.init_policy if run.trainer else None
    stages = list(run.experiment.stages) if run.experiment else []
    if init_policy and "sft" in stages and "rl" in stages:
        kept = [stage for stage in stages if stage not in ("collect", "sft")]
        raise ConfigError(
            f"'trainer.init_policy'={init_policy!r} and 'experiment.stages'={stages} both say where RL starts (the "
            f"sft stage's policy would replace it); to start from {init_policy}, run experiment.stages=[{','.join(kept)}]"
            ", else drop trainer.init_policy"
        )


def read_progress(run_dir: Path) -> dict[str, Any]:
    """``run_dir/stages.json``: the stages completed so far, what they produced and their wall times."""
    path = Path(run_dir) / PROGRESS_FILE
    if not path.is_file():
        return {"completed": [], "state": {}, "seconds": {}}
    return json.loads(path.read_text())


def check_resumable(run: RunPlan) -> None:
    """``trainer.resume=true`` needs a completed stage, an SFT checkpoint or an RL checkpoint in ``run_dir``."""
    run_dir = run.run_dir
    stages = run.experiment.stages if run.experiment is not None else []
    sft_output = Path(run.sft.output) if run.sft is not None and "sft" in stages else None
    if (read_progress(run_dir)["completed"] or (run_dir / "rl" / "checkpoints" / "latest").is_file()
            or (sft_output is not None and sft_checkpoint_path(sft_output).is_file())):  # fmt: skip
        return
    raise ConfigError(
        f"'trainer.resume'=true: {run_dir} holds nothing to resume (no completed stage in {PROGRESS_FILE}, no "
        f"checkpoint in {sft_output or 'sft'}/checkpoint or rl/checkpoints); set run_dir to an earlier run's folder, "
        "or drop trainer.resume=true"
    )


def run_experiment(run: RunPlan, record: Any = None) -> dict[str, Any]:
    """Run ``experiment.stages`` in order; returns what they produced (e.g. ``policy``: the final policy folder).

    ``record``: the run's :class:`~vla_rl.runtime.run_record.RunRecord`, told each stage's wall time.
    With ``trainer.resume=true`` the stages of :data:`SKIPPED_ONCE_DONE` that completed in an earlier run
    of ``run_dir`` are skipped, and RL continues from its latest checkpoint.
    """
    run.require("experiment", "trainer")
    stages, name = list(run.experiment.stages), run.experiment.name
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ConfigError(f"'experiment.stages': unknown stage(s) {unknown}; allowed: {', '.join(STAGES)}")
    run_dir = run.run_dir
    resume = run.trainer.resume
    progress = read_progress(run_dir) if resume else {"completed": [], "state": {}, "seconds": {}}
    if resume:
        check_resumable(run)
    else:
        (run_dir / PROGRESS_FILE).unlink(missing_ok=True)  # a new run in an old folder starts its own record
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(run.config))
    print(f"[{name}] run folder: {run_dir}")
    head = run.policy.head if run.policy else None  # a policy of one's own may have no head section
    print(f"[{name}] policy: {run.policy.factory if run.policy else None}" + (f", head {head}" if head else ""))
    state: dict[str, Any] = progress["state"]
    seconds: dict[str, float] = progress["seconds"]
    for stage in stages:
        if stage in SKIPPED_ONCE_DONE and stage in progress["completed"]:
            print(f"[{stage}] completed in an earlier run of {run_dir}; skipped (trainer.resume=true)")
            continue
        started = time.perf_counter()
        STAGES[stage](run, run_dir, state)
        seconds[stage] = time.perf_counter() - started
        if record is not None:
            record.stage_done(stage, seconds[stage])
        progress["completed"] = [*[s for s in progress["completed"] if s != stage], stage]
        write_json_atomic(run_dir / PROGRESS_FILE, progress)
        summary = write_summary(run_dir, run, state, seconds)
        if record is not None:
            record.add_output("summary", summary)
    print(f"[{name}] done in {sum(seconds.values()) / 60:.1f} min; summary: {run_dir / 'summary.json'}")
    return state


def write_summary(run_dir: Path, run: RunPlan, state: dict[str, Any], seconds: dict[str, float]) -> Path:
    """``run_dir/summary.json``: stage wall times, env steps, per-task success of the SFT and final policies
    (with the split, successes/episodes and Wilson 95% interval), Fisher's exact test of final against SFT
    when both were scored on the same episodes, and ``run_record`` (run.json, relative to ``run_dir``)."""
    record = run_dir / RECORD_FILE
    summary: dict[str, Any] = {"experiment": run.experiment.name, "seed": run.seed, "stage_seconds": seconds,
                               "env_steps": state.get("env_steps"), "rl_iterations": state.get("rl_iterations"),
                               "numerics": numerics_report(), "run_record": RECORD_FILE if record.is_file() else None,
                               "eval_split": None, "policies": {}}  # fmt: skip
    documents = state.get("eval", {})
    for name, document in documents.items():
        overall = document["overall"]
        summary["eval_split"] = document["settings"].get("split", "dev")
        summary["policies"][name] = {
            "overall": overall["success_rate"],
            "tasks": {task: s["success_rate"] for task, s in document["tasks"].items()},
            "episodes_per_task": {task: s["episodes"] for task, s in document["tasks"].items()},
            "split": document["settings"].get("split", "dev"),
            "successes": overall["successes"],
            "episodes": overall["episodes"],
            "success_ci95": overall["success_ci95"],
        }
    if "sft" in documents and "final" in documents:
        summary["final_vs_sft"] = final_against_sft(documents["final"], documents["sft"])
    path = run_dir / "summary.json"
    write_json_atomic(path, summary)
    return path


def final_against_sft(final: dict[str, Any], sft: dict[str, Any]) -> dict[str, Any]:
    """Fisher's exact test of the final policy's overall success against the SFT policy's, both two-sided and
    one-sided ("RL improved it": final > SFT); only when both were scored on the same episodes (split and
    every reset seed), else ``same_episodes: false`` and no p-values."""
    from vla_rl.stages.evaluation.metrics import fisher_exact_p, fisher_exact_p_greater

    split = final["settings"].get("split", "dev")
    same = split == sft["settings"].get("split", "dev") and final["seeds"] == sft["seeds"]
    a, n_a = final["overall"]["successes"], final["overall"]["episodes"]
    b, n_b = sft["overall"]["successes"], sft["overall"]["episodes"]
    comparison: dict[str, Any] = {"split": split, "same_episodes": same, "final": f"{a}/{n_a}", "sft": f"{b}/{n_b}"}
    if same:
        comparison["fisher_p_two_sided"] = fisher_exact_p(a, n_a, b, n_b)
        comparison["fisher_p_rl_improved"] = fisher_exact_p_greater(a, n_a, b, n_b)
    return comparison
