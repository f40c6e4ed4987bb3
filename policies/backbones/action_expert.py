"""The action expert of pi0 / SmolVLA: a small transformer whose layers attend to the VLM's cached prefix.

pi0 (Black et al. 2024, arXiv 2410.24164, section 3): the tokens of the noisy action chunk (and the robot state) go
through a second set of transformer weights, the "action expert", whose layer ``l`` attends to the keys and values of
the VLM's layer ``l`` over the image and text prefix, and to its own tokens. The attention is blockwise:

    prefix  (images, instruction)      attends to the prefix only (computed by the VLM alone, once per observation)
    state   (one token)                attends to the prefix and itself
    actions (H tokens, noisy chunk)    attend to the prefix, the state and every action token

So the prefix's keys and values are the same at every denoising step: they are computed once per observation
(:class:`PrefixContext`) and every step only runs the expert. The expert's width is ``width_fraction`` of the VLM's;
its queries, keys and values have the VLM's head layout (heads, key/value heads, head size) so that its queries meet
the VLM's keys. Rotary position embeddings (the default RoPE of Llama and Gemma, the VLM's ``rope_theta``) continue
the prefix's positions; they are applied to the expert's queries and keys, the prefix's keys carry the VLM's.

Inputs of an action token: ``MLP([W_a x_t ; sin-cos(t)])`` (pi0's action-time MLP); of the state token ``W_s s``.
Output: the velocity ``(B, H, A)`` from the action tokens' last hidden states.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from policies.heads.denoiser import sinusoidal_embedding


@dataclass
class PrefixContext:
    """What the expert reads of one observation batch: per VLM layer, keys and values ``(B, KV, P, D)``, the prefix's
    attention mask ``(B, P)`` (padding), and the normalised state ``(B, S)`` or None."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    mask: torch.Tensor
    state: torch.Tensor | None

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])


@dataclass
class ExpertConfig:
    """The action expert.

    Attributes:
        width_fraction: its width as a fraction of the VLM's hidden size (pi0: 1024 of 2048).
        mlp_ratio: its MLP's hidden size over its width.
    """

    width_fraction: float = 0.5
    mlp_ratio: float = 4.0

    def __post_init__(self) -> None:
        if not 0.0 < self.width_fraction <= 1.0:
            raise ValueError(f"expert.width_fraction={self.width_fraction!r} must lie in (0, 1]")
        if not self.mlp_ratio > 0:
            raise ValueError(f"expert.mlp_ratio={self.mlp_ratio!r} must be > 0")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat([-second, first], dim=-1)


class ExpertLayer(nn.Module):
    """Pre-norm transformer block: attention over ``[prefix keys | own keys]``, then a gated MLP."""

    def __init__(self, width: int, heads: int, kv_heads: int, head_dim: int, intermediate: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.attention_norm = nn.RMSNorm(width, eps=1e-6)
        self.q_proj = nn.Linear(width, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, width, bias=False)
        self.mlp_norm = nn.RMSNorm(width, eps=1e-6)
        self.gate_proj = nn.Linear(width, intermediate, bias=False)
        self.up_proj = nn.Linear(width, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, width, bias=False)

    def forward(
        self, x: torch.Tensor, prefix_keys: torch.Tensor, prefix_values: torch.Tensor, cos: torch.Tensor,
        sin: torch.Tensor, mask: torch.Tensor,
    ) -> torch.Tensor:  # fmt: skip
        """``x`` ``(B, S, W)``; prefix keys/values ``(B, KV, P, D)``; cos/sin ``(S, D)``; mask ``(B, 1, S, P + S)``
        (True: attend) -> ``(B, S, W)``."""
        batch, length, _ = x.shape
        h = self.attention_norm(x)
        q = self.q_proj(h).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        keys = torch.cat([prefix_keys.to(k.dtype), k], dim=2)
        values = torch.cat([prefix_values.to(v.dtype), v], dim=2)
        groups = self.heads // self.kv_heads
        keys, values = keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)
        attended = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        x = x + self.o_proj(attended.transpose(1, 2).reshape(batch, length, -1))
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class ActionExpert(nn.Module):
    """``forward(noisy chunk (B, H, A), network time (B,) or (1,), context) -> velocity (B, H, A)``.

    Args:
        text_config: the VLM language model's config (layers, hidden size, head layout, ``rope_theta``).
        chunk_size, action_dim, state_dim: H, A, S (0: no state token).
        config: width and MLP size.
    """

    def __init__(self, text_config, chunk_size: int, action_dim: int, state_dim: int, config: ExpertConfig) -> None:
        super().__init__()
        hidden = int(text_config.hidden_size)
        heads = int(text_config.num_attention_heads)
        kv_heads = int(getattr(text_config, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(text_config, "head_dim", None) or hidden // heads)
        rope = getattr(text_config, "rope_parameters", None) or {}
        self.rope_theta = float(rope.get("rope_theta", getattr(text_config, "rope_theta", 10000.0)))
        self.width = width = max(8, 2 * round(config.width_fraction * hidden / 2))  # even: sin-cos time features
        self.chunk_size, self.action_dim, self.head_dim = chunk_size, action_dim, head_dim
        self.action_in = nn.Linear(action_dim, width)
        self.action_time_mlp = nn.Sequential(nn.Linear(2 * width, width), nn.SiLU(), nn.Linear(width, width))
        self.state_in = nn.Linear(state_dim, width) if state_dim else None
        self.layers = nn.ModuleList(
            ExpertLayer(width, heads, kv_heads, head_dim, max(8, round(config.mlp_ratio * width)))
            for _ in range(int(text_config.num_hidden_layers))
        )
        self.norm = nn.RMSNorm(width, eps=1e-6)
        self.action_out = nn.Linear(width, action_dim)

    def rotary(self, start: int, length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin ``(length, D)`` of positions ``start .. start + length - 1``."""
        inverse = 1.0 / self.rope_theta ** (torch.arange(0, self.head_dim, 2, device=device).float() / self.head_dim)
        angles = torch.arange(start, start + length, device=device).float()[:, None] * inverse[None]
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos(), angles.sin()

    def block_mask(self, prefix_mask: torch.Tensor, has_state: bool) -> torch.Tensor:
        """``(B, 1, S, P + S)`` bool: every suffix token sees the valid prefix; the state token sees itself, the
        action tokens see the state and each other (pi0's blocks)."""
        batch, prefix = prefix_mask.shape
        suffix = self.chunk_size + int(has_state)
        own = torch.ones(suffix, suffix, dtype=torch.bool, device=prefix_mask.device)
        if has_state:
            own[0, 1:] = False
        seen = prefix_mask.bool()[:, None, :].expand(batch, suffix, prefix)
        return torch.cat([seen, own.expand(batch, suffix, suffix)], dim=-1).unsqueeze(1)

    def forward(self, noisy: torch.Tensor, network_time: torch.Tensor, context: PrefixContext) -> torch.Tensor:
        batch = noisy.shape[0]
        time = sinusoidal_embedding(network_time.to(noisy.dtype), self.width).expand(batch, -1)
        actions = self.action_in(noisy)
        tokens = self.action_time_mlp(torch.cat([actions, time[:, None].expand_as(actions)], dim=-1))
        has_state = self.state_in is not None and context.state is not None
        if has_state:
            tokens = torch.cat([self.state_in(context.state.to(tokens.dtype))[:, None], tokens], dim=1)
        cos, sin = self.rotary(context.length, tokens.shape[1], tokens.device)
        mask = self.block_mask(context.mask, has_state)
        for layer, keys, values in zip(self.layers, context.keys, context.values, strict=True):
            tokens = layer(tokens, keys, values, cos, sin, mask)
        return self.action_out(self.norm(tokens[:, -self.chunk_size :]))
