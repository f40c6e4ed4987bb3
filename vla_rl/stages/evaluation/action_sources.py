"""What acts during an evaluation: a policy (the :class:`contract.policy.ActingPolicy` protocol) or the scripted experts.

The evaluation loop asks an *action source* for the next action chunks ``(N, H, A)``:

- :class:`PolicyActionSource` calls ``policy.act(obs_batch, deterministic=...)`` on the driver;
- :class:`ExpertActionSource` has the scripted experts (``envs.experts``) act inside the process
  that holds the envs, since an expert reads the env's privileged state.

:func:`load_policy_for_eval` turns a path (an exported policy folder, a training checkpoint or a
run folder) into a policy that acts.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from contract.policy import ActingPolicy
from contract.vec_env import VecEnv

CHECKPOINT_PATTERN = re.compile(r"^iter_(\d+)$")
EXPORTED_FILES = ("config.json", "model.safetensors")


class PolicyLoadError(RuntimeError):
    """A policy path that cannot be evaluated; the message names the path and what was expected."""


class PolicyActionSource:
    """Chunks from an :class:`ActingPolicy` on the driver."""

    description = "policy"

    def __init__(self, policy: ActingPolicy, deterministic: bool = True, name: str = "policy"):
        self.policy = policy
        self.deterministic = deterministic
        self.name = name
        self.generator = None

    def prepare(self, envs: VecEnv) -> None:
        pass

    def seed_round(self, seed: int) -> None:
        """Seed the policy's sampling for the next round of episodes.

        Without it the noise came from torch's global generator, so a policy scored differently after
        another stage (RL) had drawn from it than when evaluated alone.
        """
        import torch

        self.generator = torch.Generator().manual_seed(int(seed))

    def next_chunks(self, envs: VecEnv, observation: dict[str, Any]) -> np.ndarray:
        actions, _ = self.policy.act(observation, deterministic=self.deterministic, generator=self.generator)
        if hasattr(actions, "detach"):
            actions = actions.detach().float().cpu().numpy()
        actions = np.asarray(actions, dtype=np.float32)
        count = len(observation["instruction"])
        if actions.ndim != 3 or actions.shape[0] != count:
            raise ValueError(
                f"{self.name}.act returned actions of shape {actions.shape}; expected action chunks "
                f"(B={count}, H, A). A policy returning single actions (B, A) needs a chunk axis: actions[:, None]"
            )
        return actions


class ExpertActionSource:
    """The scripted experts of the evaluated tasks, acting where the envs live (chunks of one action)."""

    def __init__(self, noise_std: float = 0.0, seed: int = 0):
        self.noise_std = noise_std
        self.seed = seed
        self.name = "expert"

    def prepare(self, envs: VecEnv) -> None:
        envs.env_method("use_experts", self.noise_std, self.seed)

    def seed_round(self, seed: int) -> None:
        """The experts' noise is seeded where the envs live (:meth:`prepare`)."""

    def next_chunks(self, envs: VecEnv, observation: dict[str, Any]) -> np.ndarray:
        return envs.env_method("expert_action_chunks")


def _checkpoints_of(folder: Path) -> list[tuple[int, Path]]:
    found = []
    for child in folder.iterdir() if folder.is_dir() else ():
        match = CHECKPOINT_PATTERN.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return sorted(found)


def resolve_policy_folder(path: str | Path) -> Path:
    """The exported (``save_pretrained``) folder that ``path`` designates.

    ``path`` may be that folder, a training checkpoint ``checkpoints/iter_XXXXXX`` (its ``policy/``),
    a ``checkpoints`` folder, an RL folder holding ``checkpoints/`` (their latest checkpoint), or a run
    folder of ``vla-rl train`` (the latest checkpoint of its ``rl/``; without one, its SFT policy ``sft/best``).

    Raises:
        PolicyLoadError: the path does not exist, is a file, or holds none of these.
    """
    path = Path(path).expanduser()
    expected = (
        "pass an exported policy folder (config.json + model.safetensors), a training checkpoint "
        "(checkpoints/iter_XXXXXX with policy/ inside) or a run folder (RUN_DIR of `vla-rl train`, or its rl/)"
    )
    if not path.exists():
        raise PolicyLoadError(f"policy path {str(path)!r} does not exist; {expected}")
    if not path.is_dir():
        raise PolicyLoadError(f"policy path {str(path)!r} is a file, not a folder; {expected}")
    if (path / "config.json").is_file():
        return path
    if (path / "policy").is_dir():
        return path / "policy"
    for folder in (path, path / "checkpoints", path / "rl" / "checkpoints"):
        checkpoints = [(i, c) for i, c in _checkpoints_of(folder) if (c / "policy").is_dir()]
        if checkpoints:
            return checkpoints[-1][1] / "policy"
    if (path / "sft" / "best" / "config.json").is_file():  # a train run that stopped after SFT
        return path / "sft" / "best"
    contents = sorted(p.name for p in path.iterdir())[:10]
    raise PolicyLoadError(f"{str(path)!r} holds no policy (its contents: {contents}); {expected}")


def load_policy_for_eval(path: str | Path, device: str | None = None) -> ActingPolicy:
    """Load the policy of ``path`` (see :func:`resolve_policy_folder`) for evaluation, in eval mode.

    Raises:
        PolicyLoadError: the path or the files inside cannot be read; names the file and the cause.
    """
    folder = resolve_policy_folder(path)
    missing = [name for name in EXPORTED_FILES if not (folder / name).is_file()]
    if missing:
        raise PolicyLoadError(
            f"policy folder {str(folder)!r} lacks {missing}; it is incomplete (an interrupted export?) "
            "or not a folder written by save_pretrained"
        )
    import policies.hub as hub  # lazily: torch and the model code load only when a policy is evaluated

    loader = getattr(hub, "from_pretrained", None) or hub.load_pretrained
    try:
        policy = loader(folder, device=device) if device else loader(folder)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise PolicyLoadError(f"cannot load the policy in {str(folder)!r}: {type(error).__name__}: {error}") from error
    if hasattr(policy, "eval"):
        policy.eval()
    return policy
