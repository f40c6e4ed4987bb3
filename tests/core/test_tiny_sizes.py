"""The tiny sizes (:mod:`vla_rl.config.tiny`) compose with an experiment and keep its head, algorithm and env."""

from __future__ import annotations

import pytest

from vla_rl.config.loading import load_config
from vla_rl.config.tiny import TINY, tiny_overrides


@pytest.mark.parametrize("experiment", ["default", "flow_grpo", "metaworld_mt10"])
def test_tiny_overrides_shrink_the_run_and_keep_the_experiment(experiment):
    full = load_config([f"experiment={experiment}", "run_dir=x"])
    tiny = load_config([*tiny_overrides(experiment), "run_dir=x"])
    assert tiny_overrides(experiment)[: len(TINY) + 1] == [f"experiment={experiment}", *TINY]
    assert (tiny.env.id, tiny.algo.name, tiny.policy.head, tiny.policy.vision) == (
        full.env.id, full.algo.name, full.policy.head, full.policy.vision,
    )  # fmt: skip
    assert list(tiny.experiment.stages) == ["rl"] and tiny.trainer.rollout_steps == 2
    assert tiny.env.kwargs.image_size == 32 and tiny.policy.embedding_dim == 32
    assert tiny.algo.critic_warmup_iterations == min(full.algo.critic_warmup_iterations, 1)
    sizes = (2, 2) if full.env.id == "tabletop" else (1, 1)  # other envs: larger scenes, one env
    assert (tiny.trainer.envs_per_stage, tiny.trainer.num_stages) == sizes
    if full.algo.name == "grpo":
        assert tiny.algo.group_size == 2
