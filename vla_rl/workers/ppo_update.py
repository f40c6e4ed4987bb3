"""One PPO/GRPO update of the actor (and critic) on a rollout batch, on one data-parallel rank.

Every rank holds the whole flat batch of valid steps; the split is computed identically on
all ranks from a seed, so no data moves between them:

    for each epoch:
        permute the steps (seeded), split into ``num_minibatches`` mini-batches
        for each mini-batch:
            pad it to a multiple of the world size (masked copies), take this rank's equal shard
            for each micro-batch of the shard (gradient accumulation):
                gradients are reduced across ranks only on the last micro-batch
                loss = policy loss + vf_coef * value loss - entropy bonus + kl_coef * KL
            (with a success replay: its micro-batches' weight * behaviour-cloning loss, success_replay.py)
            clip the gradient norm, step the optimizer and the learning-rate schedule

Losses are normalised by the *global* count of the mini-batch (known on every rank), and
multiplied by the world size because FSDP averages gradients over ranks: the update is
then the same at any world size, up to float rounding.

The batch is the trainer's flat batch of valid steps (batch size ``[B]``; keys in
:mod:`vla_rl.algos.batch`): the update reads ``observation``, ``extras``, ``old_log_prob`` (B, H, A),
``advantage`` (B,), ``return`` (B,), ``value`` (B,) and ``mask`` (B,) (False on padding).
"""

from __future__ import annotations

import typing
from collections import defaultdict
from dataclasses import dataclass, field

import torch
from tensordict import TensorDict
from torch import nn

from contract.config_reader import require
from contract.policy import LogProbGranularity, reduce_log_prob
from vla_rl.algos.batch import minibatch_indices, pad_to_multiple, shard_for_rank, split_microbatches
from vla_rl.algos.kl import KL_ESTIMATORS, kl_loss
from vla_rl.algos.losses import (
    POLICY_LOSSES,
    PolicyLossConfig,
    entropy_bonus_loss,
    get_policy_loss,
    value_loss,
)
from vla_rl.runtime.fsdp import set_gradient_sync
from vla_rl.workers.success_replay import LOSS_KEY as REPLAY_LOSS_KEY
from vla_rl.workers.success_replay import SuccessReplay, micro_batches, micro_seed, replay_loss

TOKENS_PER_STEP_MODES = ("token-mean", "seq-mean-token-sum-norm")


@dataclass(frozen=True)
class UpdateConfig(PolicyLossConfig):
    """Hyper-parameters of the update (the ``algo.update`` section; defaults in parentheses).

    - The policy loss's own (:class:`vla_rl.algos.losses.PolicyLossConfig`, defined there once):
      ``clip_low`` (0.2), ``clip_high`` (0.28), ``dual_clip_c`` (3.0), ``log_ratio_clamp`` (20),
      ``aggregation`` ("token-mean"); the update passes itself to the loss.
    - ``epochs`` (4): passes over the batch.
    - ``num_minibatches`` (4): optimizer steps per epoch.
    - ``micro_batch_size`` (32): samples per forward/backward on one rank (gradient accumulation).
    - ``policy_loss`` ("ppo_clip"): a name from ``vla_rl.algos.POLICY_LOSSES``.
    - ``log_prob_granularity`` ("action": one ratio per action of a chunk).
    - ``vf_coef`` (0.5; 0 for critic-free GRPO), ``value_clip`` (None), ``value_huber_delta`` (None).
    - ``entropy_coef`` (0.0; only heads with a closed-form entropy), ``kl_coef`` (0.0), ``kl_estimator`` ("k3").
    - ``max_grad_norm`` (1.0).
    """

    epochs: int = 4
    num_minibatches: int = 4
    micro_batch_size: int = 32
    policy_loss: str = "ppo_clip"
    log_prob_granularity: str = "action"
    vf_coef: float = 0.5
    value_clip: float | None = None
    value_huber_delta: float | None = None
    entropy_coef: float = 0.0
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()  # the types of every field, and the ranges of the policy loss's own
        for name in ("epochs", "num_minibatches", "micro_batch_size"):
            require(self, name, low=1)
        require(self, "policy_loss", choices=sorted(POLICY_LOSSES))
        require(self, "log_prob_granularity", choices=typing.get_args(LogProbGranularity))
        require(self, "kl_estimator", choices=sorted(KL_ESTIMATORS))
        for name in ("value_clip", "value_huber_delta", "max_grad_norm"):
            require(self, name, low=0, low_open=True)
        for name in ("vf_coef", "entropy_coef", "kl_coef"):
            require(self, name, low=0)


@dataclass
class UpdateContext:
    """What the update needs besides the batch."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler | None
    rank: int = 0
    world_size: int = 1
    reference: nn.Module | None = None
    train_policy: bool = True  # False: critic warm-up, only the value loss is minimised
    metrics: dict[str, float] = field(default_factory=dict)


def observation_of(batch: TensorDict, instructions: list[str]) -> dict:
    """The policy's observation dict from the batch's ``observation`` entry."""
    observation = batch["observation"]
    return {
        "images": {camera: observation["images", camera] for camera in observation["images"].keys()},
        "state": observation["state"],
        "instruction": [instructions[int(i)] for i in observation["instruction_id"].tolist()],
    }


def extras_of(batch: TensorDict) -> dict[str, torch.Tensor]:
    return {key: batch["extras", key] for key in batch["extras"].keys()}


def normalizer_for(mask: torch.Tensor, tokens_per_step: int, aggregation: str) -> float:
    """The global denominator of a mini-batch for ``aggregation`` (see ``vla_rl.algos.aggregation``)."""
    valid = float(mask.sum().clamp(min=1))
    return valid * tokens_per_step if aggregation in TOKENS_PER_STEP_MODES else valid


def micro_batch_loss(
    context: UpdateContext, config: UpdateConfig, micro: TensorDict, instructions: list[str], normalizer: float,
    value_normalizer: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:  # fmt: skip
    """The loss of one micro-batch (already scaled for accumulation and data parallelism)."""
    observation = observation_of(micro, instructions)
    log_prob, entropy, values = context.model.evaluate(observation, extras_of(micro))
    granularity = config.log_prob_granularity
    log_prob = reduce_log_prob(log_prob.float(), granularity)
    old_log_prob = reduce_log_prob(micro["old_log_prob"].float(), granularity)
    mask = micro["mask"]
    policy = get_policy_loss(config.policy_loss)(
        log_prob, old_log_prob, micro["advantage"], mask, config, normalizer
    )
    loss = policy.loss if context.train_policy else torch.zeros((), device=policy.loss.device)
    metrics = {f"policy/{k}": v for k, v in policy.metrics.items()}
    metrics["loss/policy"] = policy.loss.detach()
    if config.vf_coef > 0:
        critic = value_loss(
            values.float(), micro["value"], micro["return"], mask, config.value_clip, config.value_huber_delta,
            "token-mean", value_normalizer,
        )  # fmt: skip
        loss = loss + config.vf_coef * critic.loss
        metrics["loss/value"] = critic.loss.detach()
        metrics.update({f"critic/{k}": v for k, v in critic.metrics.items()})
    if config.entropy_coef > 0:
        entropy_reduced = None if entropy is None else reduce_log_prob(entropy.float(), granularity)
        bonus = entropy_bonus_loss(entropy_reduced, mask, config.entropy_coef, config.aggregation, normalizer)
        loss = loss + bonus.loss
        metrics["loss/entropy"] = bonus.loss.detach()
    if config.kl_coef > 0:
        if context.reference is None:
            raise RuntimeError("kl_coef > 0 needs a reference policy; the actor worker builds one from the start weights")
        with torch.no_grad():
            ref_log_prob, _, _ = context.reference.evaluate(observation, extras_of(micro))
        kl = kl_loss(
            log_prob, reduce_log_prob(ref_log_prob.float(), granularity), mask, config.kl_estimator,
            config.aggregation, normalizer=normalizer,
        )  # fmt: skip
        loss = loss + config.kl_coef * kl
        metrics["loss/kl"] = kl.detach()
    return loss * context.world_size, metrics


def ppo_update(
    context: UpdateContext, config: UpdateConfig, batch: TensorDict, instructions: list[str], seed: int,
    replay: SuccessReplay | None = None,
) -> dict[str, float]:
    """Run the update of the module docstring.

    ``replay``: the success replay (:mod:`vla_rl.workers.success_replay`): each optimizer step also minimises
    ``replay.weight`` times the policy's behaviour-cloning loss on that step's replay shard (not during the
    critic warm-up); None: the update as before, to the bit.

    Returns this rank's metrics averaged over its mini-batches; averaging them over ranks gives the
    global figures.
    """
    model, optimizer = context.model, context.optimizer
    model.train()
    tokens_per_step = int(reduce_log_prob(batch["old_log_prob"][:1], config.log_prob_granularity)[0].numel())
    sums: dict[str, float] = defaultdict(float)
    steps = 0
    for epoch in range(config.epochs):
        generator = torch.Generator().manual_seed(seed * 1000 + epoch)
        for indices in minibatch_indices(batch.shape[0], config.num_minibatches, generator):
            minibatch = batch[indices]
            normalizer = normalizer_for(minibatch["mask"], tokens_per_step, config.aggregation)
            value_normalizer = normalizer_for(minibatch["mask"], 1, "token-mean")
            padded = pad_to_multiple(minibatch, context.world_size)
            shard = shard_for_rank(padded, context.rank, context.world_size)
            micro_batches = split_microbatches(shard, config.micro_batch_size)
            replay_micros = _replay_micro_batches(context, config, replay, steps)
            backward_passes = len(micro_batches) + len(replay_micros)
            for index, micro in enumerate(micro_batches):
                set_gradient_sync(model, index == backward_passes - 1)
                loss, metrics = micro_batch_loss(context, config, micro, instructions, normalizer, value_normalizer)
                loss.backward()
                for key, value in metrics.items():
                    # loss/* are this micro-batch's share of the global mini-batch loss (averaging them over
                    # ranks after the world-size factor gives the sum); the rest are means, weighted by size.
                    weight = context.world_size if key.startswith("loss/") else micro.shape[0] / max(shard.shape[0], 1)
                    sums[key] += float(value) * weight
            for index, (micro, share, first_chunk) in enumerate(replay_micros):
                set_gradient_sync(model, len(micro_batches) + index == backward_passes - 1)
                bc = replay_loss(model, micro, micro_seed(seed, steps, first_chunk), _device_of(model))
                (replay.weight * share * bc).backward()
                # the shard's mean; collect_rank_metrics averages the ranks' means: the batch's mean
                sums[REPLAY_LOSS_KEY] += float(bc.detach()) * share
            grad_norm = torch.nn.utils.clip_grad_norm_(
                [p for p in model.parameters() if p.requires_grad], config.max_grad_norm
            )
            grad_norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
            sums["optim/grad_norm"] += float(grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if context.scheduler is not None:
                context.scheduler.step()
            steps += 1
    metrics = {key: value / max(steps, 1) for key, value in sums.items()}
    metrics["optim/lr"] = optimizer.param_groups[0]["lr"]
    return metrics


def _replay_micro_batches(
    context: UpdateContext, config: UpdateConfig, replay: SuccessReplay | None, step: int
) -> list[tuple[dict, float, int]]:
    """The success replay's micro-batches of optimizer step ``step`` on this rank (none without a replay, and
    during the critic warm-up, which trains no policy)."""
    if replay is None or replay.weight == 0 or not context.train_policy:
        return []
    shard, offset = replay.shard(step, context.rank, context.world_size)
    return list(micro_batches(shard, config.micro_batch_size, offset))


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device
