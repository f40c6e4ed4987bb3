"""``eval_info.json``: what an evaluation found, written atomically and validated by its schema.

The schema is ``vla_rl/stages/evaluation/eval_info.schema.json`` (JSON Schema draft 2020-12), documented
in ``docs/evaluation.md``.
"""

from __future__ import annotations

import json
import platform
import time
from functools import cache
from pathlib import Path
from typing import Any

from vla_rl.runtime.files import write_json_atomic
from vla_rl.stages.evaluation.metrics import summarize_episodes
from vla_rl.stages.evaluation.runner import EvalOutcome, EvalSettings

FORMAT_VERSION = 1
EVAL_INFO_FILE = "eval_info.json"
SCHEMA_PATH = Path(__file__).resolve().parent / "eval_info.schema.json"


class EvalInfoError(ValueError):
    """An eval_info document that does not follow the schema; the message names the field."""


@cache
def eval_info_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def build_eval_info(
    outcome: EvalOutcome,
    settings: EvalSettings,
    policy: dict[str, Any],
    env: dict[str, Any],
    config: dict[str, Any] | None = None,
    run_record: str | None = None,
) -> dict[str, Any]:
    """The eval_info document of ``outcome`` (see docs/evaluation.md for every field); ``run_record``: the
    run.json of the command that evaluated, relative to the evaluation's folder."""
    tasks = {}
    for name, task in outcome.tasks.items():
        tasks[name] = {
            **task.summary(),
            "videos": {"episodes": [e["video"] for e in task.episodes if e["video"]], "grid": task.grid_video},
            "episode_results": task.episodes,
        }
    return {
        "format_version": FORMAT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "policy": policy,
        "env": {**env, "control_hz": outcome.control_hz},
        "settings": {
            "episodes_per_task": settings.episodes_per_task,
            "seed": settings.seed,
            "split": settings.split,
            "protocol": settings.protocol,
            "video": {
                "episodes_per_task": settings.video.episodes_per_task,
                "grid_envs": settings.video.grid_envs,
                "cameras": list(outcome.cameras),
                "size": list(settings.video.size),
                "fps": outcome.control_hz,
            },
        },
        "seeds": {name: [e["seed"] for e in task.episodes] for name, task in outcome.tasks.items()},
        "tasks": tasks,
        "suites": suite_summaries(outcome),
        "overall": summarize_episodes(outcome.all_episodes(), outcome.wall_time_s),
        "config": config or {},
        "run_record": run_record,
    }


def suite_summaries(outcome: EvalOutcome) -> dict[str, Any]:
    """Success of each suite, the tasks named ``<suite>/<task>`` pooled (LIBERO's suites); {} without such names."""
    suites: dict[str, list[str]] = {}
    for name in outcome.tasks:
        suite, sep, _ = name.partition("/")
        if sep:
            suites.setdefault(suite, []).append(name)
    return {
        suite: {
            **summarize_episodes(
                [e for name in names for e in outcome.tasks[name].episodes],
                sum(outcome.tasks[name].wall_time_s for name in names),
            ),
            "tasks": names,
        }
        for suite, names in suites.items()
    }


def validate_eval_info(document: dict[str, Any]) -> None:
    """Raise :class:`EvalInfoError` naming the first field that breaks the schema."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(eval_info_schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        raise EvalInfoError(f"eval_info field '{where}': {first.message} ({len(errors)} schema error(s) in all)")


def write_eval_info(document: dict[str, Any], output_dir: str | Path) -> Path:
    """Validate ``document`` and write ``output_dir/eval_info.json`` (temporary name, then rename)."""
    validate_eval_info(document)
    return write_json_atomic(Path(output_dir) / EVAL_INFO_FILE, document)
