"""The RL progress bar's ETA counts to whichever of the iteration count, env-step budget and time limit ends the run."""

from __future__ import annotations

from vla_rl.stages.rl.config import TrainerConfig
from vla_rl.stages.rl.trainer import iterations_left


def test_before_any_iteration_only_the_iteration_count_is_known() -> None:
    config = TrainerConfig(iterations=100, max_env_steps=1000, time_limit_minutes=1.0)
    assert iterations_left(config, iteration=0, env_steps=0, done=0, done_env_steps=0, elapsed_s=0.0) == 100


def test_the_env_step_budget_ends_the_run_first() -> None:
    # 10 iterations of 3,700 env steps: 2,006,000 - 37,000 steps left, 3,700 a piece -> 532.2..., so 533 more
    config = TrainerConfig(iterations=100_000, max_env_steps=2_006_000)
    left = iterations_left(config, iteration=10, env_steps=37_000, done=10, done_env_steps=37_000, elapsed_s=70.0)
    assert left == 533


def test_a_resumed_run_judges_the_budget_by_this_fit_s_iterations_only() -> None:
    # resumed at iteration 40 (148,000 steps, 3,700 per iteration then); this fit ran 2 iterations of 1,000 steps
    config = TrainerConfig(iterations=1_000, max_env_steps=160_000)
    left = iterations_left(config, iteration=42, env_steps=150_000, done=2, done_env_steps=2_000, elapsed_s=10.0)
    assert left == 10  # 10,000 steps left at 1,000 per iteration


def test_the_time_limit_ends_the_run_first() -> None:
    # 5 iterations in 60 s (12 s each) of a 2-minute limit: 60 s left -> 5 more
    config = TrainerConfig(iterations=360, time_limit_minutes=2.0, max_env_steps=10**9)
    assert iterations_left(config, iteration=5, env_steps=500, done=5, done_env_steps=500, elapsed_s=60.0) == 5


def test_past_a_limit_nothing_is_left_and_the_count_caps_the_estimate() -> None:
    config = TrainerConfig(iterations=20, time_limit_minutes=1.0, max_env_steps=1_000)
    assert iterations_left(config, iteration=12, env_steps=1_200, done=12, done_env_steps=1_200, elapsed_s=30.0) == 0
    assert iterations_left(config, iteration=19, env_steps=190, done=19, done_env_steps=190, elapsed_s=1.0) == 1
