"""Evaluation: seeded episodes per task, success rates with Wilson intervals, videos, eval_info.json."""

from vla_rl.stages.evaluation.action_sources import (
    ActingPolicy,
    ExpertActionSource,
    PolicyActionSource,
    PolicyLoadError,
    load_policy_for_eval,
    resolve_policy_folder,
)
from vla_rl.stages.evaluation.config import VideoConfig
from vla_rl.stages.evaluation.env_backends import WorkerGroupEvalEnvs, make_eval_envs
from vla_rl.stages.evaluation.metrics import evaluation_seed, summarize_episodes, wilson_interval
from vla_rl.stages.evaluation.report import (
    EvalInfoError,
    build_eval_info,
    validate_eval_info,
    write_eval_info,
)
from vla_rl.stages.evaluation.runner import EvalSettings, run_evaluation
from vla_rl.stages.evaluation.session import evaluate_and_report, log_eval_to_trackers

__all__ = [
    "ActingPolicy",
    "EvalInfoError",
    "EvalSettings",
    "ExpertActionSource",
    "PolicyActionSource",
    "PolicyLoadError",
    "VideoConfig",
    "WorkerGroupEvalEnvs",
    "build_eval_info",
    "evaluate_and_report",
    "evaluation_seed",
    "load_policy_for_eval",
    "log_eval_to_trackers",
    "make_eval_envs",
    "resolve_policy_folder",
    "run_evaluation",
    "summarize_episodes",
    "validate_eval_info",
    "wilson_interval",
    "write_eval_info",
]
