"""The vectorised-env interface of the workers and the evaluation: N envs stepped one action chunk at a time.

Modelled on Stable-Baselines3's ``VecEnv``: :meth:`VecEnv.step_async` starts a step and :meth:`VecEnv.step_wait`
finishes it (so a caller can overlap inference with simulation), :meth:`VecEnv.env_method` and
:meth:`VecEnv.get_attr` reach what a wrapper forwards without re-spelling it. Implementations: the envs of one
process (``vla_rl.workers.chunked_envs.ChunkedEnvs``) and one stage of an env worker group seen as one batch
(``vla_rl.stages.evaluation.env_backends.WorkerGroupEvalEnvs``).

Shapes: ``action_chunks`` ``(N, H, A)``; observations are dicts of arrays with leading dim ``N``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any


class VecEnv(abc.ABC):
    """``num_envs`` envs stepped together, one action chunk each per step."""

    @property
    @abc.abstractmethod
    def num_envs(self) -> int:
        """N, the envs stepped together."""

    @abc.abstractmethod
    def env_spec(self) -> Any:
        """The env spec (``envs.base.EnvSpec``) of the first env: cameras, state and action sizes and bounds."""

    @abc.abstractmethod
    def reset(self, seeds: Sequence[int | None] | None = None, init_states: Sequence[Any] | None = None,
              tasks: Sequence[str | None] | None = None) -> dict[str, Any]:  # fmt: skip
        """Reset every env, optionally with per-env seeds, initial states or tasks; the batch of observations."""

    @abc.abstractmethod
    def step_async(self, action_chunks: Any) -> None:
        """Start executing ``action_chunks`` ``(N, H, A)``; :meth:`step_wait` returns the outcome."""

    @abc.abstractmethod
    def step_wait(self) -> Any:
        """The outcome of the step :meth:`step_async` started (``vla_rl.workers.chunked_envs.ChunkResult``).

        Raises:
            RuntimeError: no step was started.
        """

    def step(self, action_chunks: Any) -> Any:
        """Execute ``action_chunks`` ``(N, H, A)`` and return the outcome (:meth:`step_async` + :meth:`step_wait`)."""
        self.step_async(action_chunks)
        return self.step_wait()

    @abc.abstractmethod
    def env_method(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> Any:
        """Call the envs' method ``name`` (for the envs ``indices`` where given); a result covers the envs in order.

        Raises:
            AttributeError: ``name`` is not a method the envs offer (the message lists those that are).
        """

    @abc.abstractmethod
    def get_attr(self, name: str) -> list[Any]:
        """Attribute ``name`` of every env, a list over envs.

        Raises:
            AttributeError: ``name`` is not an attribute the envs offer (the message lists those that are).
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Close every env (and the processes that hold them, where this object owns them)."""
