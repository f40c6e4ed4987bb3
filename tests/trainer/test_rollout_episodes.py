"""Which finished episodes of a rollout began at their env's reset (the fair sample of the policy's episodes)."""

from __future__ import annotations

from collections import defaultdict

from tiny_training import TINY_TRAINING

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from vla_rl.algos.algorithms import CONTINUING
from vla_rl.config.loading import load_config
from vla_rl.stages.rl.experiment import plan_rl_run, rl_trainer
from vla_rl.stages.rl.rollout import episodes_from_reset
from vla_rl.stages.run_plan import read_run_plan


def test_each_env_ends_one_episode_from_its_reset_first_and_the_rest_are_not(ray_session, tmp_path):
    # Episodes of at most 4 env steps in a window of 5 chunks: every env finishes several.
    cfg = load_config([*TINY_TRAINING, "env.kwargs.max_episode_steps=4", f"run_dir={tmp_path}"])
    with rl_trainer(plan_rl_run(read_run_plan(cfg)), tmp_path / "rl") as trainer:
        rollout = trainer.collector.collect(5, seed=0, iteration=0, collection=CONTINUING)
    flags_by_env = defaultdict(list)
    for episode in rollout.episodes:
        flags_by_env[(episode["stage"], episode["env_index"])].append(episode["from_reset"])
    assert len(flags_by_env) == 4  # TINY: 2 stages x 2 envs
    assert all(flags[0] and not any(flags[1:]) for flags in flags_by_env.values())
    assert min(len(flags) for flags in flags_by_env.values()) >= 2
    assert len(episodes_from_reset(rollout.episodes)) == 4
