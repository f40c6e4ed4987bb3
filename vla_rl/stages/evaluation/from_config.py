"""Evaluation as the config says: the shared body of `vla-rl eval` and the experiment's eval stage."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vla_rl.config import EnvConfig
from vla_rl.logging import make_trackers
from vla_rl.logging.console import ConsoleTracker
from vla_rl.stages.evaluation.action_sources import (
    ExpertActionSource,
    PolicyActionSource,
    load_policy_for_eval,
    resolve_policy_folder,
)
from vla_rl.stages.evaluation.config import EvalConfig
from vla_rl.stages.evaluation.env_backends import make_eval_envs
from vla_rl.stages.evaluation.runner import EvalSettings
from vla_rl.stages.evaluation.session import evaluate_and_report


@dataclass(frozen=True)
class EvalPlan:
    """What an evaluation reads of the config (:meth:`vla_rl.stages.run_plan.RunPlan.eval_plan`).

    - ``env``: the envs and tasks; ``eval``: the ``eval`` section (``eval.policy`` is what acts); ``seed``: the
      run's seed, which the episodes' seeds derive from.
    - ``config``: the resolved config, for the trackers and ``eval_info.json``.
    - ``run_record``: the command's ``run.json`` that ``eval_info.json`` names, or None.
    """

    env: EnvConfig
    eval: EvalConfig
    seed: int
    config: dict[str, Any]
    run_record: Path | None = None

    def with_policy(self, policy: str) -> EvalPlan:
        """The same evaluation of another policy (a folder, or ``expert``)."""
        return dataclasses.replace(self, eval=dataclasses.replace(self.eval, policy=policy))


def run(plan: EvalPlan, run_dir: Path) -> tuple[dict, Path]:
    """Evaluate ``plan.eval.policy`` (a policy/checkpoint/run folder, or ``expert``) into ``run_dir``.

    Writes ``run_dir/eval_info.json`` (naming ``plan.run_record``), metrics and videos; returns (eval_info
    document, its path).

    Raises:
        PolicyLoadError: the policy path cannot be read (the message names it).
    """
    env, eval_config, policy_path = plan.env, plan.eval, plan.eval.policy
    tasks = list(env.tasks)
    policy_info: dict = {"path": None if policy_path == "expert" else policy_path}
    if policy_path == "expert":
        source = ExpertActionSource(noise_std=eval_config.expert_noise_std, seed=plan.seed)
        policy_info.update(kind="expert", expert_noise_std=eval_config.expert_noise_std)
    else:  # the policy is loaded before any env renders in this process (see docs/platform.md)
        policy_info.update(kind="pretrained", resolved_path=str(resolve_policy_folder(policy_path)),
                           deterministic=eval_config.deterministic)  # fmt: skip
        source = PolicyActionSource(load_policy_for_eval(policy_path), eval_config.deterministic)
    settings = EvalSettings(episodes_per_task=eval_config.episodes_per_task, seed=plan.seed,
                            split=eval_config.split, protocol=eval_config.protocol,
                            video=eval_config.video)  # fmt: skip
    num_workers = eval_config.num_workers
    envs = make_eval_envs(env.factory_id, env.kwargs, tasks, eval_config.num_envs, num_workers, seed=plan.seed,
                          remote=env.remote)  # fmt: skip
    tracker = make_trackers(list(eval_config.trackers), run_dir, plan.config, project=eval_config.project)
    console = tracker.find(ConsoleTracker)
    bar = console.progress("episodes", len(tasks) * settings.episodes_per_task) if console else None
    env_info = {"id": env.id, "kwargs": env.kwargs_record(), "num_envs": envs.num_envs, "num_workers": num_workers}
    try:
        document, path = evaluate_and_report(
            envs, source, tasks, settings, run_dir, policy_info, env_info, plan.config, tracker=tracker,
            on_episode=(lambda _episode: bar.advance()) if bar else None, run_record=plan.run_record,
        )  # fmt: skip
    finally:
        tracker.close()
        envs.close()
    return document, path


def evaluate_policy_folders(plan: EvalPlan, folders: dict[str, str], output: Path) -> dict[str, dict]:
    """Evaluate several policies (name -> folder) into ``output/<name>``, all on the same episodes (the split
    and seeds of ``plan``); returns name -> eval_info."""
    documents = {}
    for name, folder in folders.items():
        document, path = run(plan.with_policy(folder), output / name)
        overall = document["overall"]
        print(f"[eval] {name}: success {overall['success_rate']:.3f} ({overall['successes']}/{overall['episodes']}); "
              f"{path}")  # fmt: skip
        documents[name] = document
    return documents
