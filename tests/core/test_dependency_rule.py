"""Arrows point one way: the core's workers, algorithms, runtime, logging, trainer and rollout import no env
or policy package; they build envs and policies from import paths that the entry layer hands them."""

from __future__ import annotations

import ast

import point_env

from vla_rl.config import REPO_ROOT
from vla_rl.workers.env_worker import EnvWorker, EnvWorkerConfig

CORE = ["vla_rl/workers", "vla_rl/algos", "vla_rl/runtime", "vla_rl/logging", "vla_rl/stages/rl/trainer.py",
        "vla_rl/stages/rl/rollout.py", "vla_rl/stages/rl/config.py", "vla_rl/fields.py"]  # fmt: skip
#: The head contract (LogProbGranularity, reduce_log_prob) is the policy protocol the update reads.
ALLOWED = {("vla_rl/workers/ppo_update.py", "policies.heads.base")}


def imported_modules(path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_the_core_imports_no_env_or_policy_package():
    files = [p for entry in CORE for p in sorted((REPO_ROOT / entry).rglob("*.py")) or [REPO_ROOT / entry]]
    assert len(files) > 30
    found = [
        (str(path.relative_to(REPO_ROOT)), module)
        for path in files
        for module in imported_modules(path)
        if module.split(".")[0] in ("envs", "policies")
    ]
    assert set(found) <= ALLOWED, sorted(set(found) - ALLOWED)


made: list[str] = []


def make_counting(name: str, **kwargs):
    """An env factory of our own: what the entry layer could hand a worker instead of the registry's make."""
    made.append(name)
    return point_env.make(name.rpartition("/")[2], **kwargs)


def test_an_env_worker_builds_its_envs_with_the_factory_it_is_given():
    config = EnvWorkerConfig(env_id="points", env_kwargs={"max_episode_steps": 5}, tasks=("reach_red", "reach_blue"),
                             envs_per_stage=2, env_factory=f"{__name__}:make_counting")  # fmt: skip
    worker = EnvWorker(config)
    try:
        assert made == ["points/reach_red", "points/reach_blue"]
        assert worker.reset(0)["state"].shape == (2, 2)
    finally:
        worker.close()
