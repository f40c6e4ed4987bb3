"""The VLA policy: observation encoders + action head + value head, behind the policy protocol.

Observation batches are dicts (torch tensors or numpy arrays)::

    {"images": {camera: uint8 (B, H, W, 3)}, "state": float (B, S), "instruction": list of B str}

The head works in normalised action units; ``act`` unnormalises its chunk with the dataset
statistics and clips it to the env's bounds. Log-probabilities are those of the normalised,
unclipped chunk: unnormalising is a fixed affine map (it shifts every log-prob by the same
constant, so PPO ratios are unchanged), and clipping is part of the env, as usual in PPO.

``extras`` of ``act`` (what ``evaluate`` needs later, all with leading dim B):

- ``"log_prob"`` ``(B, H, A)``: per action dimension (see ``policies.heads.base.reduce_log_prob``);
- ``"value"`` ``(B,)``;
- ``"action_normalized"`` ``(B, H, A)``: the head's sample;
- ``"replay.<name>"``: the head's replay tensors (denoising chain, chosen step, ...);
- ``"embedding"`` ``(B, D)``: only when RL cannot move the encoders (see
  :attr:`VLAPolicy.rl_moves_encoders`). ``evaluate`` then reuses it instead of encoding the
  observation again: the encoders are fixed during RL, so it is the embedding ``evaluate`` would
  compute, and the update skips the encoders' forward pass (most of its cost for a small head).

``config.rl_vision.enabled`` adds a second, small image encoder that only RL trains
(``config.rl_vision.kind``: keypoints or pooled pixels, :mod:`policies.encoders.rl_vision`): its features
``(B, F)`` go to the head's RL policy (its ``rl_features`` input) and to the critic, never to
``bc_loss``. It is computed from the images in ``act`` and again in ``evaluate`` (it is trained, so it
cannot be stored).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from policies.config import PolicyConfig, PolicyIOSpec
from policies.encoders.observation import ObservationEncoder
from policies.encoders.rl_vision import build_rl_vision, rl_vision_feature_dim
from policies.heads.base import ActionHead
from policies.normalization import Normalizer
from policies.value import ValueHead

REPLAY_PREFIX = "replay."
EMBEDDING_KEY = "embedding"
Observation = Mapping[str, Any]


def build_head(config: PolicyConfig, embedding_dim: int, action_dim: int, rl_feature_dim: int = 0) -> ActionHead:
    """The action head named by ``config.head`` (from the ``policies.heads`` registry)."""
    from policies.heads import build_head as build_registered_head

    return build_registered_head(
        config.head.name, embedding_dim, config.chunk_size, action_dim, rl_feature_dim, **config.head.options
    )


class VLAPolicy(nn.Module):
    """Encoders + action head + value head.

    Args:
        config: the policy config.
        io_spec: the env spec, duck-typed (``camera_names``, ``image_size``, ``state_dim``,
            ``action_low``, ``action_high``); see :class:`PolicyIOSpec`.
        stats: dataset statistics ``{"action": {...}, "state": {...}}`` (see
            ``policies.normalization``); ``None`` only when both modes are "identity".
        head: an already built action head (default: built from ``config.head``).
        encoder: an already built observation encoder with ``output_dim`` (default: the compact one from
            ``config``; the VLM-backbone policy passes a ``policies.backbones.hf_vlm.HFVLMEncoder``).
    """

    #: ``policy.<key>`` sections that configure only what SFT never trains (the RL image branch, the critic):
    #: RL from a saved policy may ask for other values of them (``trainer.init_policy`` with another
    #: ``policy.rl_vision``); the parts they build differently start from a fresh initialisation.
    rl_only_config_keys: tuple[str, ...] = ("rl_vision", "value")

    def __init__(
        self,
        config: PolicyConfig,
        io_spec: Any,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
        head: ActionHead | None = None,
        encoder: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.io_spec = io_spec if isinstance(io_spec, PolicyIOSpec) else PolicyIOSpec.from_spec(io_spec)
        spec = self.io_spec
        modes = {"action": config.normalization.action}
        sizes = {"action": spec.action_dim, "state": spec.state_dim}
        if spec.state_dim > 0:
            modes["state"] = config.normalization.state
        self.normalizer = Normalizer(stats, modes, sizes)
        self.encoder = encoder if encoder is not None else ObservationEncoder(config, spec)
        rl_feature_dim = rl_vision_feature_dim(config.rl_vision, spec.camera_names) if config.rl_vision.enabled else 0
        self.head = (
            head if head is not None else build_head(config, self.encoder.output_dim, spec.action_dim, rl_feature_dim)
        )
        if self.head.rl_feature_dim != rl_feature_dim:
            raise ValueError(
                f"policy.rl_vision makes {rl_feature_dim} features but the given head reads "
                f"{self.head.rl_feature_dim}; build it with rl_feature_dim={rl_feature_dim}"
            )
        if (self.head.chunk_size, self.head.action_dim) != (config.chunk_size, spec.action_dim):
            raise ValueError(
                f"the action head predicts chunks of {self.head.chunk_size} x {self.head.action_dim} but the "
                f"policy needs chunk_size={config.chunk_size} x action_dim={spec.action_dim}"
            )
        self.value_head = ValueHead(
            self.encoder.output_dim, config.value.hidden_dims, config.value.detach_input, rl_feature_dim
        )
        # Built last: enabling it leaves the initialisation of the encoders and of the head's SFT part unchanged.
        self.rl_vision = build_rl_vision(config.rl_vision, spec.camera_names, spec.image_size) if rl_feature_dim else None
        self.register_buffer("action_low", torch.tensor(spec.action_low, dtype=torch.float32), persistent=False)
        self.register_buffer("action_high", torch.tensor(spec.action_high, dtype=torch.float32), persistent=False)

    @property
    def stats(self) -> dict[str, dict[str, list[float]]]:
        return self.normalizer.stats

    @property
    def rl_moves_encoders(self) -> bool:
        """Whether the RL losses (policy log-prob, value) have a gradient that reaches the encoders."""
        return self.head.log_prob_reaches_embedding or not self.value_head.detach_input

    @property
    def device(self) -> torch.device:
        return self.action_low.device

    # ----------------------------------------------------------------------------- inputs
    def _tensor(self, value: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        if not isinstance(value, torch.Tensor):
            value = np.asarray(value)
            if not value.flags.writeable:  # zero-copy out of Ray's object store: give the tensor its own memory
                value = value.copy()
        return torch.as_tensor(value).to(device=self.device, dtype=dtype)

    def prepare_observation(
        self, obs: Observation
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor | None, list[str]]:
        """Checked tensors on the policy's device: images, normalised state ``(B, S)``, instructions."""
        for key in ("images", "instruction"):
            if key not in obs.keys():
                raise KeyError(f"observation batch lacks {key!r}; it has {sorted(obs.keys())}")
        images = {}
        height, width = self.io_spec.image_size
        for camera in self.io_spec.camera_names:
            if camera not in obs["images"].keys():
                raise KeyError(
                    f"observation lacks camera {camera!r}; it has {sorted(obs['images'].keys())} "
                    f"but the policy was built for {list(self.io_spec.camera_names)}"
                )
            image = self._tensor(obs["images"][camera])
            if image.dtype != torch.uint8 or image.dim() != 4 or tuple(image.shape[1:]) != (height, width, 3):
                raise ValueError(
                    f"images[{camera!r}] must be uint8 (B, {height}, {width}, 3); got {image.dtype} "
                    f"{tuple(image.shape)}"
                )
            images[camera] = image
        batch_size = next(iter(images.values())).shape[0]
        instructions = obs["instruction"]
        instructions = [instructions] * batch_size if isinstance(instructions, str) else [str(t) for t in instructions]
        if len(instructions) != batch_size:
            raise ValueError(f"{len(instructions)} instructions for a batch of {batch_size} images")
        state = None
        if self.io_spec.state_dim > 0:
            if "state" not in obs.keys():
                raise KeyError(f"observation batch lacks 'state' (the env has state_dim={self.io_spec.state_dim})")
            raw_state = self._tensor(obs["state"], torch.float32)
            if tuple(raw_state.shape) != (batch_size, self.io_spec.state_dim):
                raise ValueError(
                    f"state must be (B, {self.io_spec.state_dim}) = ({batch_size}, {self.io_spec.state_dim}); "
                    f"got {tuple(raw_state.shape)}"
                )
            state = self.normalizer.normalize("state", raw_state)
        return images, state, instructions

    def embed(self, obs: Observation) -> torch.Tensor:
        """Observation batch -> embedding ``(B, D)``."""
        return self.encoder(*self.prepare_observation(obs))

    def encode(
        self, obs: Observation, embedding: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(embedding (B, D), rl_features (B, F) or None)``; a given ``embedding`` skips the main encoders."""
        if embedding is not None and self.rl_vision is None:
            return embedding, None  # nothing to compute from the observation
        images, state, instructions = self.prepare_observation(obs)
        if embedding is None:
            embedding = self.encoder(images, state, instructions)
        return embedding, None if self.rl_vision is None else self.rl_vision(images)

    # ----------------------------------------------------------------------------- protocol
    @torch.no_grad()
    def act(
        self, obs: Observation, deterministic: bool = False, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Sample an action chunk.

        Returns ``actions`` ``(B, H, A)`` in env units, clipped to the env's bounds, and
        ``extras`` (see the module docstring).
        """
        embedding, rl_features = self.encode(obs)
        normalized, replay = self.head.sample(
            embedding, deterministic=deterministic, generator=generator, rl_features=rl_features
        )
        replay = dict(replay)
        log_prob = replay.pop("log_prob")  # as head.log_prob would recompute it (the head contract)
        actions = self.normalizer.unnormalize("action", normalized)
        actions = torch.maximum(torch.minimum(actions, self.action_high), self.action_low)
        extras = {
            "log_prob": log_prob,
            "value": self.value_head(embedding, rl_features),
            "action_normalized": normalized,
            **{REPLAY_PREFIX + name: tensor for name, tensor in replay.items()},
        }
        if not self.rl_moves_encoders:
            extras[EMBEDDING_KEY] = embedding
        return actions, extras

    def evaluate(
        self, obs: Observation, extras: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Recompute ``(log_prob (B, H, A), entropy (B, H, A) or None, value (B,))`` with gradients.

        The embedding is ``extras["embedding"]`` where act() stored one (fixed encoders), else ``embed(obs)``.
        """
        keys = extras.keys()  # TensorDict has no `in`
        if "action_normalized" not in keys:
            raise KeyError("extras lack 'action_normalized'; pass the extras that act() returned")
        stored = None
        if EMBEDDING_KEY in keys and not self.rl_moves_encoders:
            stored = self._tensor(extras[EMBEDDING_KEY], torch.float32)
        embedding, rl_features = self.encode(obs, stored)
        replay = {
            key[len(REPLAY_PREFIX):]: self._tensor(extras[key])
            for key in extras.keys()
            if key.startswith(REPLAY_PREFIX)
        }
        actions = self._tensor(extras["action_normalized"], torch.float32)
        log_prob, entropy = self.head.log_prob(embedding, actions, replay, rl_features=rl_features)
        return log_prob, entropy, self.value_head(embedding, rl_features)

    def value(self, obs: Observation) -> torch.Tensor:
        """State value ``(B,)``."""
        return self.value_head(*self.encode(obs))

    def bc_loss(self, batch: Observation) -> torch.Tensor:
        """Behaviour-cloning loss (scalar) on ``batch["action"]`` ``(B, H, A)`` in env units.

        ``batch["action_mask"]`` ``(B, H)`` (optional) marks valid steps of each chunk.
        """
        normalized, mask = self.expert_actions(batch)
        return self.head.bc_loss(self.embed(batch), normalized, mask)

    def expert_actions(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(normalised expert chunk (B, H, A), valid steps (B, H) or None)`` of a behaviour-cloning batch."""
        if "action" not in batch.keys():
            raise KeyError(f"behaviour-cloning batch lacks 'action'; it has {sorted(batch.keys())}")
        actions = self._tensor(batch["action"], torch.float32)
        expected = (self.config.chunk_size, self.io_spec.action_dim)
        if actions.dim() != 3 or tuple(actions.shape[1:]) != expected:
            raise ValueError(f"batch['action'] must be (B, {expected[0]}, {expected[1]}); got {tuple(actions.shape)}")
        mask = batch.get("action_mask", None)
        return self.normalizer.normalize("action", actions), None if mask is None else self._tensor(mask, torch.bool)

    # ----------------------------------------------------------------------------- saving
    def save_pretrained(self, directory: str | Path) -> Path:
        from policies.hub import save_pretrained

        return save_pretrained(self, directory)

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: str | torch.device | None = None) -> VLAPolicy:
        from policies.hub import load_pretrained

        return load_pretrained(directory, device=device)


def build_policy(config: PolicyConfig | Mapping[str, Any], io_spec: Any, stats: Mapping[str, Any] | None) -> VLAPolicy:
    """The default policy factory (``policy.factory`` in the configs): a :class:`VLAPolicy` from plain data.

    ``config`` is a :class:`PolicyConfig` or its dict form (``PolicyConfig.to_dict``); unknown keys
    are errors that name the key.
    """
    if not isinstance(config, PolicyConfig):
        config = PolicyConfig.from_dict(dict(config))
    return VLAPolicy(config, io_spec, stats)


def validate_policy_config(config: Mapping[str, Any]) -> None:
    """Check a policy config dict without building anything (the driver calls this before any stage).

    Raises:
        ValueError: an unknown key, head or head option, or a bad value, named.
    """
    from policies.heads import head_config

    policy_config = PolicyConfig.from_dict(dict(config))
    head_config(policy_config.head.name, **policy_config.head.options)
    value = policy_config.embedding_dim  # chunk_size: checked by ActionChunkConfig
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"embedding_dim={value!r} must be a positive integer")
