"""FiLM conditioning of timm backbones on a language embedding.

FiLM (Perez et al., 2018, arXiv 1709.07871) modulates features as ``(1 + gamma) * x + beta``
where ``gamma`` and ``beta`` are linear in the conditioning vector. The projections start at
zero, so a freshly built conditioned backbone computes exactly the plain backbone.

Two ways of installing FiLM into a timm model, chosen by :func:`install_film`:

- :class:`TransformerBlockFiLM` (ViTs): inside every transformer block, after the attention
  residual and before the MLP, the same modulation for every token. The block's ``forward``
  is replaced on the instance by a method of its FiLM layer.
- :class:`StageFiLM` (CNNs): channel-wise on the output of every stage that timm lists in
  ``model.feature_info``, through a forward hook.

Both keep the timm model's own parameter names (the FiLM layers live in a separate
``ModuleList``), so timm checkpoints load unchanged. Hooks and replaced forwards are bound
methods of the FiLM layers (never closures) so that ``copy.deepcopy`` and pickling rebind
them to the copies. The conditioning vector is handed to every layer by
:meth:`FiLMLayers.conditioned` for the duration of one backbone call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


class FiLM(nn.Module):
    """``(1 + gamma(c)) * x + beta(c)`` with a zero-initialised linear projection of ``c``.

    Args:
        condition_dim: size E of the conditioning vector ``(B, E)``.
        num_features: size C of the modulated feature dimension.
        feature_dim: where C sits in ``x``: 1 for ``(B, C, H, W)``, -1 for tokens ``(B, T, C)``.
    """

    def __init__(self, condition_dim: int, num_features: int, feature_dim: int) -> None:
        super().__init__()
        self.projection = nn.Linear(condition_dim, 2 * num_features)
        nn.init.zeros_(self.projection.weight)
        nn.init.zeros_(self.projection.bias)
        self.feature_dim = feature_dim
        self.condition: torch.Tensor | None = None

    def modulate(self, features: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.projection(condition).chunk(2, dim=-1)  # (B, C) each
        shape = [1] * features.dim()
        shape[0] = features.shape[0]
        shape[self.feature_dim] = features.shape[self.feature_dim]
        return (1 + gamma.view(shape)) * features + beta.view(shape)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.condition is None:
            raise RuntimeError(
                "a FiLM-conditioned backbone was called without a language embedding; call it through "
                "VisionEncoder (or inside FiLMLayers.conditioned(embedding))"
            )
        return self.modulate(features, self.condition)


class StageFiLM(FiLM):
    """Channel-wise FiLM on the output of one CNN stage, installed as a forward hook."""

    def __init__(self, condition_dim: int, num_features: int) -> None:
        super().__init__(condition_dim, num_features, feature_dim=1)

    def hook(self, module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        return self(output)

    @staticmethod
    def supports(model: nn.Module) -> bool:
        return bool(getattr(model, "feature_info", None))

    @classmethod
    def install(cls, model: nn.Module, condition_dim: int) -> list[FiLM]:
        layers = []
        for info in model.feature_info:
            stage = model.get_submodule(info["module"])
            layer = cls(condition_dim, info["num_chs"])
            stage.register_forward_hook(layer.hook)
            layers.append(layer)
        return layers


_BLOCK_PARTS = ("norm1", "attn", "norm2", "mlp")


class TransformerBlockFiLM(FiLM):
    """Token-wise FiLM between the attention and MLP residuals of one timm transformer block."""

    def __init__(self, condition_dim: int, block: nn.Module, num_features: int) -> None:
        super().__init__(condition_dim, num_features, feature_dim=-1)
        self._block = [block]  # a plain list: the block's parameters stay under the timm model's names

    def block_forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
        """Replaces ``block.forward``: tokens ``(B, T, C)`` -> ``(B, T, C)``."""
        block = self._block[0]
        attn_kwargs = dict(kwargs)
        if attn_mask is not None:
            attn_kwargs["attn_mask"] = attn_mask
        identity = nn.Identity()
        x = x + getattr(block, "drop_path1", identity)(
            getattr(block, "ls1", identity)(block.attn(block.norm1(x), **attn_kwargs))
        )
        x = self(x)
        x = x + getattr(block, "drop_path2", identity)(getattr(block, "ls2", identity)(block.mlp(block.norm2(x))))
        return x

    @staticmethod
    def supports(model: nn.Module) -> bool:
        blocks = getattr(model, "blocks", None)
        return isinstance(blocks, nn.Module) and len(list(blocks.children())) > 0 and all(
            all(hasattr(block, part) for part in _BLOCK_PARTS) for block in blocks.children()
        )

    @classmethod
    def install(cls, model: nn.Module, condition_dim: int) -> list[FiLM]:
        layers = []
        for block in model.blocks.children():
            layer = cls(condition_dim, block, block.norm2.normalized_shape[0])
            block.forward = layer.block_forward
            layers.append(layer)
        return layers


#: Tried in order; the first whose ``supports(model)`` is true is installed.
FILM_STRATEGIES: list[type[StageFiLM] | type[TransformerBlockFiLM]] = [TransformerBlockFiLM, StageFiLM]


class FiLMLayers(nn.ModuleList):
    """The FiLM layers installed into one backbone."""

    @contextlib.contextmanager
    def conditioned(self, condition: torch.Tensor) -> Iterator[None]:
        """Within the block, every layer modulates with ``condition`` ``(B, E)``."""
        for layer in self:
            layer.condition = condition
        try:
            yield
        finally:
            for layer in self:
                layer.condition = None


def install_film(model: nn.Module, condition_dim: int) -> FiLMLayers:
    """Install FiLM into a timm ``model`` (transformer blocks for ViTs, stages for CNNs)."""
    for strategy in FILM_STRATEGIES:
        if strategy.supports(model):
            return FiLMLayers(strategy.install(model, condition_dim))
    raise ValueError(
        f"cannot install FiLM into {type(model).__name__}: it has neither transformer blocks "
        f"(model.blocks with norm1/attn/norm2/mlp) nor timm stage feature_info; set vision.film=false "
        f"or choose another backbone"
    )
