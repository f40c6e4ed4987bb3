"""A resumed actor continues its learning-rate schedule: the optimizer state (with each group's lr) and the
scheduler's step come back from the checkpoint, so the updates after a resume equal an uninterrupted run's.

Adam's moments alone would not show a lost optimizer state dict: DCP loads them in place, and only the
scheduled learning rate (held in the optimizer's param groups) would restart. The schedule here (warm-up, then
cosine) changes the learning rate at every step, and the expected rates are the closed form, not the code's.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict
from tiny_training import TINY_TRAINING as TINY

import policies  # noqa: F401  (before any rendering: see docs/platform.md)
from envs.registry import make
from vla_rl.config.loading import load_config
from vla_rl.stages.env_io import env_io_spec
from vla_rl.stages.rl.config import AlgoConfig, TrainerConfig, section
from vla_rl.stages.rl.experiment import policy_spec_from_config
from vla_rl.workers.actor_group import ActorGroup
from vla_rl.workers.chunked_envs import ChunkedEnvs

LR, CRITIC_LR, WARMUP, TOTAL, FLOOR = 1e-3, 1e-2, 3, 9, 0.1
SCHEDULE = [f"algo.optim.lr={LR}", f"algo.optim.critic_lr={CRITIC_LR}", f"algo.optim.warmup_steps={WARMUP}",
            "algo.optim.schedule=cosine", f"algo.optim.total_steps={TOTAL}", f"algo.optim.min_lr_ratio={FLOOR}",
            "algo.update.epochs=1", "algo.update.num_minibatches=2", "algo.update.micro_batch_size=4"]  # fmt: skip
STEPS_PER_UPDATE = 2  # one epoch of two mini-batches


def expected_factor(step: int) -> float:
    """Linear warm-up over WARMUP steps, then cosine from 1 to FLOOR over TOTAL - WARMUP steps (docs: optim)."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    progress = min(1.0, (step - WARMUP) / (TOTAL - WARMUP))
    return FLOOR + (1 - FLOOR) * (1 + math.cos(math.pi * progress)) / 2


def batches(spec, count: int, size: int = 8) -> list[tuple[TensorDict, list[str]]]:
    """``count`` update batches: observations of real envs, the policy's actions, seeded advantages."""
    policy = spec.build()
    envs = ChunkedEnvs(lambda i: make("tabletop/reach", image_size=32), size)
    result = []
    for index in range(count):
        observation = envs.reset(seeds=[100 * index + i for i in range(size)])
        _, extras = policy.act(observation, generator=torch.Generator().manual_seed(index))
        generator = torch.Generator().manual_seed(1000 + index)
        instructions = sorted(set(observation["instruction"]))
        batch = TensorDict({
            "observation": {
                "images": {k: torch.from_numpy(v) for k, v in observation["images"].items()},
                "state": torch.from_numpy(observation["state"]),
                "instruction_id": torch.tensor([instructions.index(t) for t in observation["instruction"]]),
            },
            "extras": {k: v for k, v in extras.items() if k not in ("log_prob", "value")},
            "old_log_prob": extras["log_prob"], "value": extras["value"],
            "advantage": torch.randn(size, generator=generator), "return": torch.randn(size, generator=generator),
            "mask": torch.ones(size, dtype=torch.bool),
        }, batch_size=[size])  # fmt: skip
        result.append((batch, instructions))
    envs.close()
    return result


def test_a_resumed_actor_continues_the_learning_rate_schedule_and_equals_an_uninterrupted_one(ray_session, tmp_path):
    cfg = load_config([*TINY, *SCHEDULE])
    spec = policy_spec_from_config(cfg, env_io_spec("tabletop", "reach", {"image_size": 32}), None)
    algo, trainer = section(cfg, "algo", AlgoConfig), section(cfg, "trainer", TrainerConfig)
    updates = batches(spec, 4)

    def group() -> ActorGroup:
        return ActorGroup(1, spec, algo.optim, algo.update, trainer.sharding)

    uninterrupted = group()
    try:
        for seed, (batch, instructions) in enumerate(updates):
            uninterrupted.update(batch, instructions, seed=seed)
        reference = uninterrupted.full_weights()
    finally:
        uninterrupted.shutdown()

    first = group()
    try:
        for seed, (batch, instructions) in enumerate(updates[:2]):
            first.update(batch, instructions, seed=seed)
        first.save(str(tmp_path / "checkpoint"))
    finally:
        first.shutdown()
    resumed = group()
    try:
        resumed.load(str(tmp_path / "checkpoint"))
        (state,) = resumed.call("learning_rates")
        step = 2 * STEPS_PER_UPDATE  # the next optimizer step
        assert state["scheduler_step"] == step and state["training_step"] == 2
        assert state["lr"]["actor"] == LR * expected_factor(step)  # 4: past warm-up, in the cosine
        assert state["lr"]["critic"] == CRITIC_LR * expected_factor(step)
        for seed, (batch, instructions) in enumerate(updates[2:], start=2):
            metrics = resumed.update(batch, instructions, seed=seed)
            assert metrics["optim/lr"] == LR * expected_factor((seed + 1) * STEPS_PER_UPDATE)
        weights = resumed.full_weights()
    finally:
        resumed.shutdown()
    start = spec.build().state_dict()
    assert max((reference[k] - start[k]).abs().max().item() for k in start) > 1e-4  # the updates moved weights
    difference = max((weights[k] - reference[k]).abs().max().item() for k in reference)
    assert difference < 1e-6, f"the resumed run's weights differ from the uninterrupted run's by {difference}"
