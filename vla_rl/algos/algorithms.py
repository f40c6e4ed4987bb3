"""The RL algorithms by name (``algo.name``), each entry saying how its rollout is collected.

verl's ``core_algos`` is the model: the registry entry sits beside what it names. A new algorithm adds an
entry (:func:`register_algorithm`) with one of the collections below, or a new :class:`Collection`; the
trainer, the env workers and the rollout collector read the entry's collection, never the algorithm's name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Collection:
    """How a rollout is collected.

    - ``one_episode_per_env``: False: every env resets at the start of the iteration and auto-resets after
      each episode for the whole window, episodes cut at its end bootstrap from the critic. True: one episode
      per env, without auto-reset; the rollout ends when every episode has ended (or with the window), the
      steps after an end are masked, and each row has its outcome (``Rollout.success``).
    - ``grouped_initial_states``: envs come in groups of ``algo.group_size`` (inside one pipeline stage)
      that share their task and initial state; groups can be filtered by success rate.
    """

    name: str
    one_episode_per_env: bool
    grouped_initial_states: bool

    @property
    def auto_reset(self) -> bool:
        """The env workers reset an env whose episode ended."""
        return not self.one_episode_per_env


#: PPO's: a fixed window of chunks per env from seeded resets, with auto-reset.
CONTINUING = Collection("continuing", one_episode_per_env=False, grouped_initial_states=False)
#: GRPO's: one episode per env, in groups that share task and initial state.
GROUPED_EPISODES = Collection("episodes", one_episode_per_env=True, grouped_initial_states=True)


@dataclass(frozen=True)
class Algorithm:
    """A registry entry: the algorithm's ``name`` and its rollout's :class:`Collection`."""

    name: str
    collection: Collection


ALGORITHMS: dict[str, Algorithm] = {}


def register_algorithm(name: str, collection: Collection) -> Algorithm:
    """Make ``algo.name=<name>`` collect its rollouts as ``collection`` says."""
    if name in ALGORITHMS:
        raise ValueError(f"algorithm {name!r} is registered already")
    ALGORITHMS[name] = Algorithm(name, collection)
    return ALGORITHMS[name]


def get_algorithm(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise KeyError(f"unknown algorithm {name!r}; allowed: {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


register_algorithm("ppo", CONTINUING)  # with a critic: GAE by default (configs/algo/ppo.yaml)
register_algorithm("grpo", GROUPED_EPISODES)  # critic-free, group-relative advantages (configs/algo/grpo.yaml)
