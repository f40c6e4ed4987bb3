"""One evaluation end to end: run it, write eval_info.json, log it to the trackers.

The trainer calls :func:`evaluate_and_report` every k iterations with its own envs and the policy in training;
``vla-rl eval`` calls it once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from contract.vec_env import VecEnv
from vla_rl.stages.evaluation.report import build_eval_info, write_eval_info
from vla_rl.stages.evaluation.runner import EvalSettings, run_evaluation


def eval_scalars(document: dict[str, Any], prefix: str = "eval") -> dict[str, float]:
    """Scalars of an eval_info document: ``eval/success_rate``, ``eval/<task>/success_rate``, ..."""
    keys = ("success_rate", "mean_return", "mean_length", "wall_time_s")
    scalars = {f"{prefix}/{key}": float(document["overall"][key]) for key in keys}
    scalars[f"{prefix}/success_ci95_low"], scalars[f"{prefix}/success_ci95_high"] = document["overall"]["success_ci95"]
    for task, summary in document["tasks"].items():
        scalars.update({f"{prefix}/{task}/{key}": float(summary[key]) for key in keys})
    for suite, summary in document.get("suites", {}).items():
        scalars.update({f"{prefix}/{suite}/{key}": float(summary[key]) for key in keys})
    return scalars


def samples_table(document: dict[str, Any], output_dir: str | Path) -> list[dict[str, Any]]:
    """One row per episode: task, instruction, success, return, length, video (absolute path or None)."""
    rows = []
    for task, summary in document["tasks"].items():
        for episode in summary["episode_results"]:
            video = str(Path(output_dir) / episode["video"]) if episode["video"] else None
            rows.append({
                "task": task, "instruction": episode["instruction"], "success": episode["success"],
                "return": episode["return"], "length": episode["length"], "video": video,
            })  # fmt: skip
    return rows


def log_eval_to_trackers(tracker: Any, document: dict[str, Any], output_dir: str | Path, step: int) -> None:
    """Scalars, every video (by path) and the samples table of one evaluation."""
    output_dir = Path(output_dir)
    tracker.log_scalars(eval_scalars(document), step)
    for task, summary in document["tasks"].items():
        for number, video in enumerate(summary["videos"]["episodes"]):
            tracker.log_video(f"eval/video/{task}/episode_{number}", output_dir / video, step)
        if summary["videos"]["grid"]:
            tracker.log_video(f"eval/video/{task}/grid", output_dir / summary["videos"]["grid"], step)
    tracker.log_table("eval/samples", samples_table(document, output_dir), step)


def evaluate_and_report(
    envs: VecEnv, action_source: Any, tasks: list[str], settings: EvalSettings, output_dir: str | Path,
    policy_info: dict[str, Any], env_info: dict[str, Any], config: dict[str, Any] | None = None,
    tracker: Any = None, step: int = 0, on_episode: Any = None, run_record: str | Path | None = None,
) -> tuple[dict[str, Any], Path]:  # fmt: skip
    """Run the evaluation, write ``output_dir/eval_info.json``; returns (document, its path).

    ``run_record``: the run.json of the command evaluating (eval_info.json names it relative to ``output_dir``).
    """
    outcome = run_evaluation(envs, action_source, tasks, settings, output_dir, on_episode=on_episode)
    record = None if run_record is None else os.path.relpath(Path(run_record).resolve(), Path(output_dir).resolve())
    document = build_eval_info(outcome, settings, policy_info, env_info, config, record)
    path = write_eval_info(document, output_dir)
    if tracker is not None:
        log_eval_to_trackers(tracker, document, output_dir, step)
    return document, path
