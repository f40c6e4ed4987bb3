"""Every named experiment composes, validates, and its rollout window shows the learner whole episodes."""

from __future__ import annotations

import pytest

from envs.registry import resolve
from vla_rl.config import config_dir, env_kwargs, load_config, resolve_tasks, validate_config
from vla_rl.experiment import env_io_spec

EXPERIMENTS = sorted(path.stem for path in (config_dir() / "experiment").glob("*.yaml") if path.stem != "base")


def _experiment(name: str):
    cfg = load_config([f"experiment={name}"])
    validate_config(cfg)
    return cfg


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_named_experiment_composes_and_validates(name):
    cfg = _experiment(name)
    assert cfg.experiment.stages, f"experiment {name} runs no stage"
    assert set(cfg.experiment.stages) <= {"collect", "sft", "rl", "eval"}


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_rollout_window_covers_the_longest_episode(name):
    """A PPO iteration resets every env and runs trainer.rollout_steps chunks: an episode longer than that
    never shows its end (nor its success reward) to the learner; a GRPO rollout must hold a whole episode."""
    cfg = _experiment(name)
    if "rl" not in cfg.experiment.stages:
        pytest.skip(f"experiment {name} has no RL stage")
    if name == "robosuite_lift":
        pytest.importorskip("robosuite")
    entry, _ = resolve(str(cfg.env.id))
    kwargs = env_kwargs(cfg.env)
    longest = max(env_io_spec(entry.name, task, kwargs)["max_episode_steps"]
                  for task in resolve_tasks(cfg.env, entry.tasks))  # fmt: skip
    window = int(cfg.trainer.rollout_steps) * int(cfg.policy.chunk_size)
    assert window >= longest, (
        f"experiment {name}: trainer.rollout_steps={cfg.trainer.rollout_steps} chunks of {cfg.policy.chunk_size} "
        f"= {window} env steps, shorter than the longest episode ({longest} steps)"
    )
