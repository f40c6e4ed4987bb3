"""The rollout batch: one ``tensordict.TensorDict`` with batch dims ``[num_envs, num_steps]``.

A step is one action chunk (the MDP step). Keys (``N = num_envs``, ``T = num_steps``, ``H`` chunk
length, ``A`` action dims; every entry starts with ``(N, T)``):

=====================  =====================  ==========================================================
key                    shape, dtype           meaning
=====================  =====================  ==========================================================
``observation``        nested TensorDict      what the policy saw (images, state, instruction tokens)
``action_chunk``       (N, T, H, A) float     the chunk executed (unnormalised, the env's units)
``reward``             (N, T) float           rewards summed over the env steps of the chunk
``terminated``         (N, T) bool            the episode reached a terminal state at this step
``truncated``          (N, T) bool            the episode was cut (time limit) at this step
``mask``               (N, T) bool            valid step; False after an episode ended (no auto-reset)
``rollout_log_prob``   (N, T, H, A) float     per-dimension log-probs under the rollout policy
``replay``             nested TensorDict      the head's replay extras, to recompute log-probs exactly
``value``              (N, T) float           critic value of the observation (critic estimators)
``next_value``         (N, T) float           value of the following / final observation, see
                                              :func:`vla_rl.algos.advantages.next_values_from`
``group_id``           (N, T) int64           GRPO group (envs that share an initial state); constant in T
``old_log_prob``       (N, T, H, A) float     log-probs the PPO ratio divides by (see
                                              :func:`attach_old_log_probs`)
=====================  =====================  ==========================================================

The first seven keys are required in every batch; the estimators name what else they read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from tensordict import TensorDict

REQUIRED_KEYS = (
    "observation",
    "action_chunk",
    "reward",
    "terminated",
    "truncated",
    "mask",
    "rollout_log_prob",
    "replay",
)
_BOOL_KEYS = ("terminated", "truncated", "mask")
_FLOAT_STEP_KEYS = ("reward", "value", "next_value")
_NESTED_KEYS = ("observation", "replay")


def build_rollout_batch(
    observation: Mapping[str, torch.Tensor] | TensorDict,
    action_chunk: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    mask: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    replay: Mapping[str, torch.Tensor] | TensorDict | None = None,
    **optional: torch.Tensor,
) -> TensorDict:
    """Assemble and validate a rollout batch; ``optional`` holds e.g. ``value``, ``next_value``, ``group_id``.

    ``group_id`` may be given per env ``(N,)``; it is repeated over the steps. ``replay`` defaults to an
    empty nested TensorDict (heads without replay extras).
    """
    num_envs, num_steps = reward.shape
    batch_size = [num_envs, num_steps]
    entries: dict[str, object] = {
        "observation": TensorDict(dict(observation), batch_size=batch_size),
        "action_chunk": action_chunk,
        "reward": reward,
        "terminated": terminated,
        "truncated": truncated,
        "mask": mask,
        "rollout_log_prob": rollout_log_prob,
        "replay": TensorDict(dict(replay or {}), batch_size=batch_size),
    }
    for key, tensor in optional.items():
        if key == "group_id" and tensor.dim() == 1:
            tensor = tensor.reshape(-1, 1).expand(num_envs, num_steps)
        entries[key] = tensor
    try:
        batch = TensorDict(entries, batch_size=batch_size)
    except RuntimeError as error:
        shapes = {
            key: tuple(value.shape) for key, value in entries.items() if isinstance(value, torch.Tensor)
        }
        raise ValueError(
            f"rollout batch entries must all start with (num_envs, num_steps) = {tuple(batch_size)}; got {shapes}"
        ) from error
    validate_rollout_batch(batch)
    return batch


def validate_rollout_batch(batch: TensorDict, required: tuple[str, ...] = ()) -> None:
    """Check the schema above (plus the keys ``required``); raise naming the first offending key."""
    if not isinstance(batch, TensorDict) or batch.batch_dims != 2:
        raise ValueError(
            "a rollout batch must be a TensorDict with batch dims [num_envs, num_steps]; got "
            f"{type(batch).__name__} with batch size {getattr(batch, 'batch_size', None)}"
        )
    present = set(batch.keys())
    for key in REQUIRED_KEYS + tuple(required):
        if key not in present:
            raise KeyError(
                f"the rollout batch has no key {key!r}; it holds {sorted(present)}. "
                "Build batches with vla_rl.algos.batch.build_rollout_batch."
            )
    for key in _NESTED_KEYS:
        if not isinstance(batch.get(key), TensorDict):
            raise TypeError(
                f"rollout batch key {key!r} must be a nested TensorDict, got {type(batch.get(key)).__name__}"
            )
    for key in _BOOL_KEYS:
        if batch[key].dtype != torch.bool:
            raise TypeError(f"rollout batch key {key!r} must be bool, got {batch[key].dtype}")
    for key in _FLOAT_STEP_KEYS:
        if key in present and (batch[key].dim() != 2 or not batch[key].is_floating_point()):
            raise TypeError(
                f"rollout batch key {key!r} must be a float (num_envs, num_steps) tensor, "
                f"got {batch[key].dtype} {tuple(batch[key].shape)}"
            )
    if batch["action_chunk"].dim() != 4:
        raise ValueError(
            f"rollout batch key 'action_chunk' must be (num_envs, num_steps, H, A), got {tuple(batch['action_chunk'].shape)}"
        )
    if "group_id" in present:
        group_id = batch["group_id"]
        if group_id.dtype != torch.long or group_id.dim() != 2:
            raise TypeError(
                f"rollout batch key 'group_id' must be int64 (num_envs, num_steps), got {group_id.dtype}"
            )
        if not bool((group_id == group_id[:, :1]).all()):
            raise ValueError(
                "rollout batch key 'group_id' must be constant along the steps of each env (one id per env)"
            )


def attach_old_log_probs(
    batch: TensorDict, bypass: bool, recompute: Callable[[TensorDict], torch.Tensor] | None = None
) -> TensorDict:
    """Return a shallow copy of ``batch`` with ``old_log_prob`` set, the denominator of the PPO ratio.

    ``bypass=True`` (bypass mode) uses the rollout's own ``rollout_log_prob`` and skips a forward pass;
    right when the rollout ran the same weights and numerics as the learner. ``bypass=False`` calls
    ``recompute(batch) -> (N, T, H, A)`` with the learner's current weights (e.g. when rollouts ran in
    lower precision or another engine), so the first PPO ratio is exactly 1.
    """
    result = batch.clone(recurse=False)
    if bypass:
        result["old_log_prob"] = batch["rollout_log_prob"].detach()
        return result
    if recompute is None:
        raise ValueError(
            "bypass=False needs a recompute function that evaluates the batch's log-probs; pass one"
        )
    with torch.no_grad():
        old_log_prob = recompute(batch)
    if old_log_prob.shape != batch["rollout_log_prob"].shape:
        raise ValueError(
            f"recomputed log-probs have shape {tuple(old_log_prob.shape)}, the rollout's "
            f"{tuple(batch['rollout_log_prob'].shape)}; recompute must return per-dimension log-probs (N, T, H, A)"
        )
    result["old_log_prob"] = old_log_prob.detach()
    return result


def valid_steps(batch: TensorDict) -> TensorDict:
    """Flatten ``[N, T]`` to one dim and keep the valid steps: a TensorDict of batch size ``[B]``."""
    flat = batch.reshape(-1)
    return flat[flat["mask"]]


def split_minibatches(
    batch: TensorDict, num_minibatches: int, seed: int, unit: str = "step"
) -> list[TensorDict]:
    """Shuffle with a seeded permutation and split into ``num_minibatches`` (sizes differ by at most 1).

    ``unit="step"`` (default): every valid step once, batch size ``[B_i]``. ``unit="row"``: whole env rows,
    batch size ``[N_i, T]`` (for sequence-level loss aggregation over trajectories).
    """
    if unit == "step":
        items = valid_steps(batch)
    elif unit == "row":
        items = batch
    else:
        raise ValueError(f"unknown mini-batch unit {unit!r}; use 'step' or 'row'")
    count = items.shape[0]
    if not 1 <= num_minibatches <= count:
        raise ValueError(
            f"num_minibatches={num_minibatches} must be between 1 and the number of {unit}s ({count})"
        )
    permutation = torch.randperm(count, generator=torch.Generator().manual_seed(seed))
    return [items[indices] for indices in torch.tensor_split(permutation, num_minibatches)]


def split_microbatches(minibatch: TensorDict, micro_batch_size: int) -> list[TensorDict]:
    """Consecutive slices of at most ``micro_batch_size`` along dim 0, for gradient accumulation."""
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size={micro_batch_size} must be >= 1")
    return [
        minibatch[start : start + micro_batch_size]
        for start in range(0, minibatch.shape[0], micro_batch_size)
    ]


def pad_to_multiple(batch: TensorDict, multiple: int) -> tuple[TensorDict, int]:
    """Pad dim 0 up to a multiple of ``multiple`` (the data-parallel world size).

    Padding entries are zeros with ``mask`` False (and ``group_id`` -1), so they weigh nothing in any
    masked loss. Returns ``(padded, num_padding)``; undo with :func:`unpad`.
    """
    if multiple < 1:
        raise ValueError(f"multiple={multiple} must be >= 1")
    size = batch.shape[0]
    if size == 0:
        raise ValueError("cannot pad an empty batch: there is no entry to take shapes from")
    num_padding = (-size) % multiple
    if num_padding == 0:
        return batch, 0
    template = batch[torch.zeros(num_padding, dtype=torch.long)]
    padding = template.apply(torch.zeros_like)
    if "group_id" in padding.keys():
        padding["group_id"] = torch.full_like(padding["group_id"], -1)
    return torch.cat([batch, padding], dim=0), num_padding


def unpad(batch: TensorDict, num_padding: int) -> TensorDict:
    """Drop the ``num_padding`` trailing entries that :func:`pad_to_multiple` added."""
    if not 0 <= num_padding <= batch.shape[0]:
        raise ValueError(f"num_padding={num_padding} is outside [0, {batch.shape[0]}] for this batch")
    return batch[: batch.shape[0] - num_padding]


def shard_for_rank(batch: TensorDict, rank: int, world_size: int) -> TensorDict:
    """The contiguous ``rank``-th of ``world_size`` equal shards along dim 0 (pad first)."""
    if batch.shape[0] % world_size != 0:
        raise ValueError(
            f"batch of {batch.shape[0]} entries does not split into {world_size} equal shards; "
            "call pad_to_multiple(batch, world_size) first"
        )
    if not 0 <= rank < world_size:
        raise ValueError(f"rank={rank} is outside [0, {world_size})")
    shard = batch.shape[0] // world_size
    return batch[rank * shard : (rank + 1) * shard]
