"""The rollout batch, and how the update cuts it into mini-batches, rank shards and micro-batches.

:meth:`vla_rl.stages.rl.rollout.RolloutCollector.collect` returns one ``tensordict.TensorDict`` with batch dims
``[N, T]`` (``N`` envs, rows ordered stage by stage; ``T`` steps). A step is one action chunk (the MDP
step): ``H`` actions of ``A`` dims. Every entry starts with ``(N, T)``:

=====================  ======================  =========================================================
key                    shape, dtype            meaning
=====================  ======================  =========================================================
``observation``        nested TensorDict       what the policy saw at the step:
  ``images/<camera>``  (N, T, h, w, 3) uint8   one entry per camera
  ``state``            (N, T, S) float32       proprioception
  ``instruction_id``   (N, T) int64            index into ``Rollout.instructions`` (the texts)
``action_chunk``       (N, T, H, A) float32    the chunk sent to the env (env units, clipped)
``reward``             (N, T) float32          rewards summed over the chunk's executed steps; 0 if masked
``terminated``         (N, T) bool             the episode reached a terminal state at this step
``truncated``          (N, T) bool             the episode was cut (time limit) at this step
``mask``               (N, T) bool             valid step: the env was in an episode when the chunk began
                                               (False after an episode ended in ``episodes`` mode, and
                                               for groups that ``algo.filter_groups`` drops)
``success``            (N, T) bool             ``info["is_success"]`` at the chunk's last executed step
``rollout_log_prob``   (N, T, H, A) float32    per-dimension log-probs of the normalised, unclipped chunk
``extras``             nested TensorDict       the policy's ``act`` extras but ``log_prob`` and ``value``
                                               (``action_normalized``, ``replay.<name>``, maybe
                                               ``embedding``): what ``evaluate`` needs to recompute them
``value``              (N, T) float32          critic value of the observation
``next_value``         (N, T) float32          value of the next observation, see
                                               :func:`vla_rl.algos.advantages.next_values_from`
``group_id``           (N, T) int64            GRPO group (envs sharing an initial state): env index //
                                               ``group_size`` (dynamic sampling renumbers); constant in T
=====================  ======================  =========================================================

The trainer adds ``advantage`` and ``return`` (N, T) float32 and ``old_log_prob`` (N, T, H, A) (the
rollout's own log-probs: bypass mode), then hands :func:`valid_steps` of the batch, without
``success``, to the update: batch size ``[B]``, ``B`` the number of valid steps. The update
(:func:`vla_rl.workers.ppo_update.ppo_update`) cuts that flat batch with the functions below; every rank
computes the same cuts from the same seed.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict


def valid_steps(batch: TensorDict) -> TensorDict:
    """Flatten ``[N, T]`` to one dim and keep the steps whose ``mask`` is True: batch size ``[B]``."""
    flat = batch.reshape(-1)
    return flat[flat["mask"]]


def minibatch_indices(
    count: int, num_minibatches: int, generator: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """A permutation of ``range(count)`` drawn from ``generator``, split into ``num_minibatches`` index
    tensors whose sizes differ by at most one (the first ones are the larger; empty if ``count`` is smaller)."""
    permutation = torch.randperm(count, generator=generator)
    return torch.tensor_split(permutation, num_minibatches)


def pad_to_multiple(minibatch: TensorDict, multiple: int) -> TensorDict:
    """Pad dim 0 to a multiple of ``multiple`` (the world size) with copies of its first steps, ``mask`` False.

    Copies (not zeros) keep every head's log-prob finite on the padding: a zero denoising chain or
    noise level would give NaN, and NaN times a zero mask is still NaN in the gradient.
    """
    missing = (-minibatch.shape[0]) % multiple
    if missing == 0:
        return minibatch
    padding = minibatch[torch.arange(missing) % minibatch.shape[0]].clone()
    padding["mask"] = torch.zeros_like(padding["mask"])
    return torch.cat([minibatch, padding], dim=0)


def shard_for_rank(batch: TensorDict, rank: int, world_size: int) -> TensorDict:
    """The ``rank``-th of ``world_size`` contiguous equal shards of dim 0 (:func:`pad_to_multiple` first)."""
    if batch.shape[0] % world_size != 0:
        raise ValueError(
            f"a batch of {batch.shape[0]} steps does not split into {world_size} equal shards; "
            "pad it with pad_to_multiple(batch, world_size) first"
        )
    shard_size = batch.shape[0] // world_size
    return batch[rank * shard_size : (rank + 1) * shard_size]


def split_microbatches(shard: TensorDict, micro_batch_size: int) -> list[TensorDict]:
    """Consecutive slices of at most ``micro_batch_size`` steps, in order (gradient accumulation)."""
    return [shard[start : start + micro_batch_size] for start in range(0, shard.shape[0], micro_batch_size)]
