"""The tiny sizes of an experiment: the overrides the resume tests and ``scripts/reference_runs.py`` train with.

Small enough for two CPU cores; every experiment keeps its head, algorithm, vision branch and env.
"""

from __future__ import annotations

from omegaconf import OmegaConf

from vla_rl.config import read_env_section
from vla_rl.config.loading import load_config

TINY = [
    "experiment.stages=[rl]",
    "trainer.envs_per_stage=2",
    "trainer.num_stages=2",
    "trainer.rollout_steps=2",
    "trainer.trackers=[jsonl]",
    "trainer.checkpoint_every=1",
    "trainer.eval_every=0",
    "algo.update.epochs=1",
    "algo.update.num_minibatches=2",
    "algo.update.micro_batch_size=4",
]
#: Policy sizes, where the experiment's policy has them (a VLM policy's width is its backbone's).
TINY_POLICY = {"embedding_dim": "32", "value.hidden_dims": "[16]"}


def tiny_overrides(experiment: str) -> list[str]:
    """TINY for ``experiment``, with its own env's smallest images and one critic warm-up iteration at most."""
    cfg = load_config([f"experiment={experiment}"])
    overrides = [f"experiment={experiment}", *TINY]
    overrides += [f"policy.{key}={value}" for key, value in TINY_POLICY.items()
                  if OmegaConf.select(cfg.policy, key) is not None]  # fmt: skip
    if read_env_section(cfg).id == "tabletop":
        overrides += ["env.tasks=[reach]", "env.kwargs.image_size=32"]
    else:
        overrides += ["env.kwargs.image_size=32", "trainer.envs_per_stage=1", "trainer.num_stages=1"]
    if cfg.algo.critic_warmup_iterations > 0:
        overrides.append(
            "algo.critic_warmup_iterations=1"
        )  # the first checkpoint: the policy never had a gradient
    if cfg.algo.name == "grpo":
        overrides.append("algo.group_size=2")
    if cfg.trainer.task_sampling.mode == "failure":
        overrides.append("trainer.task_sampling.min_envs_per_task=0")  # one env among all the env's tasks
    return overrides
