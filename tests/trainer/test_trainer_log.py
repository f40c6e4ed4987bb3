"""What the trainer logs per iteration, from a rollout's finished episodes (no workers needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vla_rl.runtime.profiling import PhaseTimer
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig
from vla_rl.stages.rl.rollout import Rollout
from vla_rl.stages.rl.trainer import Trainer


def test_success_rate_is_logged_overall_and_per_task(tmp_path):
    logged = {}
    tracker = SimpleNamespace(log_scalars=lambda metrics, step: logged.update(metrics, step=step))
    collector = SimpleNamespace(env_group=SimpleNamespace(restarts=0))
    trainer = Trainer(TrainerConfig(), AlgoConfig(name="grpo"), collector, None, None, tracker, tmp_path, seed=0)
    outcomes = {"reach": [True, False, True, True], "lift": [False, True], "open_drawer": [True]}
    episodes = [{"success": s, "return": float(s), "length": 10, "task": task}
                for task, successes in outcomes.items() for s in successes]  # fmt: skip
    trainer.log(4, Rollout(None, [], episodes, env_steps=70), {}, {}, PhaseTimer())
    assert logged["step"] == 5 and logged["train/episodes"] == 7
    assert logged["train/success_rate"] == pytest.approx(5 / 7)
    assert logged["train/reach/success_rate"] == pytest.approx(3 / 4)
    assert logged["train/lift/success_rate"] == pytest.approx(1 / 2)
    assert logged["train/open_drawer/success_rate"] == 1.0


def fake_trainer(tmp_path, tracker=None) -> Trainer:
    collector = SimpleNamespace(env_group=SimpleNamespace(restarts=0), tasks=("reach", "lift"))
    return Trainer(TrainerConfig(), AlgoConfig(name="grpo"), collector, None, None, tracker, tmp_path, seed=0)


def test_episode_figures_count_only_the_episodes_that_began_at_a_reset(tmp_path):
    # Two envs: each one's first episode (from the rollout's reset) failed; the quick successes after it
    # are what a fixed window overrepresents, so they count as episodes but not in the rates.
    logged = {}
    tracker = SimpleNamespace(log_scalars=lambda metrics, step: logged.update(metrics, step=step))
    episodes = [
        {"success": False, "return": 0.0, "length": 250, "task": "reach", "from_reset": True},
        {"success": True, "return": 1.0, "length": 20, "task": "lift", "from_reset": True},
        *({"success": True, "return": 1.0, "length": 20, "task": "lift", "from_reset": False} for _ in range(5)),
    ]
    fake_trainer(tmp_path, tracker).log(0, Rollout(None, [], episodes, env_steps=500), {}, {}, PhaseTimer())
    assert logged["train/episodes"] == 7
    assert logged["train/success_rate"] == 0.5 and logged["train/lift/success_rate"] == 1.0
    assert logged["train/episode_length"] == 135.0 and logged["train/episode_return"] == 0.5


def test_task_success_averages_only_the_episodes_that_began_at_a_reset(tmp_path):
    trainer = fake_trainer(tmp_path)
    trainer.state.task_success = {"reach": 0.5}
    episodes = [{"task": "reach", "success": False, "from_reset": True},
                *({"task": "reach", "success": True, "from_reset": False} for _ in range(3))]  # fmt: skip
    trainer.update_task_success(episodes)
    assert trainer.state.task_success == {"reach": pytest.approx(0.8 * 0.5 + 0.2 * 0.0)}
