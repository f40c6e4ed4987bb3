"""The policy protocol: what the core (rollout and actor workers, SFT, evaluation) calls on a policy.

A policy is an ``nn.Module`` built by a factory ``make(config: dict, io_spec: dict, stats: dict | None)``
(``policies.factory`` has the whole contract and ``vla-rl policies check`` its conformance kit). Observations are
``{"images": {camera: uint8 (B, H, W, 3)}, "state": float (B, S), "instruction": list[str]}``; actions are chunks
``(B, H, A)`` in the env's units. Per-dimension log-probs ``(B, H, A)`` are what every head returns;
:func:`reduce_log_prob` reduces them to the granularity an algorithm asks for (``algo.update.log_prob_granularity``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

#: Where PPO's ratio is taken: per action dimension ``(B, H, A)``, per action ``(B, H)`` or per chunk ``(B,)``.
LogProbGranularity = Literal["dimension", "action", "chunk"]


def reduce_log_prob(log_prob: torch.Tensor, granularity: LogProbGranularity) -> torch.Tensor:
    """Reduce per-dimension log-probs ``(B, H, A)`` to the asked granularity.

    Returns ``(B, H, A)`` for "dimension", ``(B, H)`` for "action", ``(B,)`` for "chunk".
    """
    if granularity == "dimension":
        return log_prob
    if granularity == "action":
        return log_prob.sum(-1)
    if granularity == "chunk":
        return log_prob.sum((-2, -1))
    raise ValueError(f"unknown log-prob granularity {granularity!r}; use 'dimension', 'action' or 'chunk'")


@runtime_checkable
class ActingPolicy(Protocol):
    """Anything that maps an observation batch to action chunks (what evaluation needs).

    Returns ``(actions (B, H, A) numpy or torch, extras dict)``. ``generator`` is the source of any sampling noise
    (a flow head's initial noise, for instance), so that evaluation repeats exactly.
    """

    def act(
        self, obs_batch: dict[str, Any], deterministic: bool = True, generator: Any = None
    ) -> tuple[Any, dict[str, Any]]: ...


@runtime_checkable
class Policy(ActingPolicy, Protocol):
    """What training calls on a policy besides :meth:`act`.

    - ``act`` (rollouts): ``extras`` holds at least ``"log_prob"`` ``(B, H, A)`` and ``"value"`` ``(B,)``, and
      everything ``evaluate`` needs to recompute them.
    - ``evaluate(obs, extras) -> (log_prob (B, H, A), entropy (B, H, A) or None, value (B,))`` with gradients,
      equal to ``act``'s ``log_prob`` for the same weights (the PPO update).
    - ``value(obs) -> (B,)``: the critic (bootstrapping a cut episode).
    - ``bc_loss(batch) -> scalar``: behaviour cloning on SFT's batches (``batch["action"]`` ``(B, H, A)``).
    - ``save_pretrained(folder) -> Path``: writes the policy and returns the folder.
    - ``config`` (holds ``chunk_size``, the ``H`` of every chunk), ``io_spec``, ``stats``: what it was built with.
    """

    config: Any
    io_spec: Any
    stats: Any

    def evaluate(self, obs_batch: dict[str, Any], extras: dict[str, Any]) -> tuple[Any, Any, Any]: ...

    def value(self, obs_batch: dict[str, Any]) -> Any: ...

    def bc_loss(self, batch: dict[str, Any]) -> Any: ...

    def save_pretrained(self, folder: str | Path) -> Path: ...
