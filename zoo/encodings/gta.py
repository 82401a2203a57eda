"""GTA: Geometric Transform Attention on 2D patch grids and 3D (t, row, col) video grids.

Paper: "GTA: A Geometry-Aware Attention Mechanism for Multi-View Transformers" (Miyato, Jaeger, Welling, Geiger,
ICLR 2024, arXiv:2310.10375), Sec. 3 (Eq. 4-6: ``O_i = rho_i^-1 sum_j softmax_j((rho_i^-1)^T ... )``, written as a
token-wise transform of Q, K and V before attention and of the output after it) and its SO(2) representation of 2D
image positions. Official code: github.com/autonomousvision/gta (branch DiT for image ViTs, main for the multi-view
models); ``../shared/golden/seeds/README.md`` describes it and ``gta.pt`` holds its numbers.

Every token ``n`` carries a group element ``g_n``: the translation by its position ``x_n`` (``(row, col)``; on a video
grid ``(row, col, t)``). Its representation ``rho(g_n)`` is block-diagonal with 2x2 rotations: pair ``p`` of a head
(channels ``2p, 2p+1``) uses frequency ``f = p // A`` and axis ``a = p % A`` (``A`` = 2 axes on images, 3 on videos),
so the axes interleave at each frequency (pair 0 = row x freq 0, pair 1 = col x freq 0, ...), and turns by
``x_n[a] * freq[f]`` with ``R = [[cos, -sin], [sin, cos]]`` acting on the column vector. Pairs beyond ``A * F``
(``F`` frequencies) are not rotated. Inside every attention layer (the same rotation in every layer and head; nothing
is learned):

    q_n, k_n, v_n -> R(x_n) q_n, R(x_n) k_n, R(x_n) v_n;   o_i = SDPA(q, k, v)_i;   o_i -> R(x_i)^T o_i

so the scores are ``q_i^T R(x_j - x_i) k_j`` (relative positions only) and every value reaches query ``i``
transformed by ``R(x_j - x_i)``: the relative transform acts on values too, which is what separates GTA from RoPE
(``v_transform=False`` is the official code's "rope" mode). Prefix tokens (class, registers) carry the identity.

Positions (``positions``), the one place the official code departs from itself:

* ``'normalized'`` (default; the multi-view code on the main branch, the setting the paper's experiments use):
  ``(row / H, col / W[, t / T])`` in ``[0, 1)`` and ``freq[f] = 2 pi 2^(f+1) / 2^F`` (``f = 0 .. F-1``, the highest
  one turn per image). A bigger grid interpolates within the same unit square.
* ``'integer'`` (the DiT / image code, what ``gta.pt``'s attention layer uses): integer ``(row, col[, t])`` and
  ``freq[f] = theta^(-f / F)`` with ``theta = 10000``. A bigger grid extrapolates to larger integers, as RoPE does.

The transforms go through the one rotation kernel, :class:`zoo.encodings.rotary.RotaryTerm`'s (interleaved pairs,
float32 angles; one complex multiply per tensor in eager CPU inference, :func:`zoo.encodings.rotation.apply_rope`
elsewhere; the inverse rotation is the same kernel with ``-sin``), so attention stays on
``F.scaled_dot_product_attention``. Tables are computed once per forward for every layer and cached per (grid, prefix
tokens, dtype, device) in eval; a randomized-positions draw (training only) is never cached.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple

import torch

from ._cache import TableCache
from ._grid import parse_grid_size
from .base import AttnTerm, Positions, PosEncoding
from .randomized import RandomPositions
from .registry import register_pos_encoding
from .rotary import RotaryTerm
from .rotation import check_p_rope, grid_coords, p_rope_mask, rope_frequencies, rope_sin_cos

__all__ = ['GTA', 'GroupTransformTerm', 'POSITION_MODES', 'gta_frequencies', 'gta_angles', 'so2_matrices']

POSITION_MODES = ('normalized', 'integer')


def gta_frequencies(num_freqs: int, positions: str = 'normalized', theta: float = 10000.0,
                    device: Optional[torch.device] = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """GTA's frequency ladder ``(num_freqs,)`` in radians per position unit, in pair order ``f = 0 .. F-1``.

    Args:
        num_freqs: ``F``.
        positions: ``'normalized'`` (``2 pi 2^(f+1) / 2^F``, rising; the multi-view code's ``make_SO2mats``) or
            ``'integer'`` (``theta^(-f / F)``, falling; the DiT code).
        theta: base of the ``'integer'`` ladder.

    Raises:
        ValueError: ``num_freqs < 1`` or an unknown ``positions``.
    """
    if positions not in POSITION_MODES:
        raise ValueError(f'gta: positions must be one of {POSITION_MODES}, got {positions!r}')
    if num_freqs < 1:
        raise ValueError(f'gta: need at least one frequency, got num_freqs={num_freqs}')
    if positions == 'integer':
        return rope_frequencies(num_freqs, theta, device=device, dtype=dtype)
    f = torch.arange(1, num_freqs + 1, device=device, dtype=dtype)
    return 2 * math.pi * torch.pow(2.0, f - num_freqs)


def gta_angles(coords: torch.Tensor, freqs: torch.Tensor, num_pairs: int) -> torch.Tensor:
    """Per-pair angles of tokens at ``coords``.

    Args:
        coords: ``(..., N, A)`` positions (axes in pair order: row, col[, t]).
        freqs: ``(F,)`` ladder (:func:`gta_frequencies`, zeros where p-RoPE drops a frequency).
        num_pairs: channel pairs of a head (``head_dim / 2``); pairs beyond ``A * F`` get angle 0.

    Returns:
        ``(..., N, num_pairs)``: pair ``p < A F`` turns by ``coords[..., p % A] * freqs[p // A]``.
    """
    ang = (coords[..., None, :] * freqs[:, None]).flatten(-2)  # (..., N, F * A): pair 2f + a (A = 2)
    rest = num_pairs - ang.shape[-1]
    if rest:
        ang = torch.cat([ang, ang.new_zeros(*ang.shape[:-1], rest)], dim=-1)
    return ang


def so2_matrices(angles: torch.Tensor) -> torch.Tensor:
    """The 2x2 rotations ``[[cos, -sin], [sin, cos]]`` of ``angles`` ``(...)``, as ``(..., 2, 2)`` [row, col]
    (the layout of the official ``so2rep``)."""
    c, s = angles.cos(), angles.sin()
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


class GroupTransformTerm(AttnTerm):
    """Transforms q, k, v by each token's block rotation ``R(x_n)`` and the per-head output by ``R(x_i)^T``.

    Args:
        sin, cos: ``(B or 1, 1, L, head_dim)`` interleaved tables (:func:`zoo.encodings.rotation.rope_sin_cos`) of
            every token, prefix tokens included (angle 0).
        v_transform: also transform values and outputs (GTA); False rotates q and k only (the official "rope" mode).
    """
    tensor_fields = ('sin', 'cos')
    _kernels = None  # (sin, cos, RotaryTerm of R, RotaryTerm of R^T): of exactly these sin and cos tensors

    def __init__(self, sin: torch.Tensor, cos: torch.Tensor, v_transform: bool = True):
        self.sin, self.cos, self.v_transform = sin, cos, v_transform

    def _rotary(self, inverse: bool = False) -> RotaryTerm:
        """The rotary kernel (:class:`zoo.encodings.rotary.RotaryTerm`, complex multiply in eager CPU inference) of
        ``R`` or of ``R^T`` (``-sin``), built once per (sin, cos) pair of tensors: a copy made by ``with_tensors``
        (gradient checkpointing) builds its own, so gradients reach the tensors it was given."""
        k = self._kernels
        if k is None or k[0] is not self.sin or k[1] is not self.cos:
            k = self._kernels = (self.sin, self.cos, RotaryTerm(self.sin, self.cos, pairs_equal=True),
                                 RotaryTerm(-self.sin, self.cos, pairs_equal=True))
        return k[3] if inverse else k[2]

    def select(self, pos: Positions) -> 'GroupTransformTerm':
        """The rows of the tokens present in ``pos`` (this term itself for the full grid)."""
        if not pos.is_subset:
            return self
        return GroupTransformTerm(pos.select(self.sin, -2), pos.select(self.cos, -2), self.v_transform)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self._rotary().rotate(q, k)

    def transform_values(self, v: torch.Tensor) -> torch.Tensor:
        return self._rotary()._rot(v) if self.v_transform else v

    def transform_output(self, o: torch.Tensor) -> torch.Tensor:
        if not self.v_transform:
            return o
        n = o.shape[-2]  # the queries are the last tokens (a KV cache puts them there)
        if n == self.sin.shape[-2]:
            return self._rotary(inverse=True)._rot(o)  # R^T: the same rotation by the opposite angle
        sin, cos = self.sin[..., self.sin.shape[-2] - n:, :], self.cos[..., self.cos.shape[-2] - n:, :]
        return RotaryTerm(-sin, cos, pairs_equal=True)._rot(o)


@register_pos_encoding('gta')
class GTA(PosEncoding):
    """GTA (Miyato et al., ICLR 2024): q, k, v rotated by each token's SO(2)^n group element, the output rotated back
    (module docstring). No parameters.

    Args:
        dim: embedding width; ``head_dim = dim / num_heads`` must be even.
        num_heads: attention heads.
        depth: blocks (every block uses the same transform).
        grid_size: ``(H, W)`` (images: axes row, col) or ``(T', H', W')`` (videos: axes row, col, t); its length
            picks 2 or 3 axes. Default: an image.
        positions: ``'normalized'`` (default, the paper's multi-view setting) or ``'integer'`` (the official image /
            DiT code; ``gta.pt``).
        num_freqs: frequencies per axis ``F``; default ``(head_dim / 2) // A``, every pair used (the DiT code's
            ``head_dim / 4`` on images). Fewer leave the last pairs unrotated.
        theta: base of the ``'integer'`` ladder (10000 in the DiT code).
        v_transform: transform values and outputs (GTA); ``False`` is the official "rope" mode (q and k only).
        p_rope: p-RoPE's fraction of each axis's frequencies that rotate, the highest ones (Barbero et al.,
            arXiv:2410.06205); the others are zero frequency (identity). 1 = plain GTA.
        random_positions: ``None``, ``'subset'``, ``'cape'`` or a dict (:mod:`zoo.encodings.randomized`): per-sample
            random coordinates in training, the grid in eval. With ``'normalized'`` positions a subset of an axis of
            ``n`` cells is drawn from the ``R = ceil(range_factor n)`` positions of a finer grid and divided by ``R``
            (a larger image is a finer grid in normalised units).

    Raises:
        ValueError: an odd head dim, ``dim`` not divisible by ``num_heads``, too many frequencies for the head, a bad
            ``positions``, ``theta``, ``p_rope`` or ``random_positions``; at forward explicit ids, or a video grid
            (``T > 1``) given to an image model.
    """
    family = 'GTA (geometric transform attention: q, k, v and output transformed)'
    adaptation = 'none needed: positions are normalised to [0, 1), so a new grid interpolates'

    def __init__(self, dim: int, num_heads: int, depth: int, grid_size: Optional[Tuple[int, ...]] = None,
                 positions: str = 'normalized', num_freqs: Optional[int] = None, theta: float = 10000.0,
                 v_transform: bool = True, p_rope: float = 1.0, random_positions: Any = None):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'gta: dim {dim} is not divisible by num_heads {num_heads}')
        head_dim = dim // num_heads
        if head_dim % 2:
            raise ValueError(f'gta needs an even head_dim (2x2 rotation pairs), got {head_dim}; change '
                             f'embed_dim/num_heads')
        if positions not in POSITION_MODES:
            raise ValueError(f"gta: positions must be one of {POSITION_MODES} ('integer' = the official image code), "
                             f'got {positions!r}')
        if not theta > 0:
            raise ValueError(f'gta: theta must be > 0, got {theta}')
        grid = (224 // 16, 224 // 16) if grid_size is None else parse_grid_size('gta', grid_size)
        self.video = len(grid) == 3
        self.num_axes = 3 if self.video else 2
        self.num_pairs = head_dim // 2
        most = self.num_pairs // self.num_axes
        num_freqs = most if num_freqs is None else int(num_freqs)
        if not 1 <= num_freqs <= most:
            raise ValueError(f'gta: num_freqs must be in [1, {most}] ({self.num_pairs} pairs over {self.num_axes} '
                             f'axes), got {num_freqs}')
        self.depth, self.head_dim, self.num_freqs = depth, head_dim, num_freqs
        self.positions, self.theta, self.v_transform = positions, float(theta), bool(v_transform)
        self.p_rope = check_p_rope(p_rope, 'gta')
        self.random_positions = RandomPositions.parse(random_positions, 'gta')
        if positions == 'integer':
            self.adaptation = 'transforms extrapolated on integer patch positions (as RoPE)'
        self._cache = TableCache()

    def extra_repr(self) -> str:
        return (f'axes={self.num_axes}, positions={self.positions!r}, num_freqs={self.num_freqs}, '
                f'v_transform={self.v_transform}, p_rope={self.p_rope}, '
                f'random_positions={self.random_positions.mode!r}')

    # ------------------------------------------------------------------------------------------------ numbers
    def frequencies(self, device: Optional[torch.device] = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The ladder ``(F,)`` in pair order, p-RoPE's dropped (lowest) frequencies set to 0."""
        freqs = gta_frequencies(self.num_freqs, self.positions, self.theta, device, dtype)
        if self.p_rope < 1.0:
            f = torch.arange(self.num_freqs, device=device)
            band = f if self.positions == 'integer' else self.num_freqs - 1 - f  # 0 = the highest frequency
            freqs = freqs * p_rope_mask(band, self.num_freqs, self.p_rope).to(dtype)
        return freqs

    def grid_positions(self, grid: Sequence[int], device: Optional[torch.device] = None) -> torch.Tensor:
        """Positions ``(T*H*W, A)`` of a ``(T, H, W)`` grid in token order (t-major, row-major), axes (row, col[, t])
        in this encoding's units (``'normalized'``: ``(row / H, col / W[, t / T])``; ``'integer'``: indices)."""
        return self._units(grid_coords(grid, device), grid)

    def _units(self, coords: torch.Tensor, grid: Sequence[int], span: Optional[Sequence[float]] = None) -> torch.Tensor:
        """``(..., N, 3)`` (t, row, col) grid coordinates -> ``(..., N, A)`` (row, col[, t]) in this encoding's units;
        ``span``: the per-axis (t, row, col) length the normalised units divide by (default the grid)."""
        order = [1, 2, 0] if self.video else [1, 2]
        if self.positions != 'normalized':
            return coords[..., order]
        sizes = span if span is not None else grid  # no float() / tensor of sizes: symbolic under torch.export
        return torch.stack([coords[..., i] / sizes[i] for i in order], dim=-1)

    def rotation_matrices(self, positions: torch.Tensor) -> torch.Tensor:
        """The group element of tokens at ``positions`` ``(..., N, A)`` (this encoding's units, axes row, col[, t]):
        ``(..., N, head_dim / 2, 2, 2)`` 2x2 blocks [pair, row, col] (the official ``so2rep`` layout), float32
        (float64 for float64 positions)."""
        freqs = self.frequencies(positions.device, torch.float64 if positions.dtype == torch.float64 else
                                 torch.float32)
        return so2_matrices(gta_angles(positions.to(freqs.dtype), freqs, self.num_pairs))

    def _term(self, positions: torch.Tensor, num_prefix_tokens: int, dtype: torch.dtype) -> GroupTransformTerm:
        """Term for ``(B or 1, N, A)`` patch positions; the prefix tokens lead at angle 0."""
        cdtype = torch.float64 if dtype == torch.float64 else torch.float32
        ang = gta_angles(positions.to(cdtype), self.frequencies(positions.device, cdtype), self.num_pairs)
        if num_prefix_tokens:
            ang = torch.cat([ang.new_zeros(ang.shape[0], num_prefix_tokens, ang.shape[-1]), ang], dim=1)
        sin, cos = rope_sin_cos(ang, 'interleaved')
        return GroupTransformTerm(sin[:, None], cos[:, None], self.v_transform)

    # ------------------------------------------------------------------------------------------------- hooks
    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        """The same :class:`GroupTransformTerm` for every layer.

        Raises:
            ValueError: explicit ids instead of a grid, or a grid with ``T > 1`` for an image model.
        """
        grid = pos.grid_of('gta', self.video)
        g3 = grid if self.video else (1, *grid)
        npt = pos.num_prefix_tokens
        if self.training and self.random_positions.active:  # per-sample random coordinates: never cached
            coords, span = self.random_positions.draw_with_span(g3, pos.draw_batch, device)
            term = self._term(self._units(coords, g3, span), npt, dtype)
        else:
            term = self._cache.get((tuple(g3), npt, dtype, str(device)),
                                   lambda: self._term(self.grid_positions(g3, device)[None], npt, dtype))
        return [term.select(pos)] * self.depth
