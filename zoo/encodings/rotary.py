"""Rotary position embeddings: RoPE-Axial and RoPE-Mixed (images and videos), and V-JEPA 2's 3D RoPE.

* "Rotary Position Embedding for Vision Transformer" (Heo et al., ECCV 2024, arXiv:2403.13298), Sec. 3.
  Layout and numerics follow timm's ``RotaryEmbeddingCat`` / ``RotaryEmbeddingMixed`` so that timm's
  ``vit_*_patch16_rope*_224`` weights give the same logits: interleaved channel pairs, integer patch coordinates
  (x = column, y = row), angles and sin/cos in float32. RoPE-Mixed also runs over (x, y, t) for videos.
* 3D RoPE of V-JEPA 2 ("V-JEPA 2: Self-Supervised Video Models Enable Understanding, Prediction and Planning",
  Assran et al., arXiv:2506.09985): each head split into contiguous t | h | w chunks.

Every rotation goes through the one kernel (``zoo.encodings.rotation.apply_rope``). Two options shared by the three
encodings: ``p_rope`` (p-RoPE, Barbero et al., arXiv:2410.06205: only the highest-frequency fraction ``p`` of each
frequency ladder rotates, :func:`zoo.encodings.rotation.p_rope_mask`) and ``random_positions`` (per-sample random
coordinates in training, :mod:`zoo.encodings.randomized`; the ordinary grid in eval).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn
from timm.layers.pos_embed_sincos import init_random_2d_freqs

from ._cache import TableCache, caching_allowed, param_key
from ._grid import as_thw, parse_grid_size, refuse_video_grid
from .absolute import LearnedAPE
from .base import AttnTerm, Positions, PosEncoding
from .extrapolation import ROTARY_STRATEGIES, Extrapolation, ntk_exponents
from .mspoe_axes import attn_terms as mspoe_attn_terms
from .randomized import RandomPositions
from .registry import register_pos_encoding
from .rotation import apply_rope, check_p_rope, grid_coords, p_rope_mask, rope_frequencies, rope_sin_cos

__all__ = ['RotaryTerm', 'RoPEAxial', 'RoPEMixed', 'RoPEMixedAPE', 'RoPE3D', 'patch_coords', 'init_random_3d_freqs',
           'PAIRINGS']


class RotaryTerm(AttnTerm):
    """Rotate q and k by per-token angles through the one kernel :func:`zoo.encodings.rotation.apply_rope`.

    Args:
        sin, cos: ``(B or 1, heads or 1, L, head_dim)`` float32 tables from :func:`rope_sin_cos`, for every token,
            prefix tokens included (angle 0 = identity, so class/register tokens need no special case). With
            grouped-query attention the tables may have the key-head count; queries then use their group's table.
        layout: ``'interleaved'`` (timm / RoPE-ViT) or ``'half'`` (Hugging Face Qwen).
        pairs_equal: the tables give both channels of each pair the same angle (true rotations: tables from
            :func:`rope_sin_cos`; :meth:`from_angles` sets it). Only then may eager CPU inference take the
            complex-multiply kernel (:meth:`rotate`); the default False always takes :func:`apply_rope`.

    Speed (eager, CPU): with ``pairs_equal`` and the interleaved layout, q and k of float32/float64 are rotated as
    complex numbers, one multiply by the cached table ``cos + i sin`` per tensor, read straight from the strided
    views of the fused ``qkv`` projection. That is one pass instead of timm's six (copy, slice, neg, stack, two
    multiplies and an add) and gives the same bits on CPU (``a cos - b sin``, ``b cos + a sin``, each product rounded
    once, no fused multiply-add: ``tests/test_rotary_speed.py`` checks ``torch.equal`` against timm's
    ``apply_rot_embed``). Under ``torch.compile``, ``torch.export``, tracing and on other devices or dtypes (bf16)
    the real kernel runs: inductor and ONNX have no complex multiply, and the equality is only checked on CPU.
    ``docs/benchmarks/rope_overhead.md`` has the profile that motivated it.
    """
    tensor_fields = ('sin', 'cos')
    pairs_equal = False
    _complex = None  # (sin, cos, table): the complex table of exactly these sin and cos tensors

    def __init__(self, sin: torch.Tensor, cos: torch.Tensor, layout: str = 'interleaved', pairs_equal: bool = False):
        self.sin, self.cos, self.layout = sin, cos, layout
        self.pairs_equal = pairs_equal

    @classmethod
    def from_angles(cls, angles: torch.Tensor, num_prefix_tokens: int = 0, layout: str = 'interleaved',
                    scale: float = 1.0) -> 'RotaryTerm':
        """Build from angles ``(B or 1, heads or 1, N, head_dim // 2)`` (radians) of the non-prefix tokens; the
        ``num_prefix_tokens`` leading tokens get angle 0. ``scale`` multiplies sin and cos (YaRN's attention
        temperature, ``zoo.encodings.extrapolation``: q and k each scaled by it, every logit by its square)."""
        if num_prefix_tokens:
            pad = angles.new_zeros(angles.shape[:-2] + (num_prefix_tokens, angles.shape[-1]))
            angles = torch.cat([pad, angles], dim=-2)
        sin, cos = rope_sin_cos(angles, layout)
        if scale != 1.0:
            sin, cos = sin * scale, cos * scale
        return cls(sin, cos, layout=layout, pairs_equal=True)

    def select(self, pos: Positions) -> 'RotaryTerm':
        """The rows of the tokens present in ``pos`` (this term itself for the full grid)."""
        if not pos.is_subset:
            return self
        return RotaryTerm(pos.select(self.sin, -2), pos.select(self.cos, -2), self.layout, self.pairs_equal)

    def _complex_table(self, x: torch.Tensor) -> Optional[torch.Tensor]:
        """``cos + i sin`` per channel pair ``(B or 1, heads or 1, L, head_dim // 2)`` when the complex kernel may
        rotate ``x`` (see the class docstring), else None. Built once per (sin, cos) pair of tensors: a copy made by
        ``with_tensors`` (gradient checkpointing) builds its own, so gradients reach the tensors it was given."""
        if not (self._complex_kernel_fits(x) and caching_allowed()):
            return None
        cached = self._complex
        if cached is not None and cached[0] is self.sin and cached[1] is self.cos:
            return cached[2]
        table = torch.complex(self.cos[..., ::2], self.sin[..., ::2])
        self._complex = (self.sin, self.cos, table)
        return table

    def _complex_kernel_fits(self, x: torch.Tensor) -> bool:
        """True rotations of interleaved pairs, CPU, float32/float64 tables of ``x``'s dtype: the complex kernel
        gives the real kernel's bits."""
        return (self.pairs_equal and self.layout == 'interleaved' and x.device.type == 'cpu'
                and x.dtype in (torch.float32, torch.float64) and self.sin.dtype == x.dtype
                and self.cos.dtype == x.dtype)

    def _rot(self, x: torch.Tensor) -> torch.Tensor:
        heads = x.shape[1]
        if (self._complex_kernel_fits(x) and torch.compiler.is_compiling() and not torch.compiler.is_exporting()
                and not torch.is_grad_enabled()):
            # compiled inference on CPU: the complex multiply as one opaque op (inductor has no complex numbers; its
            # fused real kernel was 2-4 % slower than eager's complex one in the compiled ViT)
            return torch.ops.zoo.rotary_complex(x, _for_heads(self.sin, heads), _for_heads(self.cos, heads))
        table = self._complex_table(x)
        if table is not None:
            return torch.view_as_real(_complex_pairs(x) * _for_heads(table, heads)).flatten(-2)
        return apply_rope(x, _for_heads(self.sin, heads), _for_heads(self.cos, heads), self.layout)

    def rotate(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self._rot(q), self._rot(k)


def _for_heads(table: torch.Tensor, heads: int) -> torch.Tensor:
    """A table ``(B or 1, heads or 1 or key heads, ...)`` for ``heads`` query heads (GQA: key-head tables, queries
    follow their group)."""
    if table.shape[1] in (1, heads):
        return table
    return table.repeat_interleave(heads // table.shape[1], dim=1)


def _complex_pairs(x: torch.Tensor) -> torch.Tensor:
    """``x`` ``(..., D)`` as ``D / 2`` complex numbers (adjacent pairs), copied first where ``view_as_complex`` needs
    it (pairs at even offsets)."""
    if x.stride(-1) != 1 or x.storage_offset() % 2 or any(s % 2 for s in x.stride()[:-1]):
        x = x.contiguous()
    return torch.view_as_complex(x.unflatten(-1, (-1, 2)))


@torch.library.custom_op('zoo::rotary_complex', mutates_args=())
def _rotary_complex(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    """``x`` ``(..., D)`` rotated by interleaved tables ``sin``, ``cos`` (both channels of a pair equal) as one complex
    multiply per pair: the bits of :func:`zoo.encodings.rotation.apply_rope` on CPU. A new contiguous tensor."""
    out = x.new_empty(torch.broadcast_shapes(x.shape, sin.shape))  # contiguous, as the fake kernel says
    torch.mul(_complex_pairs(x), torch.complex(cos[..., ::2], sin[..., ::2]), out=_complex_pairs(out))
    return out


@_rotary_complex.register_fake
def _(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    return x.new_empty(torch.broadcast_shapes(x.shape, sin.shape))


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
        grid_size: the training grid ``(H, W)`` (extrapolation factors); a video geometry ``(T, H, W)`` is refused
            (use ``rope3d``).
        extrapolation: ``'none'`` (integer positions extrapolate), ``'pi'``, ``'ntk'``, ``'yarn'``, or a dict with
            ``strategy``, ``train_grid``, ``alpha``, ``beta`` (:mod:`zoo.encodings.extrapolation`); per axis, the
            bands of the column (row) pairs scale with the column (row) factor.
        p_rope: p-RoPE's fraction of each axis's bands that rotate (the highest frequencies); 1 = plain RoPE.
        random_positions: randomized (row, col) coordinates in training (:mod:`zoo.encodings.randomized`: ``None``,
            ``'subset'``, ``'cape'`` or a dict); the integer grid in eval.
    """
    family = 'RoPE-Axial'
    adaptation = 'RoPE extrapolated on integer patch positions'
    supports_video = False
    extrapolation_strategies = ROTARY_STRATEGIES  # + longrope, mspoe (zoo.encodings.longrope, .mspoe_axes)

    def __init__(self, dim: int, num_heads: int, depth: int, theta: float = 100.0,
                 grid_size: Optional[Tuple[int, ...]] = None, extrapolation: Any = 'none', p_rope: float = 1.0,
                 random_positions: Any = None):
        super().__init__()
        refuse_video_grid('rope_axial', grid_size, "'rope3d' (axial t | h | w, V-JEPA 2) or 'rope_mixed'")
        head_dim = _check_rope_geometry('rope_axial', dim, num_heads, theta)
        self.depth = depth
        self.theta = float(theta)
        self.num_bands = head_dim // 4
        self.p_rope = check_p_rope(p_rope, 'rope_axial')
        self.random_positions = RandomPositions.parse(random_positions, 'rope_axial')
        self._extrapolation = Extrapolation.parse(extrapolation, grid_size, self.extrapolation_strategies, 'rope_axial')
        self._cache = TableCache()

    @property
    def bands(self) -> torch.Tensor:
        """Frequencies ``theta^(-i / (head_dim / 4))`` ``(head_dim // 4,)``, always float32 (never a buffer, so a
        ``model.to(torch.bfloat16)`` cannot round them); p-RoPE's zeroed bands are 0."""
        return self._bands(None)

    def _bands(self, device: Optional[torch.device]) -> torch.Tensor:
        bands = rope_frequencies(self.num_bands, self.theta, device=device)
        if self.p_rope < 1.0:
            bands = bands * p_rope_mask(torch.arange(self.num_bands, device=device), self.num_bands, self.p_rope)
        return bands

    def angles(self, x: torch.Tensor, y: torch.Tensor, factors: Tuple[float, float] = (1.0, 1.0)) -> torch.Tensor:
        """Rotation angles float32 (radians) for coordinates ``x``, ``y`` in patches: ``(1, N, head_dim // 2)`` for
        ``(N,)`` coordinates, ``(B, N, head_dim // 2)`` for per-sample ``(B, N)`` ones; ``factors`` = extrapolation
        factors ``(s_rows, s_cols)`` of the grid."""
        bands = self._bands(x.device)
        bx, by = bands, bands
        if self.extrapolation.active:
            e, (lh, lw) = ntk_exponents(self.num_bands, x.device), self.extrapolation.train_grid
            bx, by = self.extrapolation.frequencies(bands, factors[1], lw, e), \
                self.extrapolation.frequencies(bands, factors[0], lh, e)
        ext, n = self.extrapolation, self.num_bands  # LongRoPE rescales positions per band (Extrapolation.positions)
        out = torch.cat([ext.positions(x.float(), 1, factors[1], n) * bx,
                         ext.positions(y.float(), 0, factors[0], n) * by], dim=-1)
        return out.unsqueeze(0) if x.dim() == 1 else out

    def term(self, hw: Tuple[int, int], num_prefix_tokens: int, device: torch.device) -> RotaryTerm:
        """The (cached) full-grid rotation for grid ``hw``; identical for every block."""
        factors = self.extrapolation.factors(hw, 'rope_axial')
        return self._cache.get((tuple(hw), num_prefix_tokens, device, self.extrapolation.key()),
                               lambda: RotaryTerm.from_angles(
                                   self.angles(*patch_coords(hw, device), factors).unsqueeze(0), num_prefix_tokens,
                                   scale=self.extrapolation.grid_attention_scale(factors)))

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        if self.extrapolation.strategy == 'mspoe':  # per head and axis: zoo.encodings.mspoe_axes
            return mspoe_attn_terms(self, pos, dtype, device, RotaryTerm, patch_coords)
        hw = pos.hw_2d('rope_axial')
        if self.training and self.random_positions.active:  # per-sample random coordinates: never cached
            coords = self.random_positions.draw((1, *hw), pos.draw_batch, device)
            factors = self.extrapolation.factors(hw, 'rope_axial')
            term = RotaryTerm.from_angles(self.angles(coords[..., 2], coords[..., 1], factors).unsqueeze(1),
                                          pos.num_prefix_tokens,
                                          scale=self.extrapolation.grid_attention_scale(factors))
            return [term.select(pos)] * self.depth
        return [self.term(hw, pos.num_prefix_tokens, device).select(pos)] * self.depth


def init_random_3d_freqs(head_dim: int, depth: int, num_heads: int, theta: float = 10.0) -> torch.Tensor:
    """RoPE-Mixed frequencies for (x, y, t): the 3D analogue of timm's ``init_random_2d_freqs``.

    The ``head_dim / 2`` pairs form three contiguous groups of ``m = ceil(head_dim / 6)`` (the last may be
    shorter); pair ``j`` of group ``g`` gets magnitude ``theta^(-j / m)`` along direction ``g`` of a random
    orthonormal frame drawn per block and head (the 2D rule: two groups of ``head_dim / 4``, two orthogonal
    directions at a random angle).

    Returns:
        ``(3, depth, num_heads, head_dim // 2)`` float32, components (x, y, t).
    """
    n = head_dim // 2
    m = -(-n // 3)
    i = torch.arange(n)
    group, j = i // m, (i % m).float()
    mag = 1.0 / theta ** (j / m)                                             # (n,)
    q, r = torch.linalg.qr(torch.randn(depth, num_heads, 3, 3))
    frame = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)  # columns: random orthonormal dirs
    dirs = frame[..., group]                                                 # (depth, heads, 3, n)
    return (dirs * mag).permute(2, 0, 1, 3).contiguous()


@register_pos_encoding('rope_mixed')
class RoPEMixed(PosEncoding):
    """RoPE-Mixed (Heo et al. 2024, Eq. 11-12): learnable frequencies per block and head; pair i of head h in
    block d turns by ``x * f_x[d, h, i] + y * f_y[d, h, i]`` (images) or ``... + t * f_t[d, h, i]`` (videos).

    Videos (``grid_size=(T', H', W')``): a third, learned temporal frequency per pair, on the integer tubelet index t
    (x = column, y = row as for images), initialised by :func:`init_random_3d_freqs`. More frames or a bigger frame
    extrapolate to larger integer positions; nothing is resampled. A 2D model is the ``f_t = 0`` case, so a 2D
    checkpoint inflates by appending a zero ``f_t`` (each frame then gets the image rotation).

    Args:
        dim: embedding width; ``head_dim`` must be divisible by 4.
        num_heads: attention heads.
        depth: number of blocks.
        theta: base of the initial frequency magnitudes (10 in RoPE-ViT); each head starts at a random direction.
        grid_size: ``(H, W)`` (images, the default) or ``(T', H', W')`` (videos): the training grid (extrapolation
            factors); its length picks 2D or 3D frequencies.
        extrapolation: ``'none'``, ``'pi'``, ``'ntk'``, ``'yarn'`` or a dict (:mod:`zoo.encodings.extrapolation`);
            each frequency component (x, y, t) scales with its axis's factor; NTK exponents are the band index of
            each pair in its initialisation ladder.
        p_rope: p-RoPE's fraction of pairs that rotate: pairs whose band index in the initialisation ladder is among
            the highest-frequency ``round(p * ladder)`` keep their learned frequencies, the others are fixed at zero
            frequency (their parameters get zero gradient). 1 = plain RoPE-Mixed.
        random_positions: ``None``, ``'subset'``, ``'cape'`` or a dict (:mod:`zoo.encodings.randomized`): per-sample
            random coordinates in training; the integer grid in eval.

    Parameters: ``freqs`` ``(2, depth, num_heads, head_dim // 2)`` (x then y), ``(3, ...)`` (x, y, t) for videos; no
    weight decay. Derived angles are recomputed every training forward and cached per (grid, device, parameter
    version) in eval.
    """
    family = 'RoPE-Mixed'
    adaptation = 'RoPE extrapolated on integer patch positions (learned frequencies)'
    extrapolation_strategies = ROTARY_STRATEGIES  # + longrope, mspoe (zoo.encodings.longrope, .mspoe_axes)

    def __init__(self, dim: int, num_heads: int, depth: int, theta: float = 10.0,
                 grid_size: Optional[Tuple[int, ...]] = None, extrapolation: Any = 'none', p_rope: float = 1.0,
                 random_positions: Any = None):
        super().__init__()
        head_dim = _check_rope_geometry('rope_mixed', dim, num_heads, theta)
        self.theta = float(theta)
        self.p_rope = check_p_rope(p_rope, 'rope_mixed')
        self.random_positions = RandomPositions.parse(random_positions, 'rope_mixed')
        self.video = grid_size is not None and len(parse_grid_size('rope_mixed', grid_size)) == 3
        self._extrapolation = Extrapolation.parse(extrapolation, grid_size, self.extrapolation_strategies, 'rope_mixed')
        if self.video:
            self.adaptation = ('RoPE extrapolated on integer tubelet / patch positions (learned x, y, t '
                               'frequencies)')
            self.freqs = nn.Parameter(init_random_3d_freqs(head_dim, depth, num_heads, theta=theta))
        else:
            self.freqs = nn.Parameter(init_random_2d_freqs(head_dim, depth, num_heads, temperature=theta))
        self._cache = TableCache()

    def _ladder(self) -> int:
        """Length of the initialisation ladders (pair ``i`` has band ``i % ladder``)."""
        n = self.freqs.shape[-1]
        return -(-n // 3) if self.video else n // 2

    def masked_freqs(self) -> torch.Tensor:
        """``freqs`` in float32 with p-RoPE's zeroed pairs (all of them when ``p_rope = 1``)."""
        freqs = self.freqs.float()
        if self.p_rope < 1.0:
            n, ladder = freqs.shape[-1], self._ladder()
            band = torch.arange(n, device=freqs.device) % ladder
            freqs = freqs * p_rope_mask(band, ladder, self.p_rope)
        return freqs

    def scaled_freqs(self, factors: Sequence[float]) -> torch.Tensor:
        """``freqs`` (float32, p-RoPE applied) after the extrapolation strategy for grid factors ``(s_rows, s_cols)``
        or ``(s_t, s_rows, s_cols)``; component x follows the columns, y the rows, t the tubelets."""
        freqs = self.masked_freqs()
        if not self.extrapolation.active or all(f == 1.0 for f in factors):
            return freqs
        n = freqs.shape[-1]
        e = ntk_exponents(n, freqs.device, period=self._ladder())
        train = self.extrapolation.train_grid
        axis = [len(factors) - 1, len(factors) - 2] + ([0] if self.video else [])  # grid axis of x, y, t
        return torch.stack([self.extrapolation.frequencies(freqs[c], factors[a], train[a], e)
                            for c, a in enumerate(axis)])

    def angles(self, x: torch.Tensor, y: torch.Tensor, t: Optional[torch.Tensor] = None,
               factors: Optional[Sequence[float]] = None) -> torch.Tensor:
        """Angles float32 (radians) for coordinates ``x``, ``y`` (and ``t`` for video frequencies) in patches /
        tubelets: ``(depth, num_heads, N, head_dim // 2)`` for ``(N,)`` coordinates, ``(B, depth, num_heads, N,
        head_dim // 2)`` for per-sample ``(B, N)`` ones; ``factors``: the grid's extrapolation factors."""
        freqs = self.scaled_freqs(factors) if factors is not None else self.masked_freqs()
        coords = [x, y, t] if self.video else [x, y]
        axes = [len(coords) - 1, len(coords) - 2, 0]  # grid axis of x, y, t (LongRoPE: per axis and band)
        ext, n, ladder = self.extrapolation, freqs.shape[-1], self._ladder()
        fs = factors if factors is not None else (1.0,) * len(coords)
        pos = [ext.positions(c.float(), a, fs[a], n, ladder) for c, a in zip(coords, axes)]
        # (..., N, 1 or n) positions against (depth, heads, n) frequencies: (..., depth, heads, N, n)
        return sum(p[..., None, None, :, :] * f.unsqueeze(-2) for p, f in zip(pos, freqs))

    def _terms(self, grid: Tuple[int, ...], num_prefix_tokens: int, device: torch.device,
               coords: Optional[torch.Tensor] = None) -> List[RotaryTerm]:
        """One term per block for the grid ``grid`` (``(H, W)`` or ``(T, H, W)``), at its integer coordinates or at
        per-sample ``coords`` ``(B, N, 3)`` (t, row, col)."""
        factors = self.extrapolation.factors(grid, 'rope_mixed')
        if coords is None:
            coords = grid_coords(grid if self.video else (1, *grid), device)  # (N, 3): t, row, col
        angles = self.angles(coords[..., 2], coords[..., 1], coords[..., 0] if self.video else None, factors=factors)
        if coords.dim() == 2:
            angles = angles.unsqueeze(0)                                   # (1 or B, depth, heads, N, head_dim // 2)
        scale = self.extrapolation.grid_attention_scale(factors)
        return [RotaryTerm.from_angles(a, num_prefix_tokens, scale=scale) for a in angles.unbind(1)]

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        if self.extrapolation.strategy == 'mspoe':  # per head and axis: zoo.encodings.mspoe_axes
            return mspoe_attn_terms(self, pos, dtype, device, RotaryTerm, patch_coords)
        grid = pos.grid_of('rope_mixed', self.video)
        npt = pos.num_prefix_tokens
        if self.training and self.random_positions.active:  # per-sample random coordinates
            coords = self.random_positions.draw(grid if self.video else (1, *grid), pos.draw_batch, device)
            terms = self._terms(grid, npt, device, coords)
        elif self.training or (torch.is_grad_enabled() and self.freqs.requires_grad):
            terms = self._terms(grid, npt, device)  # carries the graph to freqs: never cached
        else:
            terms = self._cache.get(lambda: (grid, npt, device, param_key([self.freqs]), self.extrapolation.key()),
                                    lambda: self._terms(grid, npt, device))
        return terms if not pos.is_subset else [t.select(pos) for t in terms]

    def map_checkpoint(self, layout: str, state_dict: Dict[str, torch.Tensor],
                       prefix: str = '') -> Dict[str, torch.Tensor]:
        """timm Eva (``vit_*_patch16_rope_mixed[_ape]_224``): ``rope.freqs`` -> ``freqs`` (same layout: x then y,
        per block and head); the optional APE takes ``pos_embed``. See :meth:`PosEncoding.map_checkpoint`."""
        out = super().map_checkpoint(layout, state_dict, prefix)
        if layout == 'timm_eva' and 'rope.freqs' in state_dict:
            out[prefix + 'freqs'] = state_dict.pop('rope.freqs')
        return out

    def reset_parameters(self) -> None:
        """Random directions per head (timm ``init_random_2d_freqs``, or :func:`init_random_3d_freqs` for videos);
        child modules (the optional APE) too."""
        head_dim, depth, heads = self.freqs.shape[-1] * 2, self.freqs.shape[1], self.freqs.shape[2]
        with torch.no_grad():
            init = init_random_3d_freqs(head_dim, depth, heads, theta=self.theta) if self.video else \
                init_random_2d_freqs(head_dim, depth, heads, temperature=self.theta)
            self.freqs.copy_(init)
        super().reset_parameters()

    def no_weight_decay(self) -> set:
        return {'freqs'}


@register_pos_encoding('rope_mixed_ape')
class RoPEMixedAPE(RoPEMixed):
    """RoPE-Mixed plus a learned APE on the patch tokens (RoPE-ViT's "RoPE-Mixed + APE", timm ``no_embed_class``).

    Videos (``grid_size=(T', H', W')``): RoPE-Mixed over (x, y, t) plus a 3D learned table resampled trilinearly.

    Parameters: ``freqs`` as RoPE-Mixed, ``ape.pos_embed`` ``(1, H*W, C)`` (``(1, T'*H'*W', C)`` for videos).
    """
    family = 'RoPE-Mixed + APE'
    adaptation = 'RoPE extrapolated on integer patch positions; APE resampled bicubically'

    def __init__(self, dim: int, num_heads: int, depth: int, grid_size: Tuple[int, ...], theta: float = 10.0,
                 extrapolation: Any = 'none', p_rope: float = 1.0, random_positions: Any = None):
        super().__init__(dim, num_heads, depth, theta=theta, grid_size=grid_size, extrapolation=extrapolation,
                         p_rope=p_rope, random_positions=random_positions)
        self.ape = LearnedAPE(dim, grid_size, num_prefix_tokens=0, embed_prefix=False)
        if self.video:
            self.adaptation = 'RoPE extrapolated on integer (t, row, col) positions; APE resampled trilinearly'

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        return self.ape.embed(x, pos)

    def set_grid_size(self, grid_size: Tuple[int, int]) -> None:
        self.ape.set_grid_size(grid_size)

    def no_weight_decay(self) -> set:
        return {'freqs', 'ape.pos_embed'}


PAIRINGS = ('interleaved', 'vjepa2')


@register_pos_encoding('rope3d')
class RoPE3D(PosEncoding):
    """V-JEPA 2's 3D RoPE: each head split into contiguous chunks ``[t | h | w | rest]``.

    Each of t, h, w gets ``sub = 2 * ((head_dim // 3) // 2)`` channels; the ``rest = head_dim - 3 * sub`` last
    channels are not rotated. Chunk frequencies ``w_j = theta^(-j / (sub / 2))``, ``j < sub / 2``; the angle of a
    token is its integer tubelet index (t chunk), patch row (h chunk) or patch column (w chunk) times ``w_j``: no
    scaling, no centring. More frames or a bigger frame: the same formula at larger integer positions
    (extrapolation); positions of the trained grid keep their angles. On an image grid ``(1, H, W)`` the t chunk is
    the identity. Token subsets (V-JEPA masking): each kept token keeps its original (t, h, w).

    Pairings (both applied by the one kernel, :func:`zoo.encodings.rotation.apply_rope` with interleaved pairs):
        * ``'interleaved'`` (default): the correct RoPE, channels ``(2i, 2i+1)`` of a chunk turn together by angle
          ``i`` (V-JEPA 2's documented fix, ``repeat_interleave(2)``). Orthogonal; scores depend on (dt, dr, dc) only.
        * ``'vjepa2'``: the released code's pairing, which released V-JEPA 2 weights need. Its sin/cos tables repeat
          the ``sub / 2`` angles as two halves (``cat([a, a])``) but pair interleaved channels, so element ``m`` of a
          chunk uses angle ``m mod (sub / 2)`` and the two members of a pair turn by different angles:
          ``out[2i] = x[2i] cos a[2i] - x[2i+1] sin a[2i]``, ``out[2i+1] = x[2i+1] cos a[2i+1] + x[2i] sin a[2i+1]``
          with ``a = cat([angles, angles])``. Not a rotation (not orthogonal).

    Positions come from the grid (``Positions.grid``; prefix tokens get angle 0, the identity) or from explicit
    per-token ids ``Positions.ids`` ``(3, B, L)`` = (t, row, col), which may be non-integer (V-JEPA 2-AC's grid
    rescaling). Angles, sin and cos are float32 (float64 for float64 inputs; see :mod:`zoo.encodings.rotation`)
    unless ``angle_dtype='input'``: then, as V-JEPA 2's code does, frequencies, angles, sin, cos and the products are
    in q/k's dtype, so a bf16 model rotates by bf16-rounded angles exactly like the released code (and the weights
    trained under bf16 autocast). The float32 default is the more accurate rotation.

    Args:
        dim: embedding width; ``head_dim = dim / num_heads`` must be even and at least 6.
        num_heads: attention heads.
        depth: number of blocks (every block uses the same rotation).
        theta: frequency base (10000 in V-JEPA 2).
        pairing: ``'interleaved'`` or ``'vjepa2'``.
        angle_dtype: ``'float32'`` (the zoo's policy) or ``'input'`` (V-JEPA 2's: the dtype of q and k).
        grid_size: the training grid ``(T', H', W')`` (an image ``(H, W)`` is one frame): extrapolation factors.
        extrapolation: ``'none'``, ``'pi'``, ``'ntk'``, ``'yarn'`` or a dict (:mod:`zoo.encodings.extrapolation`),
            per axis: the t, h, w chunks scale with the frame, row and column factors (explicit ids: the span of the
            ids per axis against ``train_grid``).
        p_rope: p-RoPE's fraction of each chunk's bands that rotate (the highest frequencies); 1 = plain 3D RoPE.
        random_positions: ``None``, ``'subset'``, ``'cape'`` or a dict (:mod:`zoo.encodings.randomized`): per-sample
            random (t, row, col) coordinates of a grid in training; the integer grid in eval (explicit ids are used
            as given).

    Raises:
        ValueError: bad geometry, ``theta``, ``pairing`` or ``angle_dtype``; at forward explicit ids that are not
            ``(3, B, L)``.
    """
    family = 'RoPE-3D (axial t | h | w, V-JEPA 2)'
    adaptation = 'RoPE extrapolated on integer tubelet / patch positions (t, row, col)'
    extrapolation_strategies = ROTARY_STRATEGIES  # + longrope, mspoe (zoo.encodings.longrope, .mspoe_axes)

    def __init__(self, dim: int, num_heads: int, depth: int, theta: float = 10000.0, pairing: str = 'interleaved',
                 angle_dtype: str = 'float32', grid_size: Optional[Tuple[int, ...]] = None,
                 extrapolation: Any = 'none', p_rope: float = 1.0, random_positions: Any = None):
        super().__init__()
        self.p_rope = check_p_rope(p_rope, 'rope3d')
        self.random_positions = RandomPositions.parse(random_positions, 'rope3d')
        self._extrapolation = Extrapolation.parse(
            extrapolation, as_thw(parse_grid_size('rope3d', grid_size)) if grid_size is not None else None,
            self.extrapolation_strategies, 'rope3d')
        if dim % num_heads:
            raise ValueError(f'rope3d: dim {dim} is not divisible by num_heads {num_heads}')
        head_dim = dim // num_heads
        if head_dim % 2 or head_dim < 6:
            raise ValueError(f'rope3d needs an even head_dim >= 6 (three chunks of channel pairs), got {head_dim}; '
                             f'change embed_dim/num_heads')
        if not theta > 0:
            raise ValueError(f'rope3d theta must be > 0, got {theta}')
        if pairing not in PAIRINGS:
            raise ValueError(f"rope3d pairing must be one of {PAIRINGS} ('vjepa2' = the released V-JEPA 2 code's "
                             f"non-orthogonal pairing), got {pairing!r}")
        if angle_dtype not in ('float32', 'input'):
            raise ValueError(f"rope3d angle_dtype must be 'float32' or 'input' (V-JEPA 2's q/k dtype), got "
                             f"{angle_dtype!r}")
        self.depth, self.head_dim, self.theta, self.pairing = depth, head_dim, float(theta), pairing
        self.angle_dtype = angle_dtype
        self.sub = 2 * ((head_dim // 3) // 2)
        self.rest = head_dim - 3 * self.sub
        self._cache = TableCache()

    def extra_repr(self) -> str:
        return f'head_dim={self.head_dim}, sub={self.sub}, rest={self.rest}, theta={self.theta}, ' \
               f'pairing={self.pairing!r}, angle_dtype={self.angle_dtype!r}'

    def _table_dtype(self, dtype: torch.dtype) -> torch.dtype:
        """Precision of the angles and tables for q/k of ``dtype``."""
        if dtype == torch.float64 or (self.angle_dtype == 'input' and dtype in (torch.bfloat16, torch.float16)):
            return dtype
        return torch.float32

    def sin_cos(self, coords: torch.Tensor, dtype: torch.dtype = torch.float32,
                factors: Optional[Sequence[float]] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Kernel tables for positions ``coords`` ``(..., L, 3)`` (t, row, col); ``factors``: per-axis
        extrapolation factors ``(s_t, s_rows, s_cols)`` (none: as trained).

        Returns:
            ``(sin, cos)``, each ``(..., L, head_dim)``, for ``apply_rope(x, sin, cos, 'interleaved')``: float32,
            float64 when ``dtype`` is float64, ``dtype`` itself with ``angle_dtype='input'``.
        """
        cdtype = self._table_dtype(dtype)
        bands = rope_frequencies(self.sub // 2, self.theta, device=coords.device, dtype=cdtype)
        if self.p_rope < 1.0:
            n = self.sub // 2
            bands = bands * p_rope_mask(torch.arange(n, device=coords.device), n, self.p_rope).to(cdtype)
        ext, scale = self.extrapolation, 1.0
        if factors is not None and ext.active and any(f != 1.0 for f in factors):
            e = ntk_exponents(self.sub // 2, coords.device)
            bands = torch.stack([ext.frequencies(bands, f, n, e) for f, n in zip(factors, ext.train_grid)])
            scale = ext.grid_attention_scale(factors)
        angles = ext.grid_positions(coords.to(cdtype), factors, self.sub // 2) * bands  # (..., L, 3, sub / 2)
        if self.pairing == 'interleaved':
            angles = torch.cat([angles.flatten(-2), angles.new_zeros(*angles.shape[:-2], self.rest // 2)], -1)
            sin, cos = rope_sin_cos(angles, 'interleaved')
        else:
            sin, cos = rope_sin_cos(angles, 'half')                          # (..., L, 3, sub): cat([a, a]) per chunk
            pad = sin.new_zeros(*sin.shape[:-2], self.rest)
            sin, cos = torch.cat([sin.flatten(-2), pad], -1), torch.cat([cos.flatten(-2), pad + 1], -1)
        if scale != 1.0:  # YaRN temperature (zoo.encodings.extrapolation)
            sin, cos = sin * scale, cos * scale
        return sin.to(cdtype), cos.to(cdtype)

    def term(self, grid: Tuple[int, int, int], num_prefix_tokens: int, dtype: torch.dtype,
             device: torch.device) -> RotaryTerm:
        """The (cached) full-grid term; prefix tokens first, at position 0 (identity)."""
        def build():
            coords = grid_coords(grid, device)
            if num_prefix_tokens:
                coords = torch.cat([coords.new_zeros(num_prefix_tokens, 3), coords])
            sin, cos = self.sin_cos(coords, dtype, self.extrapolation.factors(grid, 'rope3d'))
            return RotaryTerm(sin[None, None], cos[None, None], 'interleaved', self.pairing == 'interleaved')
        return self._cache.get((tuple(grid), num_prefix_tokens, self._table_dtype(dtype), device,
                                self.extrapolation.key()), build)

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        if self.extrapolation.strategy == 'mspoe':  # per head and axis: zoo.encodings.mspoe_axes
            return mspoe_attn_terms(self, pos, dtype, device, RotaryTerm, patch_coords)
        if pos.ids is not None:
            ids = pos.ids
            if ids.dim() != 3 or ids.shape[0] != 3:
                raise ValueError(f'rope3d: Positions.ids must be (3, B, L) = (t, row, col) per token, got '
                                 f'{tuple(ids.shape)}')
            factors = None
            if self.extrapolation.active:  # the span of the ids per axis against the training grid
                span = (ids.flatten(1).amax(1) - ids.flatten(1).amin(1) + 1).tolist()
                factors = self.extrapolation.factors(span, 'rope3d')
            sin, cos = self.sin_cos(ids.to(device).permute(1, 2, 0), dtype, factors)  # (B, L, head_dim)
            term = RotaryTerm(sin[:, None], cos[:, None], 'interleaved', self.pairing == 'interleaved')
        elif pos.grid is None:
            raise ValueError('rope3d needs a patch grid (Positions.grid) or (3, B, L) ids (Positions.ids)')
        elif self.training and self.random_positions.active:  # per-sample random coordinates: never cached
            grid, npt = tuple(pos.grid), pos.num_prefix_tokens
            coords = self.random_positions.draw(grid, pos.draw_batch, device)
            coords = torch.cat([coords.new_zeros(coords.shape[0], npt, 3), coords], dim=1)
            sin, cos = self.sin_cos(coords, dtype, self.extrapolation.factors(grid, 'rope3d'))
            term = RotaryTerm(sin[:, None], cos[:, None], 'interleaved', self.pairing == 'interleaved').select(pos)
        else:
            term = self.term(tuple(pos.grid), pos.num_prefix_tokens, dtype, device).select(pos)
        return [term] * self.depth
