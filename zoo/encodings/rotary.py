"""Rotary position embeddings for images: RoPE-Axial and RoPE-Mixed.

"Rotary Position Embedding for Vision Transformer" (Heo et al., ECCV 2024, arXiv:2403.13298), Sec. 3.
Layout and numerics follow timm's ``RotaryEmbeddingCat`` / ``RotaryEmbeddingMixed`` so that timm's
``vit_*_patch16_rope*_224`` weights give the same logits: interleaved channel pairs, integer patch coordinates
(x = column, y = row), angles and sin/cos computed in float32 and applied in the input dtype.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
from torch import nn
from timm.layers import apply_rot_embed
from timm.layers.pos_embed_sincos import init_random_2d_freqs

from ._cache import TableCache
from .absolute import LearnedAPE
from .base import AttnTerm, Positions, PosEncoding
from .registry import register_pos_encoding

__all__ = ['RotaryTerm', 'RoPEAxial', 'RoPEMixed', 'RoPEMixedAPE', 'patch_coords']


class RotaryTerm(AttnTerm):
    """Rotate q and k by per-token angles: each channel pair (2i, 2i+1) turns by ``angles[..., i]``.

    float32/float64 inputs use one complex multiplication per tensor (a single fused pass); float16/bfloat16 inputs use
    the real cos/sin form with tables cast to the input dtype. Both compute ``(x0 cos - x1 sin, x1 cos + x0 sin)``.

    Args:
        angles: ``(heads or 1, L, head_dim // 2)`` float32 radians for every token, prefix tokens included (zero
            angle = identity, so class/register tokens are not rotated and need no special case).
    """

    def __init__(self, angles: torch.Tensor):
        self.angles = angles.float()
        self._tables = {}

    @classmethod
    def from_patch_angles(cls, patch_angles: torch.Tensor, num_prefix_tokens: int) -> 'RotaryTerm':
        """Build from angles ``(heads or 1, N, head_dim // 2)`` of the patch tokens only (prefix gets zeros)."""
        if num_prefix_tokens:
            pad = patch_angles.new_zeros(patch_angles.shape[:-2] + (num_prefix_tokens, patch_angles.shape[-1]))
            patch_angles = torch.cat([pad, patch_angles], dim=-2)
        return cls(patch_angles)

    def _table(self, dtype: torch.dtype):
        if dtype not in self._tables:
            if dtype in (torch.float32, torch.float64):
                self._tables[dtype] = torch.polar(torch.ones_like(self.angles), self.angles).to(
                    torch.complex128 if dtype == torch.float64 else torch.complex64)
            else:
                self._tables[dtype] = (self.angles.sin().repeat_interleave(2, -1).to(dtype),
                                       self.angles.cos().repeat_interleave(2, -1).to(dtype))
        return self._tables[dtype]

    def _apply(self, x: torch.Tensor) -> torch.Tensor:
        table = self._table(x.dtype)
        if isinstance(table, tuple):
            return apply_rot_embed(x, *table)
        return torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2))) * table).flatten(-2)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self._apply(q), self._apply(k)


def patch_coords(hw: Tuple[int, int], device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """Integer patch coordinates ``(x, y)`` = (column, row), each ``(H*W,)`` float32 in row-major token order."""
    h, w = hw
    y, x = torch.meshgrid(torch.arange(h, device=device, dtype=torch.float32),
                          torch.arange(w, device=device, dtype=torch.float32), indexing='ij')
    return x.reshape(-1), y.reshape(-1)


def _check_rope_geometry(name: str, dim: int, num_heads: int, theta: float) -> int:
    """Return ``head_dim``; ValueError unless it is divisible by 4 (two axes x channel pairs) and ``theta > 0``."""
    head_dim = dim // num_heads
    if head_dim % 4:
        raise ValueError(f'{name} needs head_dim divisible by 4, got {head_dim}; change embed_dim/num_heads')
    if not theta > 0:
        raise ValueError(f'{name} theta must be > 0, got {theta}')
    return head_dim


@register_pos_encoding('rope_axial')
class RoPEAxial(PosEncoding):
    """RoPE-Axial (Heo et al. 2024, Eq. 10): the first half of each head's channel pairs turns with the column x,
    the second half with the row y, at frequencies ``theta^(-i / (head_dim / 4))``, ``i < head_dim / 4``.

    Args:
        dim: embedding width; ``head_dim = dim / num_heads`` must be divisible by 4.
        num_heads: attention heads.
        depth: number of blocks (the same rotation is used by every block).
        theta: frequency base (100 in RoPE-ViT).
    """
    family = 'RoPE-Axial'
    adaptation = 'RoPE extrapolated on integer patch positions'

    def __init__(self, dim: int, num_heads: int, depth: int, theta: float = 100.0):
        super().__init__()
        head_dim = _check_rope_geometry('rope_axial', dim, num_heads, theta)
        self.depth = depth
        num_bands = head_dim // 4
        bands = 1.0 / theta ** (torch.arange(num_bands, dtype=torch.float32) / num_bands)
        self.register_buffer('bands', bands, persistent=False)
        self._cache = TableCache()

    def angles(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Rotation angles ``(1, N, head_dim // 2)`` float32 (radians) for coordinates ``x``, ``y`` ``(N,)`` in patches."""
        bands = self.bands.to(x.device)
        return torch.cat([x.float()[:, None] * bands, y.float()[:, None] * bands], dim=-1).unsqueeze(0)

    def term(self, hw: Tuple[int, int], num_prefix_tokens: int, device: torch.device) -> RotaryTerm:
        """The (cached) rotation for grid ``hw``; identical for every block."""
        return self._cache.get((tuple(hw), num_prefix_tokens, device), lambda: RotaryTerm.from_patch_angles(
            self.angles(*patch_coords(hw, device)), num_prefix_tokens))

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        return [self.term(pos.hw_2d('rope_axial'), pos.num_prefix_tokens, device)] * self.depth


@register_pos_encoding('rope_mixed')
class RoPEMixed(PosEncoding):
    """RoPE-Mixed (Heo et al. 2024, Eq. 11-12): learnable 2D frequencies per block and head; pair i of head h in
    block d turns by ``x * f_x[d, h, i] + y * f_y[d, h, i]``.

    Args:
        dim: embedding width; ``head_dim`` must be divisible by 4.
        num_heads: attention heads.
        depth: number of blocks.
        theta: base of the initial frequency magnitudes (10 in RoPE-ViT); each head starts at a random direction.

    Parameters: ``freqs`` ``(2, depth, num_heads, head_dim // 2)`` (x then y), no weight decay.
    Derived angles are recomputed every training forward and cached per (grid, device, parameter version) in eval.
    """
    family = 'RoPE-Mixed'
    adaptation = 'RoPE extrapolated on integer patch positions (learned frequencies)'

    def __init__(self, dim: int, num_heads: int, depth: int, theta: float = 10.0):
        super().__init__()
        head_dim = _check_rope_geometry('rope_mixed', dim, num_heads, theta)
        self.freqs = nn.Parameter(init_random_2d_freqs(head_dim, depth, num_heads, temperature=theta))
        self._cache = TableCache()

    def angles(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Angles ``(depth, num_heads, N, head_dim // 2)`` float32 (radians) for coordinates ``x``, ``y`` ``(N,)``."""
        freqs = self.freqs.float()
        return x.float()[:, None] * freqs[0].unsqueeze(-2) + y.float()[:, None] * freqs[1].unsqueeze(-2)

    def _terms(self, hw: Tuple[int, int], num_prefix_tokens: int, device: torch.device):
        angles = self.angles(*patch_coords(hw, device))
        return [RotaryTerm.from_patch_angles(a, num_prefix_tokens) for a in angles.unbind(0)]

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        hw = pos.hw_2d('rope_mixed')
        if self.training or torch.is_grad_enabled():
            return self._terms(hw, pos.num_prefix_tokens, device)
        key = (hw, pos.num_prefix_tokens, device, self.freqs._version, self.freqs.data_ptr())
        return self._cache.get(key, lambda: self._terms(hw, pos.num_prefix_tokens, device))

    def no_weight_decay(self) -> set:
        return {'freqs'}


@register_pos_encoding('rope_mixed_ape')
class RoPEMixedAPE(RoPEMixed):
    """RoPE-Mixed plus a learned APE on the patch tokens (RoPE-ViT's "RoPE-Mixed + APE", timm ``no_embed_class``).

    Parameters: ``freqs`` as RoPE-Mixed, ``ape.pos_embed`` ``(1, H*W, C)``.
    """
    family = 'RoPE-Mixed + APE'
    adaptation = 'RoPE extrapolated on integer patch positions; APE resampled bicubically'

    def __init__(self, dim: int, num_heads: int, depth: int, grid_size: Tuple[int, int], theta: float = 10.0):
        super().__init__(dim, num_heads, depth, theta=theta)
        self.ape = LearnedAPE(dim, grid_size, num_prefix_tokens=0, embed_prefix=False)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        return self.ape.embed(x, pos)

    def set_grid_size(self, grid_size: Tuple[int, int]) -> None:
        self.ape.set_grid_size(grid_size)

    def no_weight_decay(self) -> set:
        return {'freqs', 'ape.pos_embed'}
