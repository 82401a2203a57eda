"""Distance biases: ALiBi, KERPLE (logarithmic and power kernels) and FIRE, on patch grids (2D, 3D) and sequences.

Papers:
    * ALiBi: "Train Short, Test Long: Attention with Linear Biases Enables Input Length Extrapolation" (Press et al.,
      ICLR 2022, arXiv:2108.12409), Sec. 3.
    * KERPLE: "KERPLE: Kernelized Relative Positional Embedding for Length Extrapolation" (Chi et al., NeurIPS 2022,
      arXiv:2205.09921), Sec. 4 (Eq. 5 and the two kernels of Sec. 4.2).
    * FIRE: "Functional Interpolation for Relative Positions Improves Long Context Transformers" (Li et al., ICLR 2024,
      arXiv:2310.04418), Sec. 3 (Eq. 3-5: progressive interpolation, log transform, learned threshold).

Each adds ``b_h(i, j)`` to the scaled logits ``q_i . k_j / sqrt(d)`` of head ``h``, a function of the distance between
the query's and the key's positions only:

* ``alibi``: ``-m_h d`` with ALiBi's fixed geometric slopes ``m_h`` (:func:`alibi_slopes`, any head count);
* ``kerple_log``: ``-p_h log(1 + a_h d)``, ``p_h, a_h >= 0.01`` (learned per head);
* ``kerple_power``: ``-a_h d^p_h``, ``0.01 <= p_h <= 2``, ``a_h >= 0.01`` (learned per head);
* ``fire``: ``f(psi(d) / psi(max(L, r_i)))`` with ``psi(x) = log(c x + 1)``, a learned MLP ``f`` (one hidden ReLU layer,
  one output per head), learned ``c > 0`` and threshold ``L > 0``, and ``r_i`` the query's reach: the largest distance
  from query ``i`` to any token of the grid (to any earlier token when causal; FIRE's ``i`` for a causal sequence).
  A larger grid is squeezed into the trained range of the MLP's input (progressive interpolation).

Positions are integer patch coordinates: ``(row, col)`` of an image grid, ``(t, row, col)`` of a video grid (the
geometry's ``grid_size`` decides which axes count), scaled per axis by ``axis_scale``. ``distance='euclidean'`` (the
default) measures ``d = ||p_i - p_j||_2``; ``distance='per_axis'`` applies the 1D kernel to each axis's ``|dp_a|`` and
sums the results (ALiBi then uses the L1 distance). The biases are bidirectional (symmetric in ``i, j``); a sequence is
the grid ``(1, 1, L)`` (an image geometry ``grid_size=(1, L)``), causal when ``Positions.is_causal``. Prefix tokens
(class, registers) get no bias, in their rows and columns.

The official code departs from the papers in two places; ``convention='official'`` reproduces it on sequences (the
golden files ``kerple_alibi.pt``), ``'paper'`` (the default) is the form above:

* ALiBi's released fairseq code adds ``+m_h j`` (the key index) under the causal mask: the paper's ``-m_h (i - j)``
  plus the per-row constant ``m_h i``, which softmax removes, so both give the same attention;
* KERPLE's released code is causal only: it uses ``d = max(i - j, 0)``, so keys after the query get bias 0 (masked
  anyway by causal attention). Its parameters are clamped in place at every forward; here the clamp is applied out of
  place (the same values, the parameter left alone).

Tables: in eval the ``(1, H, L, L)`` bias of a grid is cached per (grid, prefix tokens, causality, dtype, device,
parameter versions) outside the state_dict (``TableCache``); learned parameters and randomized positions recompute it
every training forward. Above ``block_above`` tokens (eager mode only) the term carries coordinates and parameters
instead, and the attention computes the bias per block of ``query_block`` queries (``AttnTerm.bias_rows``), so no
``(L, L)`` bias is materialised whole at video sizes. Every layer shares one bias (ALiBi by design; KERPLE's and FIRE's
parameters are shared across layers as in the official KERPLE model).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ._cache import TableCache, caching_allowed, param_key
from ._grid import parse_grid_size
from .base import AttnTerm, Positions, PosEncoding
from .randomized import RandomPositions
from .registry import pos_encoding_name, register_pos_encoding
from .rotation import grid_coords

__all__ = ['alibi_slopes', 'BiasTable', 'DistanceBiasTerm', 'DistanceBias', 'ALiBi', 'KerpleLog', 'KerplePower',
           'FIRE', 'DISTANCES', 'CONVENTIONS', 'KERPLE_EPS']

DISTANCES = ('euclidean', 'per_axis')
CONVENTIONS = ('paper', 'official')
KERPLE_EPS = 0.01  # the official lower clamp of every KERPLE parameter


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes (Press et al., Sec. 3) for any head count, float64 ``(num_heads,)``.

    For ``n`` a power of two the slopes are the geometric sequence ``2^(-8 k / n)``, ``k = 1 .. n``. Otherwise the
    ``2^floor(log2 n)`` slopes of the largest power of two below ``n`` come first, followed by the slopes ``1, 3, 5,
    ...`` (odd positions, counted from 1) of the sequence for twice that power, as many as are missing (the rule of
    the released code).

    Raises:
        ValueError: ``num_heads < 1``.
    """
    if num_heads < 1:
        raise ValueError(f'alibi needs at least one head, got num_heads={num_heads}')

    def power_of_two(n: int) -> List[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start ** (k + 1) for k in range(n)]

    if math.log2(num_heads).is_integer():
        slopes = power_of_two(num_heads)
    else:
        low = 2 ** math.floor(math.log2(num_heads))
        slopes = power_of_two(low) + alibi_slopes(2 * low).tolist()[0::2][:num_heads - low]
    return torch.tensor(slopes, dtype=torch.float64)


def _bias_rows(kernel: Callable, coords: torch.Tensor, reach: Optional[torch.Tensor], params: Sequence[torch.Tensor],
               num_prefix_tokens: int, start: int, stop: int) -> torch.Tensor:
    """Bias rows ``start:stop`` ``(B or 1, H, stop - start, L)`` float32 of tokens at ``coords`` ``(B or 1, L, A)``:
    ``kernel(coords[:, start:stop], coords, reach rows, *params)`` with the rows and columns of the prefix tokens
    zeroed."""
    rows_reach = None if reach is None else reach[:, start:stop]
    bias = kernel(coords[:, start:stop], coords, rows_reach, *params)
    if num_prefix_tokens:
        rows = torch.arange(start, stop, device=bias.device) >= num_prefix_tokens
        cols = torch.arange(coords.shape[1], device=bias.device) >= num_prefix_tokens
        bias = torch.where(rows[:, None] & cols[None, :], bias, bias.new_zeros(()))
    return bias


class BiasTable(AttnTerm):
    """A precomputed additive bias ``table`` ``(B or 1, H, L, L)`` over every token (prefix tokens included).

    With a KV cache the queries are the last ``L_q`` of the ``L`` tokens: their rows are returned (decoding).
    """
    tensor_fields = ('table',)

    def __init__(self, table: torch.Tensor):
        self.table = table

    def select(self, pos: Positions) -> 'BiasTable':
        """The rows and columns of the tokens present in ``pos`` (this term itself for the full grid)."""
        if not pos.is_subset:
            return self
        return BiasTable(pos.select(self.table, 2, dims=(3,)))

    def bias(self, q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
        table = self.table
        if caching_allowed() and q.shape[-2] != table.shape[-2]:  # eager KV-cache decoding: the last rows
            table = table[..., table.shape[-2] - q.shape[-2]:, :]
        return table


class DistanceBiasTerm(AttnTerm):
    """A distance bias computed inside the attention, per block of ``query_block`` queries (``bias_rows``), from the
    tokens' coordinates and the encoding's parameters; the ``(L, L)`` bias never exists whole on the fused path.

    Args:
        kernel: the encoding's ``kernel(coords_q, coords_k, reach_q, *params) -> (B or 1, H, Lq, Lk)``; it reads only
            its arguments (so gradient checkpointing, which passes the tensors anew, sees the same computation).
        coords: ``(B or 1, L, A)`` coordinates of the tokens present (prefix rows first, ignored).
        reach: ``(B or 1, L, K)`` FIRE's per-query reach, or ``None``.
        params: the kernel's parameter tensors (learned ones carry their graph).
        num_prefix_tokens: leading tokens without a position (zero rows and columns).
        query_block: queries per block.
    """

    def __init__(self, kernel: Callable, coords: torch.Tensor, reach: Optional[torch.Tensor],
                 params: Sequence[torch.Tensor], num_prefix_tokens: int, query_block: int):
        self.kernel, self.num_prefix_tokens, self.query_block = kernel, num_prefix_tokens, int(query_block)
        self.coords, self.reach = coords, reach
        self.num_params = len(params)
        for i, p in enumerate(params):
            setattr(self, f'param{i}', p)
        self.tensor_fields = ('coords',) + (('reach',) if reach is not None else ()) + \
            tuple(f'param{i}' for i in range(len(params)))

    @property
    def params(self) -> Tuple[torch.Tensor, ...]:
        return tuple(getattr(self, f'param{i}') for i in range(self.num_params))

    def bias_rows(self, q: torch.Tensor, k: torch.Tensor, scale: float, start: int, stop: int) -> torch.Tensor:
        return _bias_rows(self.kernel, self.coords, self.reach, self.params, self.num_prefix_tokens, start, stop)

    def bias(self, q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
        """The whole bias (the explicit path, or fewer queries than a block); the queries are the last tokens."""
        n = self.coords.shape[1]
        return self.bias_rows(q, k, scale, n - q.shape[-2], n)


class DistanceBias(PosEncoding):
    """Common machinery of the distance biases (not registered itself): positions, distances, caching, blocks.

    Args:
        num_heads: attention heads (one bias per head).
        depth: blocks (every block gets the same term).
        grid_size: the training grid, ``(H, W)`` for images (distances over row, col) or ``(T, H, W)`` for videos
            (over t, row, col); a sequence is ``(1, L)``. Default: an image.
        distance: ``'euclidean'`` (``||dp||_2``) or ``'per_axis'`` (the 1D kernel of each axis's ``|dp_a|``, summed).
        axis_scale: a factor per axis of the geometry (e.g. ``(2.0, 1.0, 1.0)``: a tubelet counts as two patches);
            default all 1.
        convention: ``'paper'`` (default) or ``'official'`` (the released code's sequence form; see the module
            docstring; sequences ``(1, 1, L)`` only, where the encoding has one).
        random_positions: ``None`` / ``'subset'`` / ``'cape'`` / a dict (:class:`~zoo.encodings.randomized.
            RandomPositions`): per-sample random coordinates in training, the ordinary grid in eval.
        query_block: queries per block when the attention computes the bias per block.
        block_above: above this many tokens (eager mode), the bias is computed per block of queries inside the
            attention instead of one cached ``(L, L)`` table; ``None`` never blocks.

    Raises:
        ValueError: an unknown ``distance`` or ``convention``, a convention the encoding does not have, a bad
            ``axis_scale``, ``grid_size``, ``query_block``, or ``convention='official'`` on a grid that is no sequence.
    """
    family = 'distance bias'
    adaptation = 'distances recomputed on the new grid (the bias grows with distance; nothing resampled)'
    conventions: Tuple[str, ...] = ('paper',)

    def __init__(self, num_heads: int, depth: int, grid_size: Optional[Tuple[int, ...]] = None,
                 distance: str = 'euclidean', axis_scale: Optional[Sequence[float]] = None, convention: str = 'paper',
                 random_positions: Any = None, query_block: int = 1024, block_above: Optional[int] = 2048):
        super().__init__()
        name = self._name()
        self.grid_size = (224 // 16, 224 // 16) if grid_size is None else parse_grid_size(name, grid_size)
        self.video = len(self.grid_size) == 3
        self.num_heads, self.depth = int(num_heads), int(depth)
        if distance not in DISTANCES:
            raise ValueError(f'{name}: distance must be one of {DISTANCES}, got {distance!r}')
        if convention not in CONVENTIONS:
            raise ValueError(f'{name}: convention must be one of {CONVENTIONS}, got {convention!r}')
        if convention not in self.conventions:
            raise ValueError(f"{name} has only the paper's form (convention='paper'); convention='official' "
                             "reproduces released code for alibi, kerple_log and kerple_power")
        self.axes = (0, 1, 2) if self.video else (1, 2)  # coordinate columns (t, row, col) the geometry uses
        scale = (1.0,) * len(self.axes) if axis_scale is None else tuple(float(s) for s in axis_scale)
        if len(scale) != len(self.axes) or min(scale) <= 0:
            raise ValueError(f'{name}: axis_scale needs {len(self.axes)} positive factors '
                             f'({"t, row, col" if self.video else "row, col"}), got {axis_scale!r}')
        if convention == 'official' and math.prod(self.grid_size[:-1]) != 1:
            raise ValueError(f"{name}: convention='official' is the released code's 1D form; it needs a sequence "
                             f"geometry grid_size=(1, L), got {self.grid_size}")
        if int(query_block) < 1:
            raise ValueError(f'{name}: query_block must be >= 1, got {query_block}')
        self.distance, self.axis_scale, self.convention = distance, scale, convention
        self.random_positions = RandomPositions.parse(random_positions, name)
        self.query_block = int(query_block)
        self.block_above = None if block_above is None else int(block_above)
        self._cache = TableCache()
        self._init_params()

    def _name(self) -> str:
        return pos_encoding_name(self)

    def extra_repr(self) -> str:
        return (f'heads={self.num_heads}, distance={self.distance!r}, axes={len(self.axes)}, '
                f'convention={self.convention!r}, random_positions={self.random_positions.mode!r}')

    # ---------------------------------------------------------------------------------- what subclasses define
    uses_reach: bool = False  # FIRE normalises by each query's reach

    def _init_params(self) -> None:
        """Create the encoding's parameters (called at the end of ``__init__``)."""

    def params(self) -> Tuple[torch.Tensor, ...]:
        """The tensors the kernel takes (learned parameters keep their graph), float32."""
        return ()

    def kernel(self, coords_q: torch.Tensor, coords_k: torch.Tensor, reach_q: Optional[torch.Tensor],
               *params: torch.Tensor) -> torch.Tensor:
        """Bias ``(B or 1, H, Lq, Lk)`` float32 between queries at ``coords_q`` ``(B or 1, Lq, A)`` and keys at
        ``coords_k`` ``(B or 1, Lk, A)``; ``reach_q`` ``(B or 1, Lq, K)`` for FIRE. Reads only its arguments."""
        raise NotImplementedError

    # ---------------------------------------------------------------------------------------------- geometry
    def distances(self, coords_q: torch.Tensor, coords_k: torch.Tensor) -> torch.Tensor:
        """``(B or 1, Lq, Lk, K)`` distances: ``K = 1`` Euclidean, ``K = A`` per axis (absolute differences)."""
        diff = coords_q[:, :, None, :] - coords_k[:, None, :, :]
        if self.distance == 'euclidean':
            return diff.square().sum(-1, keepdim=True).sqrt()
        return diff.abs()

    def sequence_offsets(self, coords_q: torch.Tensor, coords_k: torch.Tensor) -> torch.Tensor:
        """``(B or 1, Lq, Lk)`` signed offsets ``i - j`` (query minus key) along the last axis (a sequence's index)."""
        return coords_q[:, :, None, -1] - coords_k[:, None, :, -1]

    def _reach(self, coords: torch.Tensor, causal: bool) -> torch.Tensor:
        """``(B or 1, N, K)``: the largest distance from each patch token to any patch token (to any earlier one when
        ``causal``), in the units of :meth:`distances`."""
        if causal:
            d = self.distances(coords, coords)
            n = coords.shape[1]
            earlier = torch.ones(n, n, dtype=torch.bool, device=coords.device).tril()
            return d.masked_fill(~earlier[None, :, :, None], 0.0).amax(dim=2)
        far = torch.maximum(coords - coords.amin(1, keepdim=True), coords.amax(1, keepdim=True) - coords)
        return far.square().sum(-1, keepdim=True).sqrt() if self.distance == 'euclidean' else far

    def _coords(self, grid: Tuple[int, int, int], pos: Positions, device: torch.device,
                random: bool) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Full-grid token coordinates ``(B or 1, P + N, A)`` (prefix rows zero) and FIRE's reach ``(B or 1, P + N,
        K)`` (prefix rows one), or ``None``."""
        if random:
            coords = self.random_positions.draw(grid, pos.draw_batch, device)
        else:
            coords = grid_coords(grid, device).unsqueeze(0)
        coords = coords[..., list(self.axes)] * torch.tensor(self.axis_scale, device=device)
        reach = self._reach(coords, pos.is_causal) if self.uses_reach else None
        npt = pos.num_prefix_tokens
        if npt:
            coords = torch.cat([coords.new_zeros(coords.shape[0], npt, coords.shape[-1]), coords], dim=1)
            if reach is not None:
                reach = torch.cat([reach.new_ones(reach.shape[0], npt, reach.shape[-1]), reach], dim=1)
        return coords, reach

    def _check_grid(self, pos: Positions) -> Tuple[int, int, int]:
        name = self._name()
        if pos.grid is None:
            raise ValueError(f'{name} needs a patch grid (Positions.grid); a sequence is the grid (1, 1, L)')
        grid = tuple(pos.grid)
        if self.convention == 'official' and (grid[0] != 1 or grid[1] != 1):
            raise ValueError(f"{name}: convention='official' is the released code's 1D form and needs a sequence "
                             f"grid (1, 1, L), got {grid}")
        return grid

    # ------------------------------------------------------------------------------------------------ terms
    def _blocked(self, pos: Positions) -> bool:
        """Whether the attention computes the bias per block: eager mode, more tokens than ``block_above``."""
        if self.block_above is None or not caching_allowed():
            return False
        n = pos.num_tokens
        return isinstance(n, int) and n > self.block_above

    def _learning(self) -> bool:
        return any(p.requires_grad for p in self.parameters()) and (self.training or torch.is_grad_enabled())

    def full_bias(self, pos: Positions, device: torch.device, random: bool = False) -> torch.Tensor:
        """The ``(B or 1, H, P + N, P + N)`` float32 bias of the full grid of ``pos`` (prefix rows and columns 0)."""
        coords, reach = self._coords(self._check_grid(pos), pos, device, random)
        return _bias_rows(self.kernel, coords, reach, self.params(), pos.num_prefix_tokens, 0, coords.shape[1])

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        grid = self._check_grid(pos)
        random = self.training and self.random_positions.active
        npt = pos.num_prefix_tokens
        if self._blocked(pos):
            coords, reach = self._coords(grid, pos, device, random)
            coords = pos.select(coords, 1)
            reach = None if reach is None else pos.select(reach, 1)
            term = DistanceBiasTerm(self.kernel, coords, reach, self.params(), npt, self.query_block)
            return [term] * self.depth

        def build() -> BiasTable:
            return BiasTable(self.full_bias(pos, device, random).to(dtype))
        if random or self._learning():
            term = build()  # carries the graph to learned parameters / a fresh draw: never cached
        else:
            term = self._cache.get(lambda: (grid, npt, pos.is_causal, dtype, str(device),
                                            param_key(list(self.parameters()))), build)
        return [term.select(pos)] * self.depth

    def inflate_param(self, name: str, image_value: Optional[torch.Tensor], target: torch.Tensor,
                      image_grid: Tuple[int, int], prefix: str = '') -> Optional[torch.Tensor]:
        """Per-head parameters (KERPLE) and FIRE's MLP, scale and threshold have the same shape for images and videos:
        the image values are kept (:meth:`PosEncoding.inflate_param`); the video adds the t axis to the distance."""
        return super().inflate_param(name, image_value, target, image_grid, prefix)

    def reset_parameters(self) -> None:
        self._cache.clear()
        super().reset_parameters()


@register_pos_encoding('alibi')
class ALiBi(DistanceBias):
    """ALiBi on patch grids: ``b_h(i, j) = -m_h d(i, j)`` with the paper's fixed slopes ``m_h`` (:func:`alibi_slopes`),
    Euclidean patch distance by default. Nothing is learned. Options: see :class:`DistanceBias`;
    ``convention='official'`` gives the released code's ``+m_h j`` on a sequence (equal after softmax)."""
    family = 'ALiBi (linear distance bias)'
    conventions = CONVENTIONS

    def params(self) -> Tuple[torch.Tensor, ...]:
        return (alibi_slopes(self.num_heads).float(),)

    def kernel(self, coords_q, coords_k, reach_q, slopes):
        slopes = slopes.to(coords_q.device)[None, :, None, None]
        if self.convention == 'official':  # + slope * key index, the same in every row
            key = coords_k[:, None, None, :, -1]
            return (slopes * key).expand(-1, -1, coords_q.shape[1], -1)
        return -slopes * self.distances(coords_q, coords_k).sum(-1)[:, None]


def _spread(n: int, low: float, high: float, reverse: bool = False) -> torch.Tensor:
    """``n`` evenly spread values: the midpoints of ``n`` equal bins of ``[low, high]`` (a deterministic stand-in for
    a uniform draw, so that meta-device construction re-initialises to the same values)."""
    mid = (torch.arange(n, dtype=torch.float32) + 0.5) / n
    mid = mid.flip(0) if reverse else mid
    return low + (high - low) * mid


class _Kerple(DistanceBias):
    """KERPLE's shared machinery: per-head ``bias_p`` and ``bias_a`` (shared by every layer, as the official model
    shares one module), clamped out of place at every forward; the official ``(H, 1, 1)`` layout loads through
    ``map_checkpoint('kerple', ...)``."""
    conventions = CONVENTIONS
    p_max: Optional[float] = None

    def _init_params(self) -> None:
        self.bias_p = nn.Parameter(torch.empty(self.num_heads))
        self.bias_a = nn.Parameter(torch.empty(self.num_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The official initialisation draws ``p ~ U(0, 2)`` and ``a ~ U(0, 1)`` per head; here the midpoints of
        ``H`` equal bins of those ranges (``p`` rising, ``a`` falling over the heads): the same spread,
        deterministic."""
        with torch.no_grad():
            self.bias_p.copy_(_spread(self.bias_p.numel(), 0.0, 2.0))
            self.bias_a.copy_(_spread(self.bias_a.numel(), 0.0, 1.0, reverse=True))
        super().reset_parameters()

    def params(self) -> Tuple[torch.Tensor, ...]:
        p = self.bias_p.float().clamp(min=KERPLE_EPS, max=self.p_max)
        return p, self.bias_a.float().clamp(min=KERPLE_EPS)

    def kerple_distances(self, coords_q: torch.Tensor, coords_k: torch.Tensor) -> torch.Tensor:
        """``(B or 1, 1, Lq, Lk, K)``: the paper's distances, or the official ``max(i - j, 0)`` on a sequence."""
        if self.convention == 'official':
            return self.sequence_offsets(coords_q, coords_k).clamp(min=0)[:, None, :, :, None]
        return self.distances(coords_q, coords_k)[:, None]

    def map_checkpoint(self, layout: str, state_dict: Dict[str, torch.Tensor],
                       prefix: str = '') -> Dict[str, torch.Tensor]:
        """``'kerple'`` (the official ``ParallelKerpleLog`` / ``ParallelKerplePower``): ``bias_p``, ``bias_a``
        ``(H, 1, 1)`` -> ``(H,)``. See :meth:`PosEncoding.map_checkpoint`."""
        out = super().map_checkpoint(layout, state_dict, prefix)
        if layout == 'kerple':
            for name in ('bias_p', 'bias_a'):
                if name in state_dict:
                    out[prefix + name] = state_dict.pop(name).reshape(-1)
        return out

    def no_weight_decay(self) -> set:
        return {'bias_p', 'bias_a'}


@register_pos_encoding('kerple_log')
class KerpleLog(_Kerple):
    """KERPLE, logarithmic kernel: ``b_h(i, j) = -p_h log(1 + a_h d(i, j))``, ``p_h, a_h`` learned per head and
    clamped to ``>= 0.01`` (no upper clamp, as in the official code). Options: see :class:`DistanceBias`.

    Parameters: ``bias_p``, ``bias_a`` ``(num_heads,)``; no weight decay.
    """
    family = 'KERPLE-log (learned log-distance bias)'

    def kernel(self, coords_q, coords_k, reach_q, p, a):
        d = self.kerple_distances(coords_q, coords_k)
        p, a = p.to(d.device)[None, :, None, None, None], a.to(d.device)[None, :, None, None, None]
        return -(p * torch.log1p(a * d)).sum(-1)


@register_pos_encoding('kerple_power')
class KerplePower(_Kerple):
    """KERPLE, power kernel: ``b_h(i, j) = -a_h d(i, j)^p_h``, ``0.01 <= p_h <= 2``, ``a_h >= 0.01``, learned per
    head. Options: see :class:`DistanceBias`.

    Parameters: ``bias_p``, ``bias_a`` ``(num_heads,)``; no weight decay.
    """
    family = 'KERPLE-power (learned power-distance bias)'
    p_max = 2.0

    def kernel(self, coords_q, coords_k, reach_q, p, a):
        d = self.kerple_distances(coords_q, coords_k)
        p, a = p.to(d.device)[None, :, None, None, None], a.to(d.device)[None, :, None, None, None]
        positive = d > 0  # 0^p = 0, without the 0 * log(0) of pow's gradient in p
        powered = torch.where(positive, d.clamp(min=1e-12), torch.ones_like(d)) ** p
        return -(a * torch.where(positive, powered, torch.zeros_like(powered))).sum(-1)


@register_pos_encoding('fire')
class FIRE(DistanceBias):
    """FIRE on patch grids: ``b_h(i, j) = f_h(psi(d) / psi(max(L, r_i)))``, ``psi(x) = log(c x + 1)``.

    ``f`` is an MLP ``1 -> hidden_dim -> num_heads`` (ReLU), ``c`` and the threshold ``L`` are learned scalars (used as
    ``|c|``, ``|L|``), ``r_i`` the query's reach (module docstring). Initial values (the paper learns both): ``c = 1``
    and ``L`` = the training grid's largest distance, so on the training grid every query is normalised by the same
    ``psi(L)`` and a larger grid's far queries are squeezed into the trained input range.

    Args:
        hidden_dim: the MLP's hidden width (32 as in the paper).
        init_c: initial ``c``.
        init_threshold: initial ``L`` in patches; default the training grid's largest distance.
        num_heads, depth, grid_size, distance, axis_scale, random_positions, query_block, block_above: see
            :class:`DistanceBias` (FIRE has only ``convention='paper'``).

    Parameters: ``c``, ``threshold`` (scalars), ``mlp.0`` (Linear 1 -> hidden), ``mlp.2`` (Linear hidden -> heads,
    bias initialised to 0); ``c`` and ``threshold`` get no weight decay.
    """
    family = 'FIRE (learned function of log distance, progressive interpolation)'
    adaptation = ('distances recomputed on the new grid and normalised by each query\'s reach (progressive '
                  'interpolation into the trained range)')
    uses_reach = True

    def __init__(self, num_heads: int, depth: int, grid_size: Optional[Tuple[int, ...]] = None,
                 distance: str = 'euclidean', axis_scale: Optional[Sequence[float]] = None, convention: str = 'paper',
                 random_positions: Any = None, query_block: int = 1024, block_above: Optional[int] = 2048,
                 hidden_dim: int = 32, init_c: float = 1.0, init_threshold: Optional[float] = None):
        if hidden_dim < 1 or not init_c > 0 or (init_threshold is not None and not init_threshold > 0):
            raise ValueError(f'fire needs hidden_dim >= 1, init_c > 0 and init_threshold > 0, got {hidden_dim}, '
                             f'{init_c}, {init_threshold}')
        self._fire_init = (int(hidden_dim), float(init_c), init_threshold)
        super().__init__(num_heads, depth, grid_size, distance, axis_scale, convention, random_positions,
                         query_block, block_above)

    def _init_params(self) -> None:
        hidden_dim, self.init_c, init_threshold = self._fire_init
        grid = self.grid_size if self.video else (1, *self.grid_size)
        extents = [(grid[a] - 1) * s for a, s in zip(self.axes, self.axis_scale)]
        default = math.sqrt(sum(e * e for e in extents)) if self.distance == 'euclidean' else max(extents)
        self.init_threshold = float(init_threshold or max(default, 1.0))
        self.c = nn.Parameter(torch.empty(()))
        self.threshold = nn.Parameter(torch.empty(()))
        self.mlp = nn.Sequential(nn.Linear(1, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, self.num_heads))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``c`` and ``L`` to their initial values, the MLP to PyTorch's default with a zero output bias."""
        with torch.no_grad():
            self.c.fill_(self.init_c)
            self.threshold.fill_(self.init_threshold)
        self.mlp[0].reset_parameters()
        self.mlp[2].reset_parameters()
        nn.init.zeros_(self.mlp[2].bias)
        self._cache.clear()

    def params(self) -> Tuple[torch.Tensor, ...]:
        return (self.c.float(), self.threshold.float(), self.mlp[0].weight.float(), self.mlp[0].bias.float(),
                self.mlp[2].weight.float(), self.mlp[2].bias.float())

    def kernel(self, coords_q, coords_k, reach_q, c, threshold, w1, b1, w2, b2):
        d = self.distances(coords_q, coords_k)                                   # (B, Lq, Lk, K)
        c = c.abs()
        norm = torch.log1p(c * torch.maximum(reach_q, threshold.abs())).clamp(min=1e-6)  # (B, Lq, K)
        u = torch.log1p(c * d) / norm[:, :, None, :]
        hidden = F.relu(u[..., None] * w1[:, 0] + b1)                             # (B, Lq, Lk, K, hidden)
        return F.linear(hidden, w2, b2).sum(-2).permute(0, 3, 1, 2)               # (B, H, Lq, Lk)

    def no_weight_decay(self) -> set:
        return {'c', 'threshold'}
