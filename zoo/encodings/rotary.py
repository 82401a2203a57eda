"""Rotary position embeddings for images: RoPE-Axial and RoPE-Mixed.

"Rotary Position Embedding for Vision Transformer" (Heo et al., ECCV 2024, arXiv:2403.13298), Sec. 3.
Layout and numerics follow timm's ``RotaryEmbeddingCat`` / ``RotaryEmbeddingMixed`` so that timm's
``vit_*_patch16_rope*_224`` weights give the same logits: interleaved channel pairs, integer patch coordinates
(x = column, y = row), angles and sin/cos in float32, applied by the one kernel (``zoo.encodings.rotation``).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn
from timm.layers.pos_embed_sincos import init_random_2d_freqs

from ._cache import TableCache, param_key
from .absolute import LearnedAPE
from .base import AttnTerm, Positions, PosEncoding
from .registry import register_pos_encoding
from .rotation import apply_rope, grid_coords, rope_frequencies, rope_sin_cos

__all__ = ['RotaryTerm', 'RoPEAxial', 'RoPEMixed', 'RoPEMixedAPE', 'patch_coords']


class RotaryTerm(AttnTerm):
    """Rotate q and k by per-token angles through the one kernel :func:`zoo.encodings.rotation.apply_rope`.

    Args:
        sin, cos: ``(B or 1, heads or 1, L, head_dim)`` float32 tables from :func:`rope_sin_cos`, for every token,
            prefix tokens included (angle 0 = identity, so class/register tokens need no special case). With
            grouped-query attention the tables may have the key-head count; queries then use their group's table.
        layout: ``'interleaved'`` (timm / RoPE-ViT) or ``'half'`` (Hugging Face Qwen).
    """
    tensor_fields = ('sin', 'cos')

    def __init__(self, sin: torch.Tensor, cos: torch.Tensor, layout: str = 'interleaved'):
        self.sin, self.cos, self.layout = sin, cos, layout

    @classmethod
    def from_angles(cls, angles: torch.Tensor, num_prefix_tokens: int = 0, layout: str = 'interleaved') -> 'RotaryTerm':
        """Build from angles ``(B or 1, heads or 1, N, head_dim // 2)`` (radians) of the non-prefix tokens; the
        ``num_prefix_tokens`` leading tokens get angle 0."""
        if num_prefix_tokens:
            pad = angles.new_zeros(angles.shape[:-2] + (num_prefix_tokens, angles.shape[-1]))
            angles = torch.cat([pad, angles], dim=-2)
        return cls(*rope_sin_cos(angles, layout), layout=layout)

    def select(self, pos: Positions) -> 'RotaryTerm':
        """The rows of the tokens present in ``pos`` (this term itself for the full grid)."""
        if not pos.is_subset:
            return self
        return RotaryTerm(pos.select(self.sin, -2), pos.select(self.cos, -2), self.layout)

    def _rot(self, x: torch.Tensor) -> torch.Tensor:
        sin, cos = self.sin, self.cos
        if sin.shape[1] not in (1, x.shape[1]):  # GQA: key-head tables, queries follow their group
            sin = sin.repeat_interleave(x.shape[1] // sin.shape[1], dim=1)
            cos = cos.repeat_interleave(x.shape[1] // cos.shape[1], dim=1)
        return apply_rope(x, sin, cos, self.layout)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self._rot(q), self._rot(k)


def patch_coords(hw: Tuple[int, int], device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """Integer patch coordinates ``(x, y)`` = (column, row), each ``(H*W,)`` float32 in row-major token order."""
    coords = grid_coords((1, hw[0], hw[1]), device)
    return coords[:, 2], coords[:, 1]


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
        self.theta = float(theta)
        self.num_bands = head_dim // 4
        self._cache = TableCache()

    @property
    def bands(self) -> torch.Tensor:
        """Frequencies ``theta^(-i / (head_dim / 4))`` ``(head_dim // 4,)``, always float32 (never a buffer, so a
        ``model.to(torch.bfloat16)`` cannot round them)."""
        return rope_frequencies(self.num_bands, self.theta)

    def angles(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Rotation angles ``(1, N, head_dim // 2)`` float32 (radians) for coordinates ``x``, ``y`` ``(N,)`` in patches."""
        bands = rope_frequencies(self.num_bands, self.theta, device=x.device)
        return torch.cat([x.float()[:, None] * bands, y.float()[:, None] * bands], dim=-1).unsqueeze(0)

    def term(self, hw: Tuple[int, int], num_prefix_tokens: int, device: torch.device) -> RotaryTerm:
        """The (cached) full-grid rotation for grid ``hw``; identical for every block."""
        return self._cache.get((tuple(hw), num_prefix_tokens, device), lambda: RotaryTerm.from_angles(
            self.angles(*patch_coords(hw, device)).unsqueeze(0), num_prefix_tokens))

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        return [self.term(pos.hw_2d('rope_axial'), pos.num_prefix_tokens, device).select(pos)] * self.depth


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
        self.theta = float(theta)
        self.freqs = nn.Parameter(init_random_2d_freqs(head_dim, depth, num_heads, temperature=theta))
        self._cache = TableCache()

    def angles(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Angles ``(depth, num_heads, N, head_dim // 2)`` float32 (radians) for coordinates ``x``, ``y`` ``(N,)``."""
        freqs = self.freqs.float()
        return x.float()[:, None] * freqs[0].unsqueeze(-2) + y.float()[:, None] * freqs[1].unsqueeze(-2)

    def _terms(self, hw: Tuple[int, int], num_prefix_tokens: int, device: torch.device) -> List[RotaryTerm]:
        angles = self.angles(*patch_coords(hw, device))  # (depth, heads, N, head_dim // 2)
        return [RotaryTerm.from_angles(a.unsqueeze(0), num_prefix_tokens) for a in angles.unbind(0)]

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        hw, npt = pos.hw_2d('rope_mixed'), pos.num_prefix_tokens
        if self.training or (torch.is_grad_enabled() and self.freqs.requires_grad):
            terms = self._terms(hw, npt, device)  # carries the graph to freqs: never cached
        else:
            terms = self._cache.get(lambda: (hw, npt, device, param_key([self.freqs])),
                                    lambda: self._terms(hw, npt, device))
        return terms if not pos.is_subset else [t.select(pos) for t in terms]

    def reset_parameters(self) -> None:
        """Random 2D directions per head (timm ``init_random_2d_freqs``); child modules (the optional APE) too."""
        with torch.no_grad():
            self.freqs.copy_(init_random_2d_freqs(self.freqs.shape[-1] * 2, self.freqs.shape[1], self.freqs.shape[2],
                                                  temperature=self.theta))
        super().reset_parameters()

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
