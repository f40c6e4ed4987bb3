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
