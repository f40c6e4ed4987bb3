"""Config overrides of a tiny training run (2-core CPU: every run is a few seconds of compute)."""

TINY_TRAINING = [
    "experiment=rl_only",
    "env.tasks=[reach]",
    "env.kwargs.image_size=32",
    "trainer.envs_per_stage=2",
    "trainer.num_stages=2",
    "trainer.rollout_steps=3",
    "trainer.trackers=[jsonl]",
    "trainer.checkpoint_every=1",
    "algo.update.epochs=1",
    "algo.update.num_minibatches=2",
    "algo.update.micro_batch_size=4",
    "policy.embedding_dim=64",
    "+policy.head.options.hidden_dim=64",
    "+policy.head.options.num_blocks=1",
    "policy.value.hidden_dims=[32]",
    "eval.trackers=[]",
]


def for_refiner(overrides: list[str]) -> list[str]:
    """``overrides`` for a policy whose head is a refiner (residual, steered): the tiny denoiser sizes go to
    the chain head it wraps (``policy.head.options.base.options``)."""
    return [o.replace("+policy.head.options.", "+policy.head.options.base.options.") for o in overrides]
