"""Two policies are scored on the same evaluation episodes: the seeds, tasks and initial states the env is reset
to are a function of the eval config alone (docs/evaluation.md), never of the policy.

Every "RL improved it" comparison of summary.json rests on this: the SFT and the final policy of a run are
evaluated by ``evaluate_policy_folders`` (the eval stage's body), and a policy-dependent term anywhere in the
seeding would score them on different episodes. The test records what the env itself sees and compares it
with the protocol computed here, independently of the code under test.
"""

from __future__ import annotations

import hashlib

import numpy as np
import point_env
import torch

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import resolve
from vla_rl.config import env_kwargs, resolve_tasks
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.evaluation.from_config import evaluate_policy_folders
from vla_rl.stages.rl.experiment import policy_spec_from_config
from vla_rl.stages.run_plan import read_run_plan

TASKS = ["reach_red", "reach_blue"]
EPISODES, SEED = 3, 11
OVERRIDES = [
    "env.id=point_env:make", f"env.tasks=[{','.join(TASKS)}]", "+env.kwargs.max_episode_steps=6", f"seed={SEED}",
    "policy.embedding_dim=64", "+policy.head.options.hidden_dim=64", "+policy.head.options.num_blocks=1",
    f"eval.episodes_per_task={EPISODES}", "eval.num_envs=2", "eval.video.episodes_per_task=0", "eval.video.grid_envs=0",
    "eval.trackers=[]", "eval.deterministic=false",
]  # fmt: skip


def protocol_seed(base_seed: int, task: str, episode: int, split: str) -> int:
    """docs/evaluation.md: episode k of task t starts from a hash of ``eval/<seed>/<task>`` plus k (dev), or of
    ``eval-test/<seed>/<task>`` plus k, placed in [3 * 2**30, 2**32) (test)."""
    salt = "eval" if split == "dev" else "eval-test"
    start = int.from_bytes(hashlib.sha256(f"{salt}/{base_seed}/{task}".encode()).digest()[:4], "little")
    return (start + episode) % (2**31 - 1) if split == "dev" else 3 * 2**30 + (start + episode) % 2**30


def initial_state(task: str, seed: int) -> dict:
    """The env's own initial state from ``seed``: a fresh env, reset directly."""
    env = point_env.make(task, max_episode_steps=6)
    _, info = env.reset(seed=seed, options={"task": task})
    return info["init_state"]


def saved_policy(cfg, folder, perturbation: float):
    """The configured policy (built with fixed weights), its weights moved by seeded noise of this scale."""
    entry, _ = resolve(str(cfg.env.id))
    io_spec = env_io_spec(entry.name, resolve_tasks(cfg.env, entry.tasks)[0], env_kwargs(cfg.env))
    policy = policy_spec_from_config(cfg, io_spec, None).build("cpu")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in policy.parameters():
            parameter.add_(perturbation * torch.randn(parameter.shape, generator=generator))
    return policy.save_pretrained(folder), {k: v.clone() for k, v in policy.state_dict().items()}


def test_two_policies_are_scored_on_the_episodes_the_eval_config_names(tmp_path, monkeypatch):
    cfg = load_config(OVERRIDES)
    first, first_weights = saved_policy(cfg, tmp_path / "sft", perturbation=0.0)
    second, second_weights = saved_policy(cfg, tmp_path / "final", perturbation=0.3)
    assert any(not torch.equal(first_weights[k], second_weights[k]) for k in first_weights)

    seen: list[dict] = []  # every reset and step the envs receive, in order
    reset, step = point_env.PointEnv.reset, point_env.PointEnv.step

    def recording_reset(self, *, seed=None, options=None):
        observation, info = reset(self, seed=seed, options=options)
        seen.append({"seed": seed, "task": info["task"], "init_state": info["init_state"], "actions": []})
        self.record = seen[-1]
        return observation, info

    def recording_step(self, action):
        self.record["actions"].append(np.asarray(action, dtype=np.float64).round(6).tolist())
        return step(self, action)

    monkeypatch.setattr(point_env.PointEnv, "reset", recording_reset)
    monkeypatch.setattr(point_env.PointEnv, "step", recording_step)

    assert cfg.eval.split == "test"  # the default: published numbers come from it
    documents, resets = {}, {}
    for name, folder in (("sft", first), ("final", second)):
        seen.clear()
        documents.update(evaluate_policy_folders(read_run_plan(cfg).eval_plan(), {name: str(folder)}, tmp_path / "eval"))
        resets[name] = [dict(r) for r in seen]

    expected = {task: [protocol_seed(SEED, task, k, cfg.eval.split) for k in range(EPISODES)] for task in TASKS}
    for name, document in documents.items():
        assert document["seeds"] == expected, name
        assert [e["seed"] for e in document["tasks"]["reach_red"]["episode_results"]] == expected["reach_red"]
        # the env really started each listed episode from that seed, task and the env's own initial state
        started = {(r["task"], r["seed"]): r["init_state"] for r in resets[name]}
        for task, seeds in expected.items():
            for seed in seeds:
                assert started.get((task, seed)) == initial_state(task, seed), (name, task, seed)
    layout = [[(r["seed"], r["task"], r["init_state"]) for r in resets[name]] for name in ("sft", "final")]
    assert layout[0] == layout[1]  # the same resets, in the same order, whatever the policy
    actions = [[r["actions"] for r in resets[name]] for name in ("sft", "final")]
    assert actions[0] != actions[1]  # ...while the two policies act differently
