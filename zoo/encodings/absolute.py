"""Absolute position encodings added to the tokens: learned (APE), fixed 2D sin-cos, and none (NoPE).

* Learned APE: "An Image is Worth 16x16 Words" (Dosovitskiy et al., arXiv:2010.11929) and DeiT (arXiv:2012.12877).
* 2D sin-cos: MAE / MoCo v3 (arXiv:2104.02057, Sec. 3), recomputed for the actual grid.
"""
from __future__ import annotations

from typing import Tuple

import torch
from torch import nn
from timm.layers import build_sincos2d_pos_embed, is_exporting, resample_abs_pos_embed, trunc_normal_

from ._cache import TableCache
from .base import Positions, PosEncoding
from .registry import register_pos_encoding

__all__ = ['LearnedAPE', 'SinCos2D', 'NoPE', 'add_to_patches']


def add_to_patches(x: torch.Tensor, table: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """Add ``table`` ``(1, N, C)`` to the patch tokens of ``x`` ``(B, num_prefix_tokens + N, C)``, out of place."""
    if num_prefix_tokens == 0:
        return x + table
    return torch.cat([x[:, :num_prefix_tokens], x[:, num_prefix_tokens:] + table], dim=1)


@register_pos_encoding('ape')
class LearnedAPE(PosEncoding):
    """Learned absolute position embedding, resampled bicubically (as timm does) for other grids.

    Args:
        dim: embedding width C.
        grid_size: training grid ``(H, W)`` in patches; the table holds ``H * W`` patch entries.
        num_prefix_tokens: prefix tokens (class + registers) of the backbone.
        embed_prefix: if True (DeiT/timm ViT layout) the table also holds one entry per prefix token, first;
            if False (timm Eva ``no_embed_class``) prefix tokens get no embedding.

    Parameters: ``pos_embed`` ``(1, P + H*W, C)`` float, with ``P = num_prefix_tokens if embed_prefix else 0``.
    """
    family = 'APE (learned)'
    adaptation = 'learned table resampled bicubically (antialiased) to the new grid, prefix entries kept'

    def __init__(self, dim: int, grid_size: Tuple[int, int], num_prefix_tokens: int = 1, embed_prefix: bool = True,
                 init_std: float = 0.02):
        super().__init__()
        self.grid_size = tuple(grid_size)
        self.num_embed_prefix = num_prefix_tokens if embed_prefix else 0
        self.init_std = init_std
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_embed_prefix + self.grid_size[0] * self.grid_size[1], dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Truncated normal, std ``init_std`` (0.02, as timm's ViT)."""
        trunc_normal_(self.pos_embed, std=self.init_std)

    def table(self, hw: Tuple[int, int]) -> torch.Tensor:
        """The embedding ``(1, P + H*W, C)`` for grid ``hw``; resampled when ``hw`` differs from ``grid_size``."""
        if not is_exporting() and tuple(hw) == self.grid_size:  # no size guard in an exported graph
            return self.pos_embed
        return resample_abs_pos_embed(self.pos_embed, new_size=list(hw), old_size=list(self.grid_size),
                                      num_prefix_tokens=self.num_embed_prefix)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        table = self.table(pos.hw_2d('ape')).to(x.dtype)
        if self.num_embed_prefix == pos.num_prefix_tokens:
            return x + table
        if self.num_embed_prefix == 0:
            return add_to_patches(x, table, pos.num_prefix_tokens)
        raise ValueError(f'the APE table has {self.num_embed_prefix} prefix entries but the input has '
                         f'{pos.num_prefix_tokens} prefix tokens; build the model with matching class/register tokens')

    @torch.no_grad()
    def set_grid_size(self, grid_size: Tuple[int, int]) -> None:
        grid_size = tuple(grid_size)
        if grid_size != self.grid_size:
            self.pos_embed = nn.Parameter(self.table(grid_size).detach())
            self.grid_size = grid_size

    def no_weight_decay(self) -> set:
        return {'pos_embed'}


@register_pos_encoding('sincos')
class SinCos2D(PosEncoding):
    """Fixed 2D sin-cos embedding on integer patch indices, recomputed (and cached) for the actual grid.

    The first half of the channels encodes the row index, the second half the column index (timm's
    ``build_sincos2d_pos_embed``). Prefix tokens get no embedding.

    Args:
        dim: embedding width C, divisible by 4.
        temperature: frequency base (10000 as in the Transformer).
    """
    family = 'sin-cos 2D (fixed)'
    adaptation = 'recomputed on the integer patch indices of the new grid (extrapolation)'

    def __init__(self, dim: int, temperature: float = 10000.):
        super().__init__()
        if dim % 4:
            raise ValueError(f'sincos needs an embedding dim divisible by 4, got {dim}; change embed_dim')
        if not temperature > 0:
            raise ValueError(f'sincos temperature must be > 0, got {temperature}')
        self.dim = dim
        self.temperature = temperature
        self._cache = TableCache()

    def table(self, hw: Tuple[int, int], device: torch.device) -> torch.Tensor:
        """``(1, H*W, C)`` float32 table for grid ``hw``."""
        return self._cache.get((tuple(hw), device), lambda: build_sincos2d_pos_embed(
            list(hw), dim=self.dim, temperature=self.temperature, device=device).unsqueeze(0))

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        table = self.table(pos.hw_2d('sincos'), x.device).to(x.dtype)
        return add_to_patches(x, table, pos.num_prefix_tokens)


@register_pos_encoding('nope')
class NoPE(PosEncoding):
    """No position encoding (NoPE): attention is permutation-equivariant over patches."""
    family = 'none (NoPE)'
    adaptation = 'nothing to adapt'

    def __init__(self):
        super().__init__()
