"""Schema of the ``eval`` config section (`vla-rl eval`, the eval stage and the trainer's periodic evaluation).

Defaults live here only; ``configs/eval/*.yaml`` override them. docs/evaluation.md has the details.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contract.config_reader import FieldError, check_types, require
from vla_rl.stages.evaluation.metrics import EVAL_SPLITS

#: ``eval.protocol`` values (see :class:`EvalConfig`).
EVAL_PROTOCOLS = ("seeded", "libero")


@dataclass
class VideoConfig:
    """``eval.video``.

    - ``episodes_per_task``: one mp4 for each of the first this many episodes of every task (0: none).
    - ``grid_envs``: envs of the first round tiled into one grid mp4 per task (0 or 1: no grid).
    - ``cameras``: cameras in the video, side by side; empty: the env's first camera.
    - ``size``: [height, width] of each camera in the video (multiples of 16 encode without padding).
    """

    episodes_per_task: int = 2
    grid_envs: int = 4
    cameras: list[str] = field(default_factory=list)
    size: list[int] = field(default_factory=lambda: [128, 128])

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "episodes_per_task", low=0)
        require(self, "grid_envs", low=0)
        if len(self.size) != 2 or min(self.size) < 1:
            raise FieldError("size", list(self.size), "must be [height, width] of positive integers")


@dataclass
class EvalConfig:
    """``eval``.

    - ``policy``: what acts: ``expert`` (the env's scripted experts, a baseline), or a path: an exported policy
      folder (save_pretrained), a training checkpoint (checkpoints/iter_XXXXXX) or a run folder (its latest
      checkpoint).
    - ``protocol``: where episode k of a task starts. ``seeded``: from the reset seed derived from ``seed``,
      the task and k (the same on any number of envs). ``libero``: from the env's init state k, in order,
      as LIBERO is evaluated (its suites' 50 official init states: ``eval=libero`` sets 50 episodes); the
      env must declare ``env_spec.extra["num_init_states"]`` and accept ``reset(options={"init_state": k})``.
    - ``episodes_per_task``: episodes of every task (at most the env's init states with ``protocol=libero``).
    - ``num_envs``: envs stepped together, one episode per env per round; ``num_workers``: 0: envs in this
      process; N >= 1: N Ray env workers share the envs.
    - ``split``: which episodes: ``dev`` (the seeds recipes are chosen on) or ``test`` (seeds disjoint from
      ``dev`` and from training, for the numbers one publishes). The SFT and final policies of a run are scored
      on the same episodes; the trainer's periodic evaluation always uses ``dev``.
    - ``deterministic``: sample the policy's mean action (true) or draw from it (false).
    - ``expert_noise_std``: Gaussian noise (std) on the scripted experts' actions (policy=expert only).
    - ``output``: eval_info.json, metrics.jsonl and videos/.
    - ``trackers``: besides metrics.jsonl (always written): console, tensorboard, wandb (offline unless
      WANDB_MODE=online); ``project``: the tracker project.
    """

    policy: str = "expert"
    protocol: str = "seeded"
    episodes_per_task: int = 10
    num_envs: int = 4
    num_workers: int = 0
    split: str = "test"
    deterministic: bool = True
    expert_noise_std: float = 0.0
    output: str = "${run_dir}/eval"
    trackers: list[str] = field(default_factory=lambda: ["console"])
    project: str = "vla-rl"
    video: VideoConfig = field(default_factory=VideoConfig)

    def __post_init__(self) -> None:
        check_types(self)
        require(self, "episodes_per_task", low=1)
        if self.protocol not in EVAL_PROTOCOLS:
            raise FieldError("protocol", self.protocol, f"must be one of {', '.join(EVAL_PROTOCOLS)}")
        require(self, "num_envs", low=1)
        require(self, "num_workers", low=0)
        require(self, "expert_noise_std", low=0)
        if self.split not in EVAL_SPLITS:
            raise FieldError("split", self.split, f"must be one of {', '.join(EVAL_SPLITS)}")
