"""Trainable rotation-matrix RoPE: ComRoPE-AP, ComRoPE-LD and LieRE.

Papers:
    * ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized by Trainable Commuting Angle Matrices,
      Yu et al., CVPR 2025, arXiv:2506.03737.
    * LieRE: Lie Rotational Positional Encodings (published as "LieRE: Generalizing Rotary Position Encodings"),
      Ostmeier et al., arXiv:2406.10322.

A token at position ``x = (x_0, x_1)`` (row, col), or ``x = (x_0, x_1, x_2)`` (row, col, t) on a video grid, rotates
each head's query and key by

    R(x) = exp(x_0 A_0 + x_1 A_1 [+ x_2 A_2]),

where every angle matrix ``A_i`` is skew-symmetric and block-diagonal with ``m = head_dim / b`` blocks of size
``b x b`` (``b`` in {2, 4, 8}). Block ``j`` of ``R(x)`` acts on channels ``j*b .. j*b+b-1`` of the head and equals
``exp(x_0 A_0[j] + x_1 A_1[j])``; ``R`` multiplies the channel (column) vector from the left. Attention then scores
``(R(x) q)^T (R(y) k) = q^T R(x)^T R(y) k``. The "RoPE equation" ``R(x)^T R(y) = R(y - x)`` holds exactly when the
``A_i`` commute, which makes scores depend on the relative position only (paper, Theorem 1).

Variants (generator ``S = P - P^T`` of a trainable square ``P``; per layer and per head):
    * ``'ap'`` (axial partition): ``A_i[j] = S[j]`` when ``j mod N == i``, else 0. Blocks alternate between the row
      and the column axis (block 0 row, block 1 col, ...), as in the official code; on a video grid they cycle over
      row, col, t (``m`` need not be a multiple of 3: the first axes then get one block more). Commuting by
      construction.
    * ``'ld'`` (linearly dependent): ``A_i[j] = theta[i, j] * S[j]``; ``theta`` (``multiplier``) is shared over heads.
      Commuting because every ``A_i[j]`` is a multiple of the same ``S[j]``.
    * ``'liere'``: ``A_i[j] = (P_i[j] - P_i[j]^T) / scale_factor`` with an independent ``P_i`` per axis. These do not
      commute in general (for ``b >= 4``), so LieRE scores are not purely relative. With ``b = 2`` every generator is a
      multiple of the same 2x2 rotation generator, so LieRE-b2 does commute.

Parameter layouts (identical to the official checkpoints, ``H`` heads, ``N = 2`` axes for images and ``N = 3`` for
videos, ``m = head_dim / b``), stored as ``layers.<layer>.freqs`` and ``layers.<layer>.multiplier``:
    * AP: ``freqs (H, 1, m, b, b)``;
    * LD: ``freqs (H, 1, m, b, b)`` and ``multiplier (1, N, m, 1, 1)``;
    * LieRE: ``freqs (H, N, m, b, b)``.

Positions are normalised patch centres ``((row + 0.5) / H, (col + 0.5) / W)`` in [0, 1], so a larger grid interpolates
rather than extrapolates. Videos (``grid_size=(T', H', W')``) add the normalised tubelet centre ``(t + 0.5) / T`` as a
third axis after (row, col): more frames or a bigger frame interpolate within the same unit cube (the clip always
spans [0, 1] in time), and the time parameters come last, so a 2D checkpoint inflates by appending them (LD: a zero
time multiplier gives each frame the image rotation). Class tokens sit at ``(0.5, 0.5[, 0.5])`` and are rotated
(official behaviour); register tokens get the identity. In training, ``perturb_intensity > 0`` adds
``clamp(N(0, 1) * 0.5 * intensity, -0.5, 0.5)`` patches to each patch coordinate (one draw per forward, shared by the
batch and all layers); eval never perturbs. ``random_positions`` (:mod:`zoo.encodings.randomized`, training only)
draws per-sample positions instead: a sorted subset of the ``R = ceil(range_factor n)`` cell centres of a finer axis,
``(c + 0.5) / R`` (a larger image is a finer grid in these normalised units), or CAPE's global shift and scale of the
cell centres.

Fast path (the official code builds a dense ``head_dim x head_dim`` matrix per sample, token and head):
    * ``b = 2`` uses the exact closed form ``exp(t [[0, s], [-s, 0]]) = [[cos ts, sin ts], [-sin ts, cos ts]]`` and
      the rotary kernel, like axial RoPE;
    * AP / LD (:class:`AxisRotation`): AP blocks depend on one axis and LD blocks factor as ``exp(x_0 A_0[j])
      exp(x_1 A_1[j]) [exp(x_2 A_2[j])]`` (the factors commute), so the exponentials run once per distinct
      coordinate of each axis (``H + W + 2`` values, ``+ T + 1`` on videos) and q, k are rotated axis by axis with
      one batched ``b x b`` product per axis: no per-token matrix exists (video ViT-S at 16x224^2: ~1.2-1.4x the
      sin-cos model's peak memory instead of 4.4x);
    * AP / LD in eager inference up to :attr:`ComRoPE.basis_max_tokens` tokens (:class:`BasisRotation`; above it, the
      per-axis path: its tables do not grow with the tokens): every block has one skew generator ``S`` and a scalar angle
      per token, so ``exp(theta S) = U diag(rot(theta w_k)) U^T`` (real Schur form): q and k go to the fixed basis
      ``U`` of each head and block (one GEMM over all tokens), turn as a plain RoPE, and come back (one GEMM); at
      ViT-S/224 batch 8 (one CPU thread) ``rotate(q, k)`` ~1.5 ms per layer instead of 3.0 (AP) / 4.8 (LD) ms.
      Bases are checked in float64 against ``torch.linalg.matrix_exp``; a layer that fails (a zero ``w_k``) keeps
      :class:`AxisRotation`, as do training, autograd, low precision, tracing and ``torch.compile``;
    * LieRE needs one exponential per token. Up to :attr:`ComRoPE.dense_cache_bytes` (64 MiB over all layers) the
      per-token blocks are computed once per forward (cached in eval); above it (:class:`LieRotation`) each layer
      computes them inside the attention, chunk by chunk;
    * exponentials: :func:`expm_skew` (scaling and squaring of a degree-15 Taylor polynomial evaluated by
      Paterson-Stockmeyer, scaled by a bound on the spectral radius, one squaring count per chunk) for LieRE's
      per-token blocks in eager inference (on the video model's 8 x 8 blocks about 2x as fast as
      ``torch.linalg.matrix_exp`` and 1.25x as fast as :func:`expm_ps`, as exact); :func:`expm_taylor` (matmuls
      only, a fixed squaring count when traced) in training (cheaper backward) and while exporting (ONNX has no
      matrix exponential);
      ``torch.linalg.matrix_exp`` for the small AP / LD tables (eager, and compiled training);
    * rotations are computed in float32 (float64 for float64 inputs) and applied in the input dtype;
    * in eval with autograd off they are cached per (grid, prefix tokens, dtype, device), keyed also on every
      generator parameter's version counter and storage, so ``load_state_dict`` or an optimizer step can never
      return stale rotations. Under ``torch.compile`` in inference, LieRE's blocks and AP / LD's per-axis tables are
      read from that cache through the opaque op ``zoo::comrope_cached_tables``, so the compiled graph does not
      recompute the exponentials.
"""
from __future__ import annotations

import math
import re
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from ._cache import TableCache, caching_allowed, param_key
from ._grid import parse_grid_size
from .absolute import LearnedAPE
from .base import AttnTerm, Positions, PosEncoding
from .randomized import RandomPositions
from .registry import register_pos_encoding
from .rotary import RotaryTerm

__all__ = ['ComRoPE', 'LieRE', 'BlockRotation', 'VARIANTS', 'BLOCK_SIZES', 'NUM_AXES', 'fold_official_ape']

VARIANTS = ('ap', 'ld', 'liere')
BLOCK_SIZES = (2, 4, 8)
NUM_AXES = 2  # (row, col) on images; videos add t as a third axis
# Official checkpoints (Hugging Face CLIP vision layout, github.com/Longin-Yu/ComRoPE): generators in the attention.
_OFFICIAL_GENERATOR = re.compile(r'^vision_model\.encoder\.layers\.(\d+)\.self_attn\.(freqs|multiplier)$')
_OFFICIAL_APE = 'vision_model.embeddings.position_embedding'


class _LayerGenerators(nn.Module):
    """The trainable angle-matrix parameters of one attention layer (all heads).

    Args:
        variant: ``'ap'``, ``'ld'`` or ``'liere'``.
        num_heads: attention heads ``H``.
        head_dim: channels per head; a multiple of ``block_size``.
        block_size: ``b``.
        init_std: standard deviation of the ``freqs`` initialisation (times ``scale_factor`` for LieRE).
        scale_factor: LieRE only, ``A = (F - F^T) / scale_factor``.
        num_axes: ``N``, 2 (row, col) or 3 (row, col, t).
    """

    def __init__(self, variant: str, num_heads: int, head_dim: int, block_size: int, init_std: float,
                 scale_factor: float, num_axes: int = NUM_AXES):
        super().__init__()
        self.variant = variant
        self.num_axes = num_axes
        self.init_std = init_std
        self.scale_factor = scale_factor
        m = head_dim // block_size
        f_axes = num_axes if variant == 'liere' else 1
        self.freqs = nn.Parameter(torch.empty(num_heads, f_axes, m, block_size, block_size))
        if variant == 'ld':
            self.multiplier = nn.Parameter(torch.empty(1, num_axes, m, 1, 1))
        else:
            self.register_parameter('multiplier', None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Official initialisation: ``freqs ~ N(0, init_std)`` (LieRE: ``N(0, init_std * scale_factor)``),
        ``multiplier ~ N(0, 1)``."""
        std = self.init_std * (self.scale_factor if self.variant == 'liere' else 1.0)
        nn.init.normal_(self.freqs, 0.0, std)
        if self.multiplier is not None:
            nn.init.normal_(self.multiplier, 0.0, 1.0)

    def generators(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Angle matrices ``A`` ``(H, N, m, b, b)``: ``A[h, i, j]`` is block ``j`` of axis ``i`` for head ``h``."""
        f = self.freqs.to(dtype)
        s = f - f.transpose(-1, -2)
        if self.variant == 'ap':
            n_blocks = s.shape[2]
            axis_of_block = torch.arange(n_blocks, device=s.device) % self.num_axes
            mask = (axis_of_block[None, :] == torch.arange(self.num_axes, device=s.device)[:, None]).to(dtype)
            return s * mask[None, :, :, None, None]
        if self.variant == 'ld':
            return s * self.multiplier.to(dtype)
        return s / self.scale_factor

    def extra_repr(self) -> str:
        return f'variant={self.variant!r}, freqs={tuple(self.freqs.shape)}'


class BlockRotation(AttnTerm):
    """Rotates q and k by per-token block-diagonal rotations ``(B or 1, H, L, m, b, b)``, out of place:
    ``out[..., j, :] = blocks[n, h, l, j] @ x[..., j, :]``. Register tokens carry identity rows.

    Used where the rotation does not factor over the grid axes: LieRE at small sizes (cached), training-time
    perturbed coordinates, and token subsets. (The ``b = 2`` case is a plain RoPE and uses
    :class:`zoo.encodings.rotary.RotaryTerm`, the one kernel.)
    """
    tensor_fields = ('blocks',)

    def __init__(self, blocks: torch.Tensor):
        self.blocks = blocks

    @property
    def num_tokens(self) -> int:
        return self.blocks.shape[2]

    def select(self, pos: Positions) -> 'BlockRotation':
        """The rows of the tokens present in ``pos`` (this term itself for the full grid)."""
        if not pos.is_subset:
            return self
        return BlockRotation(pos.select(self.blocks, 2))

    def _apply(self, x: torch.Tensor) -> torch.Tensor:
        _check_tokens(self.num_tokens, x)
        blocks = self.blocks.to(x.dtype)
        tok = blocks.transpose(1, 2)
        if tok.is_contiguous():  # token-major storage (LieRE's dense blocks): no transposed copy of the blocks
            return _apply_token_blocks(tok, x)
        return _apply_blocks(blocks, x)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Args: q, k ``(B, H, L, head_dim)``. Returns the rotated pair, new tensors in the input dtype."""
        return self._apply(q), self._apply(k)


def _check_tokens(expected, x: torch.Tensor) -> None:
    if not _tracing() and x.shape[-2] != expected:
        raise ValueError(f'rotation built for {expected} tokens, got a tensor with {x.shape[-2]} '
                         f'(shape {tuple(x.shape)}); positions and sequence disagree')


def _tracing() -> bool:
    return not caching_allowed()


def _apply_blocks(blocks: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``out[n, h, l, j] = blocks[n or 0, h, l, j] @ x[n, h, l, j]`` for blocks ``(1 or B, H, L, m, b, b)`` and
    ``x`` ``(B, H, L, m * b)``."""
    nb, h, l, m, b = blocks.shape[:5]
    n, heads = x.shape[:2]
    if nb != 1:  # per-sample rotations (token subsets, random positions)
        return torch.einsum('nhlmij,nhlmj->nhlmi', blocks.expand(-1, heads, -1, -1, -1, -1),
                            x.unflatten(-1, (m, b))).flatten(-2)
    if h != heads:  # one set of blocks for every head (LieRE's per_head=False): the heads join the batch rows
        return _apply_token_blocks(blocks.transpose(1, 2), x)
    # Shared rotation: one batched (n x b) @ (b x b) product per (head, token, block), the batch as rows (bmm is
    # ~1.5x faster on CPU than the equivalent einsum).
    xb = x.unflatten(-1, (m, b)).permute(1, 2, 3, 0, 4).reshape(h * l * m, n, b)
    out = torch.bmm(xb, blocks.reshape(h * l * m, b, b).transpose(-1, -2))
    return out.reshape(h, l, m, n, b).permute(3, 0, 1, 2, 4).reshape(n, h, l, m * b)


def _apply_token_blocks(blocks: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """:func:`_apply_blocks` for token-major blocks ``(1 or B, L, H, m, b, b)`` (as :func:`_lie_blocks` returns them):
    ``out[n, h, l, j] = blocks[n or 0, l, h, j] @ x[n, h, l, j]`` for ``x`` ``(B, H, L, m * b)``. Moves the (small)
    ``x`` instead of the (``b`` times larger) blocks."""
    nb, l, h, m, b = blocks.shape[:5]
    n, heads = x.shape[:2]
    if nb != 1:
        return torch.einsum('nlhmij,nhlmj->nhlmi', blocks.expand(-1, -1, heads, -1, -1, -1),
                            x.unflatten(-1, (m, b))).flatten(-2)
    if h != heads:  # one set of blocks for every head (LieRE's per_head=False): the heads join the batch rows
        xb = x.unflatten(-1, (m, b)).permute(2, 3, 0, 1, 4).reshape(l * m, n * heads, b)
        out = torch.bmm(xb, blocks.reshape(l * m, b, b).transpose(-1, -2))
        return out.reshape(l, m, n, heads, b).permute(2, 3, 0, 1, 4).reshape(n, heads, l, m * b)
    # the tokens in (n, l, h, m, b) order (one copy, the layout q and k had before the heads moved forward), then one
    # (n x b) @ (b x b) product per (token, head, block) with the batch strided over the rows
    xb = x.transpose(1, 2).reshape(n, l * h * m, b).transpose(0, 1)
    out = torch.bmm(xb, blocks.reshape(l * h * m, b, b).transpose(-1, -2))
    return out.reshape(l, h, m, n, b).permute(3, 1, 0, 2, 4).reshape(n, h, l, m * b)


# grid letter of each axis in the (n, h, t, r, c, j, b) view of the patch tokens: row, col, t
_AXIS_LETTER = ('r', 'c', 't')


def _rotate_axis(y: torch.Tensor, table: torch.Tensor, axis: int) -> torch.Tensor:
    """Rotate the patch view ``y`` ``(B, H, T, R, C, j, b)`` by one axis' blocks ``table`` ``(1 or B, n_axis, H, j,
    b, b)``: ``out[..., t, r, c, j, :] = table[., coord, h, j] @ y[..., t, r, c, j, :]`` with ``coord`` the token's
    row, column or frame. One batched ``b x b`` product over the tokens that share the coordinate: no per-token
    matrix is formed."""
    ax = _AXIS_LETTER[axis]
    if table.shape[0] == 1:
        return torch.einsum(f'nhtrcjb,{ax}hjab->nhtrcja', y, table[0])
    return torch.einsum(f'nhtrcjb,n{ax}hjab->nhtrcja', y, table)


class AxisRotation(AttnTerm):
    """ComRoPE-AP / -LD rotation of a full grid, kept as one table per axis, applied axis by axis.

    AP block ``j`` turns with axis ``j mod N`` only, and the LD rotation factors as ``exp(x_0 A_0) exp(x_1 A_1)
    [exp(x_2 A_2)]`` (the factors commute), so a token's rotation is a product of one block per axis, each depending
    on one coordinate. The term stores, per axis, the blocks at that axis' distinct coordinates (the patch centres
    plus the class position 0.5 last) and rotates q and k with one batched ``b x b`` product per axis
    (:func:`_rotate_axis`): memory ``O((H + W + T) heads head_dim b)`` instead of ``O(H W T heads head_dim b)``.

    Args:
        tables: per axis (row, col[, t]), ``(1 or B, n_axis + 1, heads, m_axis, b, b)`` in the q/k dtype; LD has
            ``m_axis = m`` (every block turns with every axis), AP has the blocks ``j = axis, axis + N, ...``.
        grid: ``(T, H, W)`` patch grid of the rotated tokens (t-major, row-major).
        num_class: leading class tokens (rotated at 0.5 on every axis).
        num_prefix: class + register tokens (registers are not rotated).
        variant: ``'ap'`` or ``'ld'``.
    """

    def __init__(self, tables: Sequence[torch.Tensor], grid: Tuple[int, int, int], num_class: int, num_prefix: int,
                 variant: str):
        self._table_fields = tuple(f'table{i}' for i in range(len(tables)))
        self.tensor_fields = self._table_fields
        for i, t in enumerate(tables):
            setattr(self, f'table{i}', t)
        self.grid, self.num_class, self.num_prefix, self.variant = grid, num_class, num_prefix, variant

    @property
    def tables(self) -> List[torch.Tensor]:
        return [getattr(self, f) for f in self._table_fields]

    @property
    def num_tokens(self):
        t, h, w = self.grid
        return self.num_prefix + t * h * w

    def _rotate_view(self, y: torch.Tensor, tables: Sequence[torch.Tensor]) -> torch.Tensor:
        """``y`` ``(B, H, T, R, C, m, b)`` rotated by ``tables`` (each indexed by its axis' coordinate)."""
        n_axes = len(tables)
        if self.variant == 'ld':
            for ax, tab in enumerate(tables):
                y = _rotate_axis(y, tab, ax)
            return y
        m = y.shape[-2]
        if m % n_axes == 0:  # blocks (axis 0, axis 1, ...) repeat: a strided view per axis, no gather
            groups = y.unflatten(-2, (m // n_axes, n_axes))
            return torch.stack([_rotate_axis(groups[..., ax, :], tab, ax) for ax, tab in enumerate(tables)],
                               dim=-2).flatten(-3, -2)
        parts = [_rotate_axis(y[..., ax::n_axes, :], tab, ax) for ax, tab in enumerate(tables)]
        order = torch.cat([torch.arange(ax, m, n_axes) for ax in range(n_axes)])
        return torch.cat(parts, dim=-2)[..., torch.argsort(order).to(y.device), :]

    def _apply(self, x: torch.Tensor) -> torch.Tensor:
        _check_tokens(self.num_tokens, x)
        t, h, w = self.grid
        n, heads, _, dim = x.shape
        b = self.tables[0].shape[-1]
        tables = [tab.to(x.dtype) for tab in self.tables]
        p, c = self.num_prefix, self.num_class
        patches = x[:, :, p:].unflatten(-1, (dim // b, b)).unflatten(2, (t, h, w))
        out = self._rotate_view(patches, [tab[:, :-1] for tab in tables]).flatten(-2).flatten(2, 4)
        if not p:
            return out
        parts = []
        if c:  # class tokens: a (1, 1, c) grid whose row, col[, t] factors are all the class position's blocks
            cls = x[:, :, :c].unflatten(-1, (dim // b, b))[:, :, None, None]  # (B, H, 1, 1, c, m, b)
            cls_tables = [tab[:, -1:].expand(-1, c if ax == 1 else 1, -1, -1, -1, -1)
                          for ax, tab in enumerate(tables)]
            parts.append(self._rotate_view(cls, cls_tables).flatten(-2).flatten(2, 4))
        if p > c:
            parts.append(x[:, :, c:p])
        return torch.cat(parts + [out], dim=2)

    def blocks(self) -> torch.Tensor:
        """The per-token blocks ``(1 or B, H, L, m, b, b)`` of every token (registers: identity): the dense form of
        this term, for token subsets and tests."""
        tables = self.tables
        t, h, w = self.grid
        n_axes = len(tables)
        dev = tables[0].device
        tt, rr, cc = torch.meshgrid(torch.arange(t, device=dev), torch.arange(h, device=dev),
                                    torch.arange(w, device=dev), indexing='ij')
        idx = [rr.reshape(-1), cc.reshape(-1), tt.reshape(-1)][:n_axes]
        tok = [torch.cat([i.new_full((self.num_class,), tab.shape[1] - 1), i]) for i, tab in zip(idx, tables)]
        return _combine_axes([tab[:, ti] for tab, ti in zip(tables, tok)], self.variant, self.num_class,
                             self.num_prefix - self.num_class)

    def select(self, pos: Positions) -> AttnTerm:
        """The full grid: this term; a token subset: the dense :class:`BlockRotation` of the present tokens."""
        if not pos.is_subset:
            return self
        return BlockRotation(self.blocks()).select(pos)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Args: q, k ``(B, H, L, head_dim)``. Returns the rotated pair, new tensors in the input dtype."""
        return self._apply(q), self._apply(k)


def _combine_axes(per_axis: Sequence[torch.Tensor], variant: str, num_class: int, num_reg: int) -> torch.Tensor:
    """Per-token blocks ``(1 or B, H, L, m, b, b)`` from each axis' per-token blocks ``(1 or B, Lr, H, m_axis, b, b)``
    (rotated tokens: class tokens, then patches): LD multiplies the axes' factors, AP puts block ``j`` of axis
    ``j mod N`` in place; ``num_reg`` identity rows are inserted after the class tokens."""
    n_axes = len(per_axis)
    dev = per_axis[0].device
    if variant == 'ld':
        blocks = per_axis[0]
        for e in per_axis[1:]:
            blocks = blocks @ e
    else:
        m = sum(e.shape[3] for e in per_axis)
        order = torch.cat([torch.arange(ax, m, n_axes) for ax in range(n_axes)])
        blocks = torch.cat(list(per_axis), dim=3)[:, :, :, torch.argsort(order).to(dev)]
    if num_reg:
        eye = torch.eye(blocks.shape[-1], device=dev, dtype=blocks.dtype)
        eye = eye.expand(blocks.shape[0], num_reg, *blocks.shape[2:])
        blocks = torch.cat([blocks[:, :num_class], eye, blocks[:, num_class:]], 1)
    return blocks.transpose(1, 2)


class BasisRotation(AxisRotation):
    """ComRoPE-AP / -LD rotation of a full grid as a plain RoPE in a fixed orthonormal basis per head and block (eager
    inference; the same rotation as :class:`AxisRotation`, whose tables it keeps for every other path).

    Both variants give block ``j`` of head ``h`` ONE skew-symmetric generator ``S = F - F^T`` (``b x b``) and a scalar
    angle per token: AP ``theta(x) = x_{j mod N}``, LD ``theta(x) = sum_i multiplier[i, j] x_i`` (the generators of all
    axes are multiples of ``S``: commuting generators, ComRoPE paper, Yu et al. 2025). A real skew-symmetric ``S`` has
    a real orthonormal basis ``U`` (real Schur form) with ``S = U diag([[0, -w_k], [w_k, 0]]) U^T``, ``w_k >= 0``, so

        exp(theta S) = U diag(rot(theta w_k)) U^T,    rot(a) = [[cos a, -sin a], [sin a, cos a]]:

    a change of basis fixed per head and block, a 2 x 2 rotation by ``theta(x) w_k`` per channel pair, and the basis
    back. :meth:`rotate` does it as two GEMMs with the token-independent ``U`` (``(G, b, b)`` times ``(G, b, B L)``,
    ``G = heads * m``: the batch and tokens are the long dimension) around an elementwise rotation, instead of one
    small product per (token, block). Register tokens are copied through (the identity, bit for bit); class tokens
    turn at 0.5 on every axis.

    Args:
        tables: :class:`AxisRotation`'s per-axis tables (kept for token subsets, other dtypes, tracing).
        grid, num_class, num_prefix, variant: as :class:`AxisRotation`.
        basis: ``U`` ``(G, b, b)`` in the q/k dtype, ``(head, block)`` order; columns ``[u1_0 .. u1_{b/2-1}, u2_0 ..
            u2_{b/2-1}]`` with ``S u1_k = w_k u2_k``, ``S u2_k = -w_k u1_k``.
        cos, sin: ``(G, b / 2, 1, L)`` in the q/k dtype, of the angles ``theta(token) w_k`` (computed in float64);
            registers have angle 0.
        The three are stored with a leading axis of 1 (``tensor_fields``' batch axis: one rotation for every sample).

    Built by :func:`_skew_basis` (``torch.linalg.eigh`` of the Hermitian ``i S`` in complex128, every layer checked in
    float64 against ``torch.linalg.matrix_exp``; a layer whose basis fails the check, e.g. zero or repeated-zero
    ``w_k``, keeps :class:`AxisRotation`).
    """

    _products = None  # (basis, U^T, pair matrices): the products' matrices of exactly this basis tensor

    def __init__(self, tables: Sequence[torch.Tensor], grid: Tuple[int, int, int], num_class: int, num_prefix: int,
                 variant: str, basis: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        super().__init__(tables, grid, num_class, num_prefix, variant)
        self.tensor_fields = self._table_fields + ('basis', 'cos', 'sin')
        # leading axis 1 (the batch axis of AttnTerm.tensor_fields): one rotation for every sample
        self.basis, self.cos, self.sin = basis[None], cos[None], sin[None]
        self._matrices()

    def _matrices(self) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """``U^T`` ``(G, b, b)`` and, for an even ``G``, ``diag(U_j^T, U_j+1^T)`` ``(G / 2, 2b, 2b)`` per pair of
        blocks (the product back, :meth:`_apply_basis`); built once per basis tensor (a copy made by ``with_tensors``
        builds its own)."""
        cached = self._products
        if cached is not None and cached[0] is self.basis:
            return cached[1], cached[2]
        u_t = self.basis[0].transpose(-1, -2).contiguous()
        g, b = u_t.shape[0], u_t.shape[-1]
        pairs = None
        if g % 2 == 0:
            pairs = u_t.new_zeros(g // 2, 2 * b, 2 * b)
            pairs[:, :b, :b] = u_t[0::2]
            pairs[:, b:, b:] = u_t[1::2]
        self._products = (self.basis, u_t, pairs)
        return u_t, pairs

    def _fast(self, x: torch.Tensor) -> bool:
        """Whether the basis path may rotate ``x``: eager (not traced or compiled), no autograd graph to record (its
        product writes into the output in place), the tables' dtype and device, and the head layout the basis was
        built for."""
        b = self.basis.shape[-1]
        return (caching_allowed() and not (x.requires_grad and torch.is_grad_enabled()) and x.dim() == 4
                and x.dtype == self.basis.dtype and x.device == self.basis.device
                and x.shape[-1] % b == 0 and x.shape[1] * (x.shape[-1] // b) == self.basis.shape[1])

    def _apply_basis(self, x: torch.Tensor) -> torch.Tensor:
        n, heads, l, d = x.shape
        g, b = self.basis.shape[1], self.basis.shape[-1]
        half = b // 2
        u_t, pairs = self._matrices()
        sin = self.sin[0]
        # (G, b, B L) channel-major view of x (no copy for q / k viewed from a fused qkv projection)
        xr = x.transpose(1, 2).reshape(n * l, g, b).permute(1, 2, 0)
        y = torch.bmm(u_t, xr).view(g, 2, half, n, l)  # coordinates in the basis: (u1 part, u2 part)
        z = y * self.cos[0, :, None]
        z[:, 0].addcmul_(y[:, 1], sin, value=-1)
        z[:, 1].addcmul_(y[:, 0], sin)
        out = x.new_empty(n, l, heads, d)
        if pairs is not None:
            # back to the channels, written token-major straight into the output: (B L, 2b) @ (2b, 2b) per pair of
            # blocks (MKL runs (B L, 8) @ (8, 8) products, or a transposing copy after them, slower than this one with
            # twice the multiply-adds)
            torch.bmm(z.view(g // 2, 2 * b, n * l).transpose(1, 2), pairs,
                      out=out.view(n * l, g // 2, 2 * b).transpose(0, 1))
        else:
            out.view(n * l, g, b).permute(1, 2, 0).copy_(torch.bmm(self.basis[0], z.view(g, b, n * l)))
        c, p = self.num_class, self.num_prefix
        if p > c:  # registers: the identity, exactly
            out[:, c:p] = x[:, :, c:p].transpose(1, 2)
        return out.transpose(1, 2)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Args: q, k ``(B, H, L, head_dim)``. Returns the rotated pair, new tensors in the input dtype (the
        :class:`AxisRotation` path for other dtypes or devices and while tracing or compiling)."""
        _check_tokens(self.num_tokens, q)
        _check_tokens(self.num_tokens, k)
        if not (self._fast(q) and self._fast(k)):
            return super().rotate(q, k)
        return self._apply_basis(q), self._apply_basis(k)


def _skew_basis(s: torch.Tensor, thetas: Sequence[float] = (1.0, -0.37),
                tol: float = 1e-9) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """Real Schur form of a batch of real skew-symmetric matrices, checked.

    Args:
        s: ``(..., b, b)`` skew-symmetric, ``b`` even.
        thetas: angles at which ``U diag(rot(theta w)) U^T`` is compared with ``torch.linalg.matrix_exp(theta s)``.
        tol: largest entry error allowed (times ``1 + |theta| max|s|`` for the exponential), in float64.

    Returns:
        ``(U, w)``: ``U`` ``(..., b, b)`` float64 orthonormal with columns ``[u1_0 .. u1_{b/2-1}, u2_0 .. u2_{b/2-1}]``,
        ``w`` ``(..., b / 2)`` float64 >= 0, with ``s = sum_k w_k (u2_k u1_k^T - u1_k u2_k^T)``; or None when the check
        fails for any matrix of the batch (zero or nearly zero ``w_k``, whose eigenvectors need not split into real
        planes, non-finite entries).

    From ``torch.linalg.eigh(1j * s)`` (Hermitian): the eigenvalues come in pairs ``+-w``; for the eigenvector
    ``v = a + i b`` of ``+w``, ``s a = w b`` and ``s b = -w a``, and ``sqrt(2) a``, ``sqrt(2) b`` are orthonormal
    (``v`` is orthogonal to its conjugate, the eigenvector of ``-w``).
    """
    s = s.detach().to(torch.float64)
    b = s.shape[-1]
    half = b // 2
    if not bool(torch.isfinite(s).all()):
        return None
    try:
        lam, v = torch.linalg.eigh(1j * s.to(torch.complex128))
    except RuntimeError:  # no convergence
        return None
    w = lam[..., half:]
    vp = v[..., half:]
    u = torch.cat([vp.real, vp.imag], -1) * math.sqrt(2.0)
    eye = torch.eye(b, dtype=torch.float64, device=s.device)
    if not (u.transpose(-1, -2) @ u - eye).abs().amax() <= tol or not bool((w >= -tol).all()):
        return None
    scale = float(s.abs().amax()) if s.numel() else 0.0
    for theta in thetas:
        ang = theta * w
        c, sn = torch.diag_embed(torch.cos(ang)), torch.diag_embed(torch.sin(ang))
        rot = torch.cat([torch.cat([c, -sn], -1), torch.cat([sn, c], -1)], -2)
        err = (u @ rot @ u.transpose(-1, -2) - torch.linalg.matrix_exp(theta * s)).abs().amax()
        if not err <= tol * (1.0 + abs(theta) * scale):
            return None
    return u, w.clamp_min(0.0)


def _exporting() -> bool:
    return bool(getattr(torch.compiler, 'is_exporting', lambda: False)())


class LieRotation(AttnTerm):
    """LieRE rotation built where it is used: each token's blocks ``exp(sum_i x_i A_i)`` are computed inside
    :meth:`rotate`, in chunks of tokens, applied to q and k, and dropped, so at video sizes no layer holds the
    per-token blocks of the whole sequence (one layer's would be ``L heads head_dim b`` floats).

    Args:
        gen: ``(H, N, m, b, b)`` angle matrices of the layer (compute dtype, float32 or float64).
        coords: ``(1 or B, L_rot, N)`` coordinates of the rotated tokens (class tokens, then patches).
        num_class: leading class tokens; ``num_prefix - num_class`` register tokens follow them, unrotated.
        num_prefix: class + register tokens.
        dtype: q/k dtype the blocks are cast to.
    """
    tensor_fields = ('gen', 'coords')
    chunk_elements = 1 << 19  # block entries per chunk (2 MiB in float32)

    def __init__(self, gen: torch.Tensor, coords: torch.Tensor, num_class: int, num_prefix: int,
                 dtype: torch.dtype):
        self.gen, self.coords, self.num_class, self.num_prefix, self.dtype = gen, coords, num_class, num_prefix, dtype

    @property
    def num_tokens(self):
        return self.coords.shape[1] + self.num_prefix - self.num_class

    def _blocks(self, coords: torch.Tensor) -> torch.Tensor:
        """``(1 or B, H, l, m, b, b)`` for coordinates ``(1 or B, l, N)``."""
        return _lie_blocks(self.gen, coords).transpose(1, 2).to(self.dtype)

    def _rotated_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The rotated tokens of ``x``: class tokens, then patches (registers left out)."""
        c, p = self.num_class, self.num_prefix
        return x if p == c else torch.cat([x[:, :, :c], x[:, :, p:]], dim=2)

    def _put_back(self, rot: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        c, p = self.num_class, self.num_prefix
        return rot if p == c else torch.cat([rot[:, :, :c], x[:, :, c:p], rot[:, :, c:]], dim=2)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Args: q, k ``(B, H, L, head_dim)``. Returns the rotated pair, new tensors in the input dtype."""
        _check_tokens(self.num_tokens, q)
        qr, kr = self._rotated_rows(q), self._rotated_rows(k)
        n_rot = self.coords.shape[1]
        step = n_rot if _tracing() else max(1, self.chunk_elements // self.gen[:, 0].numel())
        if step >= n_rot:
            blocks = _lie_blocks(self.gen, self.coords).to(q.dtype)
            return (self._put_back(_apply_token_blocks(blocks, qr), q),
                    self._put_back(_apply_token_blocks(blocks, kr), k))
        outs_q, outs_k = [], []
        for start in range(0, n_rot, step):
            blocks = _lie_blocks(self.gen, self.coords[:, start:start + step]).to(q.dtype)
            outs_q.append(_apply_token_blocks(blocks, qr[:, :, start:start + step]))
            outs_k.append(_apply_token_blocks(blocks, kr[:, :, start:start + step]))
        return self._put_back(torch.cat(outs_q, 2), q), self._put_back(torch.cat(outs_k, 2), k)

    def dense(self) -> BlockRotation:
        """The same rotation with every token's blocks computed now (small grids, cached in eval). The blocks are
        stored token-major (``(1 or B, L, H, m, b, b)`` contiguous, seen as ``(1 or B, H, L, m, b, b)``): q and k are
        rotated in that order without a copy of the blocks (:func:`_apply_token_blocks`)."""
        blocks = _lie_blocks(self.gen, self.coords).to(self.dtype)  # (1 or B, L_rot, H, m, b, b)
        n_reg = self.num_prefix - self.num_class
        if n_reg:
            eye = torch.eye(blocks.shape[-1], device=blocks.device, dtype=blocks.dtype)
            eye = eye.expand(blocks.shape[0], n_reg, *blocks.shape[2:])
            blocks = torch.cat([blocks[:, :self.num_class], eye, blocks[:, self.num_class:]], 1)
        return BlockRotation(blocks.contiguous().transpose(1, 2))

    def select(self, pos: Positions) -> AttnTerm:
        """The full grid: this term; a token subset: the dense :class:`BlockRotation` of the present tokens."""
        return self if not pos.is_subset else self.dense().select(pos)


def _lie_blocks(gen: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    """``exp(sum_i coords_i gen[:, i])`` ``(1 or B, l, H, m, b, b)`` for generators ``(H, N, m, b, b)`` and coordinates
    ``(1 or B, l, N)`` (one exponential per token, head and block)."""
    if _tracing() or (torch.is_grad_enabled() and (gen.requires_grad or coords.requires_grad)):
        g = coords[:, :, None, None, None, None, 0] * gen[None, None, :, 0]
        for ax in range(1, gen.shape[1]):
            g = g + coords[:, :, None, None, None, None, ax] * gen[None, None, :, ax]
        # traced: matmuls only when exporting (ONNX has no matrix exponential); with autograd the plain Taylor form
        # (its backward is cheaper than that of torch.linalg.matrix_exp)
        return expm_taylor(g) if not _tracing() or _exporting() else torch.linalg.matrix_exp(g)
    # eager inference: the generators of every token, head and block in one (tokens, H m b b) buffer, then the
    # skew-symmetric exponential (spectral scaling, no per-matrix squaring masks)
    h, n_ax, m, b = gen.shape[0], gen.shape[1], gen.shape[2], gen.shape[-1]
    c, gen = coords.reshape(-1, n_ax, 1), gen.transpose(0, 1).reshape(n_ax, -1)
    g = c[:, 0] * gen[0]
    for ax in range(1, n_ax):  # addcmul: ~3x a (tokens x N) @ (N x H m b b) matmul with N = 2 or 3
        g = g.addcmul_(c[:, ax], gen[ax])
    return expm_skew(g.reshape(*coords.shape[:2], h, m, b, b))


#: squarings of :func:`expm_taylor` unrolled in traced graphs (ONNX, export): exact up to 1-norms of 0.5 * 2^24
MAX_SQUARINGS = 24


def matrix_exp(a: torch.Tensor) -> torch.Tensor:
    """``exp(a)`` of a batch of small matrices ``(..., b, b)``: :func:`expm_taylor` (matmuls only) while exporting
    (ONNX has no matrix exponential) and in eager training (its backward is several times cheaper than that of
    ``torch.linalg.matrix_exp``), ``torch.linalg.matrix_exp`` otherwise (eager inference, ``torch.compile``,
    ``torch.jit.trace``).

    Raises:
        ValueError: (eager) a non-finite generator: ``torch.linalg.matrix_exp`` would return NaN silently.
    """
    if _exporting() or (not _tracing() and torch.is_grad_enabled() and a.requires_grad):
        return expm_taylor(a)
    if not _tracing() and not bool(torch.isfinite(a).all()):
        raise _non_finite()
    return torch.linalg.matrix_exp(a)


def _non_finite() -> ValueError:
    return ValueError('matrix exponential of a non-finite generator (NaN or inf entries, or entries so large that '
                      'their norm overflows): the rotation parameters of ComRoPE / LieRE are not finite or far too '
                      'large (a diverged run or a damaged checkpoint); fix: check the parameters, e.g. train with a '
                      'lower learning rate or load another checkpoint')


def _squarings(s: torch.Tensor) -> int:
    """The largest squaring count of a batch, or a clear error when a generator holds NaN or inf entries.

    Raises:
        ValueError: a non-finite generator (``torch.linalg.matrix_exp`` would return NaN silently).
    """
    top = float(s.max().item())
    if not math.isfinite(top):
        raise _non_finite()
    return int(top)


def expm_taylor(a: torch.Tensor) -> torch.Tensor:
    """Matrix exponential by scaling and squaring a Taylor polynomial, written with matmuls, elementwise ops and
    ``where`` only, so that ONNX and inductor have every op (Higham, "The Scaling and Squaring Method for the Matrix
    Exponential Revisited", SIAM J. Matrix Anal. Appl. 2005, Sec. 2).

    Each matrix is scaled by ``2^-s`` with ``s = max(0, ceil(log2(||a||_1 / 0.5)))`` (its own ``s``), where the
    truncation error of degree 8 (float32) or 12 (float64) is below the dtype's rounding (``0.5^9 / 9! = 5e-9``,
    ``0.5^13 / 13! = 2e-14``), then squared ``s`` times. Eager code squares ``max(s)`` times; a traced graph has a
    fixed :data:`MAX_SQUARINGS` squarings, each kept only where ``s`` asks for it, so the graph has no data-dependent
    shape or loop. Agrees with ``torch.linalg.matrix_exp`` to float32 rounding (``tests/test_comrope.py``).

    Args:
        a: ``(..., b, b)`` float32 or float64.

    Returns:
        ``exp(a)`` with the shape and dtype of ``a``.
    """
    deg = 12 if a.dtype == torch.float64 else 8
    norm = a.detach().abs().sum(-2).amax(-1)  # (...,) max column sum
    s = torch.ceil(torch.log2(norm.clamp_min(1e-30) / 0.5)).clamp_min(0)
    if _tracing():
        s = s.clamp_max(MAX_SQUARINGS)
        squarings = MAX_SQUARINGS
    else:
        squarings = _squarings(s) if a.numel() else 0
    a = a * torch.pow(2.0, -s)[..., None, None].to(a.dtype)
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    out = eye + a / deg
    for k in range(deg - 1, 0, -1):
        out = eye + (a @ out) / k
    for i in range(squarings):
        out = torch.where((s > i)[..., None, None], out @ out, out)
    return out


def expm_ps(a: torch.Tensor) -> torch.Tensor:
    """Matrix exponential of a batch of small matrices for eager code: scaling and squaring of a Taylor polynomial of
    degree 15 (float32) or 19 (float64) evaluated by Paterson-Stockmeyer in ``A^4`` (Higham, "Functions of
    Matrices", SIAM 2008, Sec. 4.4.3 and 10.3): ``A^2, A^3, A^4``, the degree-3 blocks as one small matmul over the
    powers, then 3 (float64: 4) fused ``baddbmm`` steps, so 6-7 batched products before squaring instead of the 7-11
    of :func:`expm_taylor`; each matrix is scaled by ``2^-s`` with ``s = max(0, ceil(log2(||a||_1 / theta)))``
    (``theta`` 2.0 / 1.7, where the truncation error ``theta^(d+1) / (d+1)!`` is ``3e-9`` / ``2e-15``, as small as
    that of :func:`expm_taylor`), then squared ``s`` times (``max(s)`` rounds, each kept where ``s`` asks for it).
    Agrees with ``torch.linalg.matrix_exp`` to the dtype's rounding (``tests/test_comrope.py``). Eager only: it
    reads ``max(s)``.

    Args:
        a: ``(..., b, b)`` float32 or float64.

    Returns:
        ``exp(a)`` with the shape and dtype of ``a``.
    """
    f64 = a.dtype == torch.float64
    nb, theta = (5, 1.7) if f64 else (4, 2.0)  # blocks of 4 coefficients: degree 4 nb - 1
    shape, n = a.shape, a.shape[-1]
    a = a.reshape(-1, n, n)
    if not a.shape[0]:
        return a.reshape(shape).clone()
    norm = a.abs().sum(-2).amax(-1)
    s = torch.ceil(torch.log2(norm.clamp_min(1e-30) / theta)).clamp_min(0)
    squarings = _squarings(s)
    if squarings:
        a = a * torch.pow(2.0, -s)[:, None, None].to(a.dtype)
    out = _taylor_ps(a, torch.bmm(a, a), nb)
    for i in range(squarings):
        out = torch.where((s > i)[:, None, None], torch.bmm(out, out), out)
    return out.reshape(shape)


def _taylor_ps(a: torch.Tensor, a2: torch.Tensor, nb: int) -> torch.Tensor:
    """The degree ``4 nb - 1`` Taylor polynomial of ``exp`` at the (already scaled) batch ``a`` ``(M, b, b)``, with
    ``a2 = a @ a``, by Paterson-Stockmeyer in ``A^4`` (shared by :func:`expm_ps` and :func:`expm_skew`)."""
    a3 = torch.bmm(a2, a)
    a4 = torch.bmm(a2, a2)
    coef = [1.0 / math.factorial(k) for k in range(4 * nb)]
    blocks = a.new_empty(nb, *a.shape)  # block j: sum_{i<4} coef[4 j + i] a^i (elementwise: ~2x a (nb x 3) matmul)
    for j in range(nb):
        torch.mul(a, coef[4 * j + 1], out=blocks[j])
        blocks[j].add_(a2, alpha=coef[4 * j + 2]).add_(a3, alpha=coef[4 * j + 3])
    blocks.diagonal(dim1=-2, dim2=-1).add_(torch.tensor(coef[::4], dtype=a.dtype, device=a.device)[:, None, None])
    out = blocks[nb - 1]
    for j in range(nb - 2, -1, -1):
        out = torch.baddbmm(blocks[j], a4, out)
    return out


def expm_skew(a: torch.Tensor) -> torch.Tensor:
    """Matrix exponential of a batch of real skew-symmetric matrices (eager LieRE inference): scaling and squaring of
    the Taylor polynomial of :func:`expm_ps` (degree 15 in float32, 19 in float64, Paterson-Stockmeyer in ``A^4``),
    with the scaling chosen from the spectral radius instead of the 1-norm and one squaring count for the whole batch.

    The eigenvalues of a real skew-symmetric ``A`` are ``+-i w_k``, so ``A`` is normal, ``||A||_2 = rho = max w_k``
    and ``A^2`` is symmetric with eigenvalues ``-w_k^2``, each nonzero one at least twice: ``rho^4 <= ||A^2||_F^2 / 2``.
    The truncation error of the Taylor polynomial of a normal matrix is bounded in the 2-norm by the scalar series at
    ``rho`` (Higham, "Functions of Matrices", SIAM 2008, Sec. 4.3 and 10.3), so ``rho`` replaces the 1-norm of
    :func:`expm_ps`, which overestimates it by about 1.8x on LieRE's blocks (one squaring fewer). Every matrix is
    scaled by ``2^-s`` with ``s = max(0, ceil(log2(max rho / theta)))`` over the batch (``theta`` 2.0 / 1.7 as in
    :func:`expm_ps`) and squared ``s`` times: no per-matrix masks (a masked squaring costs 40 % of a product on 8 x 8
    blocks), and an extra squaring of a small matrix only adds rounding at the level of ``2^s u``. Agrees with
    ``torch.linalg.matrix_exp`` to the dtype's rounding on skew-symmetric input (``tests/test_comrope.py``); the
    input is not checked (the bound is wrong for other matrices). Eager only: it reads ``max rho``.

    Args:
        a: ``(..., b, b)`` float32 or float64, skew-symmetric (``a == -a.mT``), as ``P - P^T`` gives and sums of such.

    Returns:
        ``exp(a)`` (orthogonal) with the shape and dtype of ``a``.

    Raises:
        ValueError: ``a`` holds NaN or inf entries.
    """
    f64 = a.dtype == torch.float64
    nb, theta = (5, 1.7) if f64 else (4, 2.0)  # blocks of 4 coefficients: degree 4 nb - 1
    shape, n = a.shape, a.shape[-1]
    a = a.reshape(-1, n, n)
    if not a.shape[0]:
        return a.reshape(shape).clone()
    a2 = torch.bmm(a, a)
    rho4 = a2.square().sum((-2, -1)).amax() * 0.5  # >= rho^4 of every matrix
    s = torch.ceil(torch.log2(rho4.clamp_min(1e-30).sqrt().sqrt() / theta)).clamp_min(0)
    squarings = _squarings(s)
    if squarings:
        a = a * 2.0 ** -squarings
        a2 = a2 * 4.0 ** -squarings
    out = _taylor_ps(a, a2, nb)
    for _ in range(squarings):
        out = torch.bmm(out, out)
    return out.reshape(shape)


def fold_official_ape(table: torch.Tensor, grid_size: Tuple[int, int], num_prefix_tokens: int = 1) -> torch.Tensor:
    """Evaluate the official ComRoPE APE sampling on a grid and return a standard APE table.

    The official APE is sampled with a 3-D ``grid_sample`` whose coordinates make only the row position count: a token
    at normalised row ``r`` gets ``lerp_rows(0.5 * (T[:, (n-1)//2] + T[:, n//2]), r * (n - 1))`` for the ``n x n``
    table ``T``, whatever its column (``shared/golden/README.md``). Evaluated once at the target grid, the rule gives
    an ordinary APE table, so the standard learned APE reproduces the official embedding exactly at that grid.

    Args:
        table: ``position_embedding`` of shape ``(F, n, n, C)`` (``F = 1`` for images) or ``(n, n, C)``.
        grid_size: target patch grid ``(H, W)``.
        num_prefix_tokens: prefix entries to write first; each gets the value at the class position (0.5, 0.5),
            as the official code gives its class token.

    Returns:
        ``(1, num_prefix_tokens + H * W, C)`` in the table's dtype, tokens row-major. Every token of an image row gets
        the same vector, because the official sampling ignores the column coordinate.

    Raises:
        ValueError: the table is not ``(1, n, n, C)`` / ``(n, n, C)`` (video tables with F > 1 are not supported).
    """
    if table.ndim == 4:
        if table.shape[0] != 1:
            raise ValueError(f'official position_embedding has {table.shape[0]} frames; only images (F=1) convert')
        table = table[0]
    if table.ndim != 3 or table.shape[0] != table.shape[1]:
        raise ValueError(f'official position_embedding must be (1, n, n, C), got {tuple(table.shape)}')
    n = table.shape[0]
    t = table.double()
    centre = 0.5 * (t[:, (n - 1) // 2] + t[:, n // 2])  # (n, C): second table axis sampled at index (n-1)/2

    def at_row(r: torch.Tensor) -> torch.Tensor:
        idx = (r * (n - 1)).clamp(0, n - 1)  # align_corners=True, border padding
        lo = idx.floor().long().clamp(max=n - 1)
        hi = (lo + 1).clamp(max=n - 1)
        wgt = (idx - lo.double())[:, None]
        return centre[lo] * (1 - wgt) + centre[hi] * wgt

    h, w = grid_size
    rows = (torch.arange(h, dtype=torch.float32) + 0.5) / h  # official positions are float32
    per_row = at_row(rows.double())  # (H, C)
    patches = per_row[:, None, :].expand(h, w, -1).reshape(h * w, -1)
    prefix = at_row(torch.tensor([0.5], dtype=torch.float64)).expand(num_prefix_tokens, -1)
    return torch.cat([prefix, patches], 0)[None].to(table.dtype)


def _axis_coords(n: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Normalised patch centres ``(i + 0.5) / n`` for ``i < n``, computed in float32."""
    return ((torch.arange(n, device=device, dtype=torch.float32) + 0.5) / n).to(dtype)


@register_pos_encoding('comrope')
class ComRoPE(PosEncoding):
    """ComRoPE (``variant='ap'`` or ``'ld'``) and LieRE (``variant='liere'``) for 2D patch grids and, with a 3-tuple
    ``grid_size``, over (row, col, t) for videos (see the module docstring).

    Args:
        dim: embedding width; ``dim / num_heads`` is the head dim.
        num_heads: attention heads.
        depth: number of attention layers; each gets its own generators.
        grid_size: default patch grid ``(H, W)``, or ``(T', H', W')`` for videos (three axes); otherwise only the
            optional APE uses it (rotations are built from the grid of each forward).
        num_prefix_tokens: class + register tokens in front of the patches.
        num_class_tokens: leading class tokens; they are rotated at ``(0.5, 0.5)``. Registers get the identity.
        variant: ``'ap'``, ``'ld'`` or ``'liere'``.
        block_size: ``b`` in {2, 4, 8}; must divide the head dim (AP on images also needs an even number of blocks,
            one half per axis, as in the official code; on videos at least 3 blocks).
        init_std: standard deviation of the ``freqs`` initialisation (official default 1.0).
        perturb_intensity: training-time jitter of each patch coordinate, ``N(0, 1) * 0.5 * intensity`` patches
            clamped to +-0.5 patch (official rule). 0 = off; eval never perturbs.
        scale_factor: LieRE only, divides the generators (the official default 1e100 is degenerate; we use 1.0).
        random_positions: ``None``, ``'subset'``, ``'cape'`` or a dict (:mod:`zoo.encodings.randomized`): per-sample
            random positions in training (``'subset'``: ``(c + 0.5) / R`` for a sorted subset ``c`` of ``[0, R)``,
            ``R = ceil(range_factor n)``; ``'cape'``: the cell centres shifted and scaled, divided by ``n``); eval
            uses the grid. Not with ``perturb_intensity`` (one augmentation of the positions at a time).
        ape: also add a learned absolute position table (``zoo.encodings.absolute.LearnedAPE``) as the ``ape``
            submodule. Note that the official ``keep_ape`` flag is inverted; this flag means what it says.
        per_layer, per_head: LieRE only. ``False`` shares one set of generators across the layers / the heads (the
            LieRE authors' code, github.com/StanfordMIMI/LieRE: ``rotary_embedding_per_layer`` /
            ``rotary_embedding_per_head``, both ``False`` in its ImageNet recipe, both ``True`` in its UCF101 one).
            Shared generators mean shared per-token blocks: computed once per forward for every layer / head
            (``layers.0`` holds the only parameters; ``freqs`` has 1 head). Default ``True`` / ``True``: ComRoPE's
            LieRE baseline, whose checkpoints the official layout holds.

    Raises:
        ValueError: unknown variant, block size not in {2, 4, 8}, block size not dividing the head dim, an odd number
            of AP blocks (images) or fewer than 3 (videos), ``dim`` not divisible by ``num_heads``,
            ``random_positions`` with ``perturb_intensity``, or shared generators for AP / LD; at forward a
            video grid (``T > 1``) given to an image model.
    """
    family = 'ComRoPE (trainable commuting rotations)'
    adaptation = 'none needed: positions are normalised to [0, 1], so a new grid interpolates between learned angles'
    default_variant = 'ap'

    def __init__(
            self,
            dim: int,
            num_heads: int,
            depth: int,
            grid_size: Tuple[int, int] = (14, 14),
            num_prefix_tokens: int = 1,
            num_class_tokens: int = 1,
            variant: Optional[str] = None,
            block_size: int = 8,
            init_std: float = 1.0,
            perturb_intensity: float = 0.0,
            scale_factor: float = 1.0,
            ape: bool = False,
            random_positions: Any = None,
            per_layer: bool = True,
            per_head: bool = True,
    ):
        super().__init__()
        variant = self.default_variant if variant is None else variant
        if variant not in VARIANTS:
            raise ValueError(f'unknown ComRoPE variant {variant!r}; choose one of {VARIANTS}')
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size not in BLOCK_SIZES:
            raise ValueError(f'block_size must be one of {BLOCK_SIZES}, got {block_size!r}')
        if dim % num_heads:
            raise ValueError(f'dim {dim} is not divisible by num_heads {num_heads}')
        head_dim = dim // num_heads
        if head_dim % block_size:
            raise ValueError(f'block_size {block_size} does not divide the head dim {head_dim} '
                             f'(dim {dim} / {num_heads} heads)')
        grid_size = parse_grid_size('comrope', grid_size)
        self.num_axes = len(grid_size)  # 2: (row, col); 3: (row, col, t)
        n_blocks = head_dim // block_size
        if variant == 'ap' and self.num_axes == 2 and n_blocks % 2:
            raise ValueError(f'ComRoPE-AP splits the {n_blocks} blocks of size {block_size} evenly over '
                             f'{NUM_AXES} axes; use a block size giving an even number of blocks per head')
        if variant == 'ap' and n_blocks < self.num_axes:
            raise ValueError(f'ComRoPE-AP cycles its {n_blocks} blocks of size {block_size} over {self.num_axes} axes '
                             f'(row, col, t) and needs at least one per axis; use a smaller block_size')
        if perturb_intensity < 0:
            raise ValueError(f'perturb_intensity must be >= 0, got {perturb_intensity}')
        if scale_factor <= 0:
            raise ValueError(f'scale_factor must be > 0, got {scale_factor}')
        for flag, value in (('per_layer', per_layer), ('per_head', per_head)):
            if not isinstance(value, bool):
                raise ValueError(f'{flag} must be True or False, got {value!r}')
        if variant != 'liere' and not (per_layer and per_head):
            raise ValueError(f'per_layer=False / per_head=False (generators shared across layers / heads) are LieRE '
                             f'options; ComRoPE-{variant.upper()} has its own generators per layer and head (as the '
                             f'ComRoPE paper). Use the liere encoding (variant="liere") to share them')
        self.per_layer, self.per_head = per_layer, per_head
        self.variant = variant
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.depth = depth
        self.block_size = block_size
        self.init_std = init_std
        self.perturb_intensity = float(perturb_intensity)
        name = 'liere' if variant == 'liere' else 'comrope'
        self.random_positions = RandomPositions.parse(random_positions, name)
        if self.random_positions.active and self.perturb_intensity > 0:
            raise ValueError(f'{name}: random_positions and perturb_intensity both augment the positions in '
                             'training; use one of them (perturb_intensity=0 with random_positions)')
        self.grid_size = grid_size
        self.num_prefix_tokens = num_prefix_tokens
        self.num_class_tokens = num_class_tokens
        if self.num_axes == 3:
            self.adaptation = ('none needed: (row, col, t) are normalised to [0, 1], so more frames or a bigger frame '
                               'interpolate between learned angles')
        # LieRE with per_layer=False / per_head=False: one generator set for every layer / head (layers.0 only; heads
        # 1 in the freqs), so the per-token blocks are computed once per forward for all of them
        self.layers = nn.ModuleList([
            _LayerGenerators(variant, num_heads if self.per_head else 1, head_dim, block_size, init_std, scale_factor,
                             self.num_axes)
            for _ in range(depth if self.per_layer else 1)])
        if ape:
            self.ape = LearnedAPE(dim=dim, grid_size=grid_size, num_prefix_tokens=num_prefix_tokens)
        else:
            self.ape = None
        self._cache = TableCache(max_entries=8)
        _LIVE[id(self)] = self  # for the compiled-inference op (comrope_cached_tables)

    def __setstate__(self, state):
        super().__setstate__(state)
        _LIVE[id(self)] = self  # copies (copy.deepcopy, pickle) are served too

    # ----------------------------------------------------------------------------------------------------- hooks
    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        """Adds the optional learned APE; identity otherwise."""
        return x if self.ape is None else self.ape.embed(x, pos)

    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        """Rotations need nothing; the optional APE is resampled."""
        self.grid_size = parse_grid_size('comrope', grid_size)
        if self.ape is not None:
            self.ape.set_grid_size(grid_size)

    def no_weight_decay(self) -> set:
        names = {f'layers.{i}.{n}' for i, layer in enumerate(self.layers) for n, _ in layer.named_parameters()}
        if self.ape is not None:
            names |= {f'ape.{n}' for n in self.ape.no_weight_decay()}
        return names

    def map_checkpoint(self, layout: str, state_dict: Dict[str, torch.Tensor],
                       prefix: str = '') -> Dict[str, torch.Tensor]:
        """Official ComRoPE / LieRE checkpoints (Hugging Face CLIP vision layout, ``'comrope_hf_clip'``):
        ``vision_model.encoder.layers.N.self_attn.{freqs,multiplier}`` -> ``layers.N.{freqs,multiplier}`` (identical
        layouts), and ``vision_model.embeddings.position_embedding`` folded into ``ape.pos_embed`` at this grid
        (:func:`fold_official_ape`), or dropped when the encoding has no APE (the official ``keep_ape=True`` model).
        Other layouts: the APE only. See :meth:`PosEncoding.map_checkpoint`.

        Raises:
            ValueError: generator tensors missing, extra or mis-shaped for this encoding (wrong variant, block size,
                heads or head dim), every one listed with the expected layouts.
        """
        out = super().map_checkpoint(layout, state_dict, prefix)
        if layout != 'comrope_hf_clip':
            return out
        if _OFFICIAL_APE in state_dict:
            table = state_dict.pop(_OFFICIAL_APE)
            if self.ape is not None:
                out[prefix + 'ape.pos_embed'] = fold_official_ape(table, self.ape.grid_size, self.ape.num_embed_prefix)
        got = {}
        for k in list(state_dict):
            m = _OFFICIAL_GENERATOR.match(k)
            if m:
                got[f'layers.{m.group(1)}.{m.group(2)}'] = state_dict.pop(k)
        self._check_official_generators(got, prefix)
        out.update({prefix + k: v for k, v in got.items()})
        return out

    def _check_official_generators(self, tensors: Dict[str, torch.Tensor], prefix: str) -> None:
        """ValueError naming every generator tensor that is missing, extra or mis-shaped (keys as ``prefix`` +
        name)."""
        got = {prefix + k: tuple(v.shape) for k, v in tensors.items()}
        want = {prefix + k: tuple(v.shape) for k, v in self.state_dict().items()
                if re.match(r'^layers\.\d+\.(freqs|multiplier)$', k)}
        problems = [f'{k}: checkpoint {got[k]} vs model {want[k]}'
                    for k in sorted(set(got) & set(want)) if got[k] != want[k]]
        problems += [f'{k}: missing from the checkpoint (model expects {want[k]})'
                     for k in sorted(set(want) - set(got))]
        problems += [f'{k}: {got[k]} in the checkpoint but not in the model' for k in sorted(set(got) - set(want))]
        if problems:
            desc = (f'variant={self.variant!r}, block_size={self.block_size}, heads={self.num_heads}, '
                    f'head_dim={self.head_dim}, per_layer={self.per_layer}, per_head={self.per_head}')
            raise ValueError('official ComRoPE frequency tensors do not fit the model encoding (' + desc + '):\n  '
                             + '\n  '.join(problems)
                             + '\n  Expected layouts: AP freqs (H, 1, m, b, b); LD freqs (H, 1, m, b, b) + multiplier '
                               '(1, 2, m, 1, 1); LieRE freqs (H, 2, m, b, b), m = head_dim / b. Build the model with '
                               'the checkpoint\'s variant and pe_kwargs=dict(block_size=b); official checkpoints '
                               'have generators per layer and head (per_layer=True, per_head=True).')

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> List[BlockRotation]:
        """One :class:`BlockRotation` per layer for the tokens described by ``pos``.

        Args:
            pos: token layout; ``pos.grid`` must be ``(1, H, W)`` for an image model, any ``(T, H, W)`` for a video
                model.
            dtype: dtype of q/k; tables are cast to it (computed in float32, or float64 for float64).
            device: device of q/k.

        Raises:
            ValueError: the positions carry no grid, or an image model gets a grid with ``T != 1``.
        """
        if pos.grid is None:
            raise ValueError('ComRoPE needs a patch grid (Positions.grid), not explicit ids')
        t, h, w = pos.grid
        if self.num_axes == 2 and t != 1:
            raise ValueError(f'this ComRoPE is 2D (row, col), built with grid_size={self.grid_size}; got a grid with '
                             f'T={t} frames. Build it with a (T, H, W) grid_size for videos')
        sizes = (h, w) if self.num_axes == 2 else (h, w, t)
        perturb = self.training and self.perturb_intensity > 0
        random = pos.draw_batch if self.training and self.random_positions.active else 0

        if (torch.compiler.is_compiling() and not _exporting() and self.block_size != 2
                and not (perturb or random or self.training or torch.is_grad_enabled())
                and (self.variant != 'liere'
                     or self._dense_bytes(sizes, pos.num_class_tokens, dtype) <= self.dense_cache_bytes)):
            # torch.compile in inference: the rotations (LieRE's per-token blocks, AP / LD's per-axis tables: matrix
            # exponentials that depend only on the grid and the parameters) come from the eager cache through an op
            # the graph does not look into, so the compiled model never recomputes them
            t = sizes[2] if len(sizes) == 3 else 1
            params = [p for layer in self.layers for p in layer.parameters()]
            tensors = torch.ops.zoo.comrope_cached_tables(params, id(self), sizes[0], sizes[1], t,
                                                          pos.num_prefix_tokens, pos.num_class_tokens, dtype)
            if self.variant == 'liere':
                terms = [BlockRotation(b) for b in tensors] * (1 if self.per_layer else self.depth)
            else:
                n = len(sizes)
                terms = [AxisRotation(tensors[i:i + n], (t, sizes[0], sizes[1]), pos.num_class_tokens,
                                      pos.num_prefix_tokens, self.variant) for i in range(0, len(tensors), n)]
            return terms if not pos.is_subset else [t.select(pos) for t in terms]
        return self._terms(pos, sizes, perturb, random, dtype, device)

    def _dense_bytes(self, sizes: Tuple[int, ...], num_class: int, dtype: torch.dtype) -> int:
        """Bytes of LieRE's per-token blocks of every layer for a grid (computed in float32 or float64)."""
        n_rot = num_class + math.prod(sizes)
        cdtype = torch.float64 if dtype == torch.float64 else torch.float32
        layers = self.depth if self.per_layer else 1
        heads = self.num_heads if self.per_head else 1
        return layers * heads * self.head_dim * self.block_size * n_rot * cdtype.itemsize

    def _terms(self, pos: Positions, sizes: Tuple[int, ...], perturb: bool, random: int, dtype: torch.dtype,
               device) -> List[AttnTerm]:
        def build():
            return self._build_terms(sizes, pos.num_prefix_tokens, pos.num_class_tokens, dtype, device, perturb,
                                     random)

        # Cache only results that carry no autograd graph and no randomness; the key holds each generator
        # parameter's identity and version counter, so a stale table can never be returned.
        if perturb or random or self.training or torch.is_grad_enabled():
            terms = self._build_terms(sizes, pos.num_prefix_tokens, pos.num_class_tokens, dtype, device, perturb,
                                      random)
        else:
            terms = self._cache.get(lambda: (sizes, pos.num_prefix_tokens, pos.num_class_tokens, dtype,
                                             torch.device(device), param_key(self.layers.parameters())), build)
        return terms if not pos.is_subset else [t.select(pos) for t in terms]

    # ------------------------------------------------------------------------------------------------ building
    def generators(self, layer: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Angle matrices of one layer, ``(H, N, m, b, b)`` (``A[h, axis, block]``, axes (row, col[, t]))."""
        return self.layers[layer if self.per_layer else 0].generators(dtype)

    def rotation_blocks(self, layer: int, coords: torch.Tensor) -> torch.Tensor:
        """Reference (slow, definition-level) rotation at arbitrary positions.

        Args:
            layer: layer index.
            coords: ``(..., N)`` positions (row, col[, t]) in the normalised units of this module.

        Returns:
            ``(..., H, m, b, b)`` blocks ``exp(sum_i coords_i A_i[h, j])`` in the dtype of ``coords`` (float32 or
            float64).
        """
        a = self.generators(layer, coords.dtype)
        gen = torch.einsum('...n,hnmij->...hmij', coords, a)
        return torch.linalg.matrix_exp(gen)

    def _coords(self, sizes: Tuple[int, ...], perturb: bool, device, cdtype, random: int = 0):
        """Per axis (row, col[, t]): the distinct coordinate values ``(1 or B, n + 1)`` (the class position 0.5 last;
        ``B = random`` per-sample draws of ``random_positions``) and, for every patch (t-major, row-major), its index
        into them; plus the index of the class position."""
        h, w = sizes[0], sizes[1]
        t = sizes[2] if len(sizes) == 3 else 1
        n_p = t * h * w
        tt, rr, cc = torch.meshgrid(torch.arange(t, device=device), torch.arange(h, device=device),
                                    torch.arange(w, device=device), indexing='ij')
        idx = [rr.reshape(-1), cc.reshape(-1), tt.reshape(-1)][:len(sizes)]
        bd = max(random, 1)
        half = torch.full((bd, 1), 0.5, device=device, dtype=cdtype)
        if perturb:
            noise = torch.randn(n_p, len(sizes), device=device) * (0.5 * self.perturb_intensity)
            noise = noise.clamp(-0.5, 0.5)
            values = [torch.cat([((i + 0.5 + noise[:, a]) / n).to(cdtype)[None], half], 1)
                      for a, (i, n) in enumerate(zip(idx, sizes))]
            idx = [torch.arange(n_p, device=device)] * len(sizes)
            cls = [n_p] * len(sizes)
        elif random:
            (at, ar, ac), (st, sr, sc) = self.random_positions.draw_axes((t, h, w), random, device)
            values = [torch.cat([((a + 0.5) / span).to(cdtype), half], 1)
                      for a, span in [(ar, sr), (ac, sc), (at, st)][:len(sizes)]]
            cls = list(sizes)
        else:
            values = [torch.cat([_axis_coords(n, device, cdtype)[None], half], 1) for n in sizes]
            cls = list(sizes)
        return values, idx, cls

    #: LieRE: the per-token blocks of all layers are computed up front (and cached in eval) up to this many bytes;
    #: above it (video sizes: 231 MB for ViT-S at 16x224^2) each layer computes its blocks inside the attention,
    #: chunk by chunk, every forward (:class:`LieRotation`): memory of one chunk, time of the exponentials
    dense_cache_bytes = 64 << 20

    #: AP / LD: the basis path (:class:`BasisRotation`) up to this many rotated tokens. Its cos / sin tables grow with
    #: the tokens (29 MB over the layers of a video ViT-S at 16x224^2: twice the sin-cos model's peak memory, where
    #: the per-axis path stays at ~1.1-1.4x and is as fast, docs/benchmarks); above it, :class:`AxisRotation`
    basis_max_tokens = 1024

    def _build_terms(self, sizes: Tuple[int, ...], num_prefix: int, num_class: int, dtype: torch.dtype, device,
                     perturb: bool, random: int = 0) -> List[AttnTerm]:
        if num_class > num_prefix:
            raise ValueError(f'num_class_tokens {num_class} exceeds num_prefix_tokens {num_prefix}')
        device = torch.device(device)
        cdtype = torch.float64 if dtype == torch.float64 else torch.float32
        values, idx, cls = self._coords(sizes, perturb, device, cdtype, random)
        n_axes = len(sizes)
        grid = (sizes[2] if n_axes == 3 else 1, sizes[0], sizes[1])
        # token order of the rotated set: class tokens, then patches (registers are inserted as identity later)
        tok = [torch.cat([i.new_full((num_class,), c), i]) for i, c in zip(idx, cls)]
        n_reg = num_prefix - num_class
        b = self.block_size
        terms = []
        for layer in self.layers:
            a = layer.generators(cdtype).to(device)  # (H, N, m, b, b)
            if b == 2:
                # so(2) is commutative: every block is a plain rotation by angle sum_i x_i * A_i[j][0, 1]
                u = [v[:, ti] for v, ti in zip(values, tok)]  # (1 or B, Lr) per-token coordinate of each axis
                omega = a[..., 0, 1]  # (H, N, m)
                ang = u[0][:, None, :, None] * omega[None, :, None, 0]  # (1 or B, H, Lr, m)
                for ax in range(1, n_axes):
                    ang = ang + u[ax][:, None, :, None] * omega[None, :, None, ax]
                # exp(t [[0, s], [-s, 0]]) turns pair (x0, x1) to (c x0 + s x1, c x1 - s x0): RoPE at angle -t s
                if n_reg:
                    ang = torch.cat([ang[:, :, :num_class], ang.new_zeros(*ang.shape[:2], n_reg, ang.shape[3]),
                                     ang[:, :, num_class:]], 2)
                terms.append(RotaryTerm.from_angles(-ang))
                continue
            if self.variant == 'liere':
                coords = torch.stack([v[:, ti] for v, ti in zip(values, tok)], dim=-1)  # (1 or B, Lr, N)
                term = LieRotation(a, coords, num_class, num_prefix, dtype)
                if not _tracing() and self._dense_bytes(sizes, num_class, dtype) * max(random, 1) <= \
                        self.dense_cache_bytes:
                    term = term.dense()
                terms.append(term)
                continue
            # AP: block j turns with axis j mod N only; LD: exp(sum_i x_i A_i) = prod_i exp(x_i A_i) (one matrix).
            # Either way, one exponential per distinct coordinate of each axis.
            tables = [matrix_exp(values[ax][:, :, None, None, None, None]
                                 * (a[None, None, :, ax, ax::n_axes] if self.variant == 'ap' else a[None, None, :, ax]))
                      for ax in range(n_axes)]  # (1 or B, n_ax + 1, H, m_ax, b, b)
            if perturb:  # per-token coordinates: no grid structure, the dense blocks of each token
                terms.append(BlockRotation(_combine_axes([t[:, ti] for t, ti in zip(tables, tok)], self.variant,
                                                         num_class, n_reg).to(dtype)))
            else:
                tables = [t.to(dtype) for t in tables]
                basis = None
                if (not (random or _tracing() or torch.is_grad_enabled()) and dtype in (torch.float32, torch.float64)
                        and len(tok[0]) + n_reg <= self.basis_max_tokens):
                    basis = self._basis_tables(layer, [v[0, ti] for v, ti in zip(values, tok)], num_class, n_reg,
                                               dtype, device)
                terms.append(AxisRotation(tables, grid, num_class, num_prefix, self.variant) if basis is None else
                             BasisRotation(tables, grid, num_class, num_prefix, self.variant, *basis))
        if len(terms) == 1 and self.depth > 1:  # generators shared across layers (per_layer=False): one term for all
            terms = terms * self.depth
        return terms

    def _basis_tables(self, layer: _LayerGenerators, coords: Sequence[torch.Tensor], num_class: int, num_reg: int,
                      dtype: torch.dtype, device) -> Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """:class:`BasisRotation`'s ``(basis, cos, sin)`` of one AP / LD layer, or None when the layer's generators
        fail :func:`_skew_basis`'s check (the caller keeps :class:`AxisRotation`).

        Args:
            layer: the layer's generators.
            coords: per axis, the coordinate ``(L_rot,)`` of every rotated token (class tokens, then patches).
            num_class, num_reg: class tokens (first) and register tokens (angle 0, inserted after them).
            dtype, device: of q / k.
        """
        f = layer.freqs.detach().to(device=device, dtype=torch.float64)[:, 0]  # (H, m, b, b)
        found = _skew_basis(f - f.transpose(-1, -2))
        if found is None:
            return None
        u, w = found  # (H, m, b, b), (H, m, b / 2)
        heads, m, b = u.shape[0], u.shape[1], u.shape[-1]
        x = torch.stack([c.to(torch.float64) for c in coords])  # (N, L_rot)
        if self.variant == 'ap':  # block j turns with axis j mod N
            theta = x[torch.arange(m, device=x.device) % len(coords)]  # (m, L_rot)
        else:  # LD: sum_i multiplier[i, j] x_i
            theta = layer.multiplier.detach().to(device=device, dtype=torch.float64)[0, :, :, 0, 0].transpose(0, 1) @ x
        if num_reg:
            theta = torch.cat([theta[:, :num_class], theta.new_zeros(m, num_reg), theta[:, num_class:]], 1)
        ang = w[..., None] * theta[None, :, None, :]  # (H, m, b / 2, L)
        ang = ang.reshape(heads * m, b // 2, 1, -1)
        return (u.reshape(heads * m, b, b).to(dtype).contiguous(), torch.cos(ang).to(dtype),
                torch.sin(ang).to(dtype))

    def extra_repr(self) -> str:
        shared = ('' if self.per_layer and self.per_head
                  else f', per_layer={self.per_layer}, per_head={self.per_head}')
        return (f'variant={self.variant!r}, block_size={self.block_size}, heads={self.num_heads}, '
                f'head_dim={self.head_dim}, axes={self.num_axes}, perturb_intensity={self.perturb_intensity}{shared}')


@register_pos_encoding('liere')
class LieRE(ComRoPE):
    """LieRE: the non-commuting baseline, ``variant='liere'`` of :class:`ComRoPE` (same arguments).

    Raises:
        ValueError: any ``variant`` other than ``'liere'``, plus the checks of :class:`ComRoPE`.
    """
    family = 'LieRE (trainable non-commuting rotations)'
    default_variant = 'liere'

    def __init__(self, dim: int, num_heads: int, depth: int, grid_size: Tuple[int, int] = (14, 14),
                 num_prefix_tokens: int = 1, num_class_tokens: int = 1, variant: Optional[str] = None,
                 block_size: int = 8, init_std: float = 1.0, perturb_intensity: float = 0.0, scale_factor: float = 1.0,
                 ape: bool = False, random_positions: Any = None, per_layer: bool = True, per_head: bool = True):
        if variant not in (None, 'liere'):
            raise ValueError(f"the 'liere' encoding only has variant 'liere', got {variant!r}; "
                             f"use kind 'comrope' for 'ap' and 'ld'")
        super().__init__(dim, num_heads, depth, grid_size=grid_size, num_prefix_tokens=num_prefix_tokens,
                         num_class_tokens=num_class_tokens, variant='liere', block_size=block_size, init_std=init_std,
                         perturb_intensity=perturb_intensity, scale_factor=scale_factor, ape=ape,
                         random_positions=random_positions, per_layer=per_layer, per_head=per_head)


#: the live encodings the compiled-inference op below serves, by ``id`` (weak: a deleted model is not kept)
_LIVE: 'weakref.WeakValueDictionary[int, ComRoPE]' = weakref.WeakValueDictionary()


@torch.library.custom_op('zoo::comrope_cached_tables', mutates_args=())
def _comrope_cached_tables(params: List[torch.Tensor], key: int, h: int, w: int, t: int, num_prefix: int,
                           num_class: int, dtype: torch.dtype) -> List[torch.Tensor]:
    """The rotation tensors of every layer for a grid, from the encoding's eager cache (built on a miss; keyed on the
    parameters' versions, so never stale): LieRE's per-token blocks ``(1, H or 1, L, m, b, b)``, one per layer (one for
    all when ``per_layer=False``); AP / LD's
    per-axis tables ``(1, n_axis + 1, H, m_axis, b, b)``, axes (row, col[, t]) of layer 0, then layer 1, ...
    ``params`` are the layers' parameters the tensors depend on (so the graph orders them after any update)."""
    pe = _LIVE[key]
    sizes = (h, w) if pe.num_axes == 2 else (h, w, t)
    terms = pe._terms(Positions((t, h, w), num_prefix, num_class), sizes, False, 0, dtype, params[0].device)
    if pe.variant == 'liere':  # one tensor per generator set (a single one when shared across layers)
        return [term.blocks for term in terms[:len(pe.layers)]]
    return [table for term in terms for table in term.tables]


@_comrope_cached_tables.register_fake
def _(params, key, h, w, t, num_prefix, num_class, dtype):
    pe = _LIVE[key]
    m, b, n = pe.head_dim // pe.block_size, pe.block_size, pe.num_axes
    heads, new = pe.layers[0].freqs.shape[0], params[0].new_empty
    if pe.variant == 'liere':  # token-major storage, as LieRotation.dense builds it
        return [new((1, num_prefix + t * h * w, heads, m, b, b), dtype=dtype).transpose(1, 2)
                for _ in range(len(pe.layers))]
    sizes = (h, w, t)[:n]
    return [new((1, sizes[ax] + 1, heads, m if pe.variant == 'ld' else len(range(ax, m, n)), b, b), dtype=dtype)
            for _ in range(pe.depth) for ax in range(n)]
