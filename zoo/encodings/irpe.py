"""iRPE: image relative position encoding, in bias and contextual modes, on queries, keys and values.

Paper: "Rethinking and Improving Relative Position Encoding for Vision Transformer" (Wu et al., ICCV 2021,
arXiv:2107.14222). Section numbers below refer to that paper.

The relative position of a (query i, key j) pair is the 2D offset ``(dr, dc) = (row_i - row_j, col_i - col_j)`` in
patches (query minus key, as the official code computes it). A 2D *method* maps it, through the piecewise index
function ``g`` (Sec. 3.2, Eq. 18), to an integer *bucket*. Each bucket owns a learned encoding in a lookup table:

* ``bias`` mode (Sec. 3.1, Eq. 8): a scalar per bucket (and per head unless ``shared_head``), added to the logits.
* ``contextual`` mode (Eq. 11-13): a ``head_dim`` vector per bucket. On keys it adds ``q_i . r_k[b(i, j)]`` to the
  logits, on queries ``k_j . r_q[b(j, i)]`` (keys scaled, bucket table transposed), and on values it adds
  ``sum_j p_ij r_v[b(i, j)]`` to the attention output.

The contextual term is computed in the efficient form of Sec. 3.3: project each query on the whole table once,
``(B, H, L, num_buckets)``, then gather one entry per pair. Per-pair embeddings ``(B, H, L, L, D)`` are never
built. The value term scatters the attention weights into buckets ``(B, H, L, num_buckets)`` and multiplies by the
value table.

Videos (``grid_size=(T', H', W')``): the relative position is the 3D offset ``(dt, dr, dc)`` in tubelets and patches.
``product`` buckets become ``((g(dt) + b) K + g(dr) + b) K + g(dc) + b`` with ``K = 2 b + 1`` and ``b = int(beta)``
(``K^3`` buckets; the image buckets are the ``dt = 0`` slice), ``euclidean`` and ``quant`` use the 3D distance, and
``cross`` gets a third module ``rp_time`` on ``dt``. More frames or a bigger frame recompute the bucket ids; with ratio
1.9 every axis saturates at ``|offset| >= 4``, so larger grids reuse the trained buckets.

Prefix tokens (the class token) are not on the grid: every pair in which one of the first ``skip`` tokens is the query
or the key uses one extra bucket, the last id. Bucket ids depend only on ``(H, W)`` and the config, so they are
cached per ``(H, W, config, device)`` outside the state_dict.

Conventions that the released DeiT-iRPE checkpoints depend on (the official code departs from the paper's text
here, and this module follows the code):

* ``euclidean`` rounds the float32 ``sqrt(dr^2 + dc^2)`` before ``g``;
* ``quant`` applies ``g`` to ``dr^2 + dc^2`` directly (no square root, no rank quantisation);
* ``cross`` is two modules, ``rp_rows`` (on ``dr``) and ``rp_cols`` (on ``dc``), each with its own table of
  ``2*int(beta) + 1`` (+1 class) buckets; their terms are summed;
* for every method except ``product`` the bucket is ``g(.) + int(beta)``, so ``euclidean`` and ``quant`` (whose
  argument is never negative) use only the upper half of their tables;
* tables: bias ``(H', K)``, q/k contextual ``(H', D, K)``, v contextual ``(H', K, D)``, ``H' = 1`` if shared;
* tables start at zero.
"""
from __future__ import annotations

import functools
import math
import re
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ._cache import TableCache, caching_allowed
from ._grid import parse_grid_size
from .absolute import LearnedAPE
from .base import AttnTerm, Positions, PosEncoding
from .checkpoint import CheckpointMismatchError
from .registry import register_pos_encoding

__all__ = [
    'IRPE', 'IRPELayer', 'IRPETable', 'IRPECross', 'IRPEAttnTerm', 'ProductDigits', 'piecewise_index',
    'irpe_bucket_ids', 'irpe_num_buckets', 'irpe_coefficients',
]

_METHOD_ALIASES = {'euclidean': 'euclidean', 'euc': 'euclidean', 'quant': 'quant', 'cross': 'cross',
                   'product': 'product'}
_MODE_ALIASES = {'bias': 'bias', 'contextual': 'contextual', 'ctx': 'contextual'}
# Bucket functions: every method, with cross split into its row and column (and, on videos, time) parts.
_PARTS = ('euclidean', 'quant', 'product', 'cross_rows', 'cross_cols', 'cross_time')
# Official DeiT-iRPE checkpoints keep the tables in the attention of each block.
_DEIT_RPE_KEY = re.compile(r'^blocks\.(\d+)\.attn\.(rpe_[qkv]\..+)$')


def irpe_coefficients(ratio: float) -> Tuple[float, float, float]:
    """The piecewise-function coefficients ``(alpha, beta, gamma) = (ratio, 2 * ratio, 8 * ratio)`` (official)."""
    return 1 * ratio, 2 * ratio, 8 * ratio


@torch.no_grad()
def piecewise_index(x: torch.Tensor, alpha: float, beta: float, gamma: float) -> torch.Tensor:
    """The piecewise index function ``g`` (Sec. 3.2, Eq. 18), as the official code evaluates it.

    ``g(x) = round(x)`` when ``|x| <= alpha``; otherwise
    ``sign(x) * min(round(alpha + ln(|x| / alpha) / ln(gamma / alpha) * (beta - alpha)), beta)``, then truncated to an
    integer, so ``|g| <= int(beta)``. Rounding is half to even (``torch.round``). The logarithmic branch is evaluated
    in float32 (or float64 for float64 input), in the same operation order as the official code, so bucket ids match
    it bit for bit.

    Args:
        x: relative positions or distances, any shape, integer or floating dtype.
        alpha: end of the exact (linear) range.
        beta: saturation value.
        gamma: the ``|x|`` at which the logarithmic branch would reach ``beta`` before rounding.

    Returns:
        int64 tensor of ``x``'s shape with values in ``[-int(beta), int(beta)]``.
    """
    if x.is_floating_point():
        out = x.round().long()
    else:
        out = x.long().clone()
    xf = x if x.is_floating_point() else x.float()
    xa = xf.abs()
    # evaluated everywhere and selected (no data-dependent branch, so it traces, compiles and exports)
    mag = (alpha + torch.log(xa.clamp_min(alpha) / alpha) / math.log(gamma / alpha) * (beta - alpha)).round()
    far = (torch.sign(xf) * mag.clip(max=beta)).long()
    return torch.where(xa > alpha, far, out)


def irpe_num_buckets(method: str, ratio: float, skip: int = 0, num_axes: int = 2) -> int:
    """Number of buckets (table columns) of one table: ``(2*int(beta)+1)**num_axes`` for product (``num_axes`` 2 for
    images, 3 for videos), else ``2*int(beta)+1``.

    ``cross`` counts one of its tables. One extra bucket (the last id) is added when ``skip > 0``.
    """
    beta_int = int(irpe_coefficients(ratio)[1])
    n = (2 * beta_int + 1) ** num_axes if method == 'product' else 2 * beta_int + 1
    return n + (1 if skip > 0 else 0)


@torch.no_grad()
def irpe_bucket_ids(method: str, height: int, width: int, ratio: float, skip: int = 0,
                    device: Optional[torch.device] = None, frames: Optional[int] = None) -> torch.Tensor:
    """Bucket id of every (query, key) pair of a ``height x width`` grid (``frames x height x width`` for videos)
    plus ``skip`` leading prefix tokens.

    Patch token ``skip + (t * height + r) * width + c`` sits at ``(t, r, c)`` (t-major, row-major). Offsets are query
    minus key. The ids are computed on the CPU (deterministic float32 arithmetic) and then moved to ``device``.

    Args:
        method: ``'product'``, ``'euclidean'``, ``'quant'``, ``'cross_rows'``, ``'cross_cols'`` or (videos)
            ``'cross_time'`` (cross is the sum of its parts, each with its own ids).
        height: grid rows H in patches.
        width: grid columns W in patches.
        ratio: iRPE ratio; ``alpha, beta, gamma = ratio, 2 * ratio, 8 * ratio``.
        skip: number of prefix tokens; all their pairs map to the extra last bucket ``irpe_num_buckets(...) - 1``.
        device: where to put the result (default CPU).
        frames: ``None`` for the 2D (image) buckets; the number of tubelets T for the 3D buckets over
            ``(dt, dr, dc)`` (product: ``K^3`` buckets, ``K = 2 int(beta) + 1``, time the most significant digit).

    Returns:
        int64 tensor ``(skip + N, skip + N)``, ``N = [T *] H * W``; entry ``[i, j]`` is the bucket of query ``i`` and
        key ``j``.

    Raises:
        ValueError: unknown ``method``, ``'cross_time'`` without ``frames``, or a non-positive grid.
    """
    if method not in _PARTS:
        raise ValueError(f'unknown iRPE bucket method {method!r}; choose one of {list(_PARTS)} '
                         f'(cross is split into cross_rows, cross_cols and, on videos, cross_time)')
    if method == 'cross_time' and frames is None:
        raise ValueError("iRPE 'cross_time' buckets are the time part of a video grid; pass frames=T")
    if height < 1 or width < 1 or (frames is not None and frames < 1):
        raise ValueError(f'iRPE needs a positive grid, got frames={frames}, height={height}, width={width}')
    alpha, beta, gamma = irpe_coefficients(ratio)
    beta_int = int(beta)
    t = 1 if frames is None else frames
    # Every bucket function depends on the per-axis offsets only: evaluate it on the few distinct offsets (or squared
    # distances) and gather, instead of running g on (N, N) tensors.
    # (broadcast + reshape rather than repeat_interleave with a symbolic count, which ONNX Runtime ran with the
    # wrong length after the dynamo exporter: 'broadcast ... 14 by 196' at ViT-Ti/224)
    def along(axis: int, size: int) -> torch.Tensor:
        shape = [1, 1, 1]
        shape[axis] = size
        return torch.arange(size).view(shape).expand(t, height, width).reshape(-1)
    axes = [(along(1, height), height),   # row of every token
            (along(2, width), width)]     # column
    if frames is not None:
        axes.append((along(0, t), t))     # tubelet

    def pairwise(axis: int, fn) -> torch.Tensor:
        """``fn(offset)`` for the (query - key) offset along ``axis`` of every pair, ``(N, N)``."""
        idx, size = axes[axis]
        lut = fn(torch.arange(-(size - 1), size))
        return lut[idx[:, None] - idx[None, :] + (size - 1)]

    def bucket(x: torch.Tensor) -> torch.Tensor:
        return piecewise_index(x, alpha, beta, gamma) + beta_int

    if method == 'product':
        k = 2 * beta_int + 1
        ids = pairwise(0, bucket) * k + pairwise(1, bucket)
        if frames is not None:
            ids = ids + pairwise(2, bucket) * (k * k)
    elif method in ('euclidean', 'quant'):
        sq = sum(pairwise(a, lambda d: d * d) for a in range(len(axes)))
        values = torch.arange(sum((size - 1) ** 2 for _, size in axes) + 1)
        lut = bucket(values.float().sqrt().round() if method == 'euclidean' else values)
        ids = lut[sq]
    else:
        ids = pairwise(('cross_rows', 'cross_cols', 'cross_time').index(method), bucket)
    if skip > 0:
        n = skip + t * height * width
        num_axes = 2 if frames is None else 3
        full = torch.full((n, n), irpe_num_buckets(method, ratio, skip=0, num_axes=num_axes), dtype=torch.long)
        full[skip:, skip:] = ids
        ids = full
    return ids.contiguous().to(device) if device is not None else ids.contiguous()


class ProductDigits:
    """The ``product`` buckets of a grid without prefix tokens, kept per axis: the digit of every (query, key)
    coordinate pair along time, rows and columns, ``(T, T)``, ``(R, R)``, ``(C, C)``, instead of the ``(L, L)`` ids
    (for a 16 x 224^2 video: a few hundred bytes instead of 19.7 MB of int64).

    :meth:`IRPETable.logits_separable` uses them for one block of queries at a time; the bucket of a pair is
    ``(t_digit K + r_digit) K + c_digit`` (images: ``r_digit K + c_digit``), as :func:`irpe_bucket_ids` builds it.

    Args:
        frames: T for the 3D buckets of a video, None for images.
        height, width: R, C.
        ratio: iRPE ratio.
        device: where the index tensors live.
    """

    def __init__(self, frames: Optional[int], height: int, width: int, ratio: float, device: torch.device):
        alpha, beta, gamma = irpe_coefficients(ratio)
        beta_int = int(beta)
        self.k = 2 * beta_int + 1
        self.video = frames is not None
        t = frames if self.video else 1
        self.rows, self.cols = height, width

        def digits(n: int) -> torch.Tensor:  # [i, j]: digit of the offset i - j (query minus key)
            offset = torch.arange(n)[:, None] - torch.arange(n)[None, :]
            return (piecewise_index(offset, alpha, beta, gamma) + beta_int).to(device)
        self.lut_t = digits(t) if self.video else None
        self.lut_r, self.lut_c = digits(height), digits(width)
        tok = torch.arange(t * height * width, device=device)
        self.tok_t, self.tok_r, self.tok_c = tok // (height * width), (tok // width) % height, tok % width
        # per query, built once here (before any forward's transient buffers, so they do not pin heap memory between
        # them): the column digit of every key column (L, C) and the (time, row) digit pair of every key row (L, T R)
        self._cols = self.lut_c[self.tok_c]
        row_digit = self.lut_r[self.tok_r]  # (L, R)
        self._hi = ((self.lut_t[self.tok_t][:, :, None] * self.k + row_digit[:, None, :]).flatten(1) if self.video
                    else row_digit)

    def block_index(self, start: int, stop: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """For the queries ``start:stop`` (``Lq`` of them): the column digit of every (query, key column) ``(Lq, C)``
        (a view) and, for every (query, key frame, key row), the row of the query's ``(Lq * K^(n-1), C)``
        column-gathered projection that holds its keys, flattened ``(Lq * T * R,)``."""
        hi = self._hi[start:stop]
        local = torch.arange(stop - start, device=hi.device)  # the query's row block in the block's projection
        return self._cols[start:stop], (hi + (local * self.k ** (2 if self.video else 1))[:, None]).reshape(-1)


class IRPETable(nn.Module):
    """One iRPE lookup table (one side q/k/v, one bucket function).

    Args:
        side: ``'q'``, ``'k'`` or ``'v'``.
        mode: ``'bias'`` or ``'contextual'``.
        part: bucket function, see :func:`irpe_bucket_ids`.
        num_heads: table heads ``H'`` (1 when shared across heads).
        head_dim: D.
        num_buckets: K, including the class bucket when ``skip > 0``.

    Parameters (float, zero-initialised as in the official code):
        ``lookup_table_bias`` ``(H', K)`` in bias mode;
        ``lookup_table_weight`` ``(H', D, K)`` for contextual q/k, ``(H', K, D)`` for contextual v.
    """

    def __init__(self, side: str, mode: str, part: str, num_heads: int, head_dim: int, num_buckets: int):
        super().__init__()
        self.side, self.mode, self.part = side, mode, part
        self.num_heads, self.head_dim, self.num_buckets = num_heads, head_dim, num_buckets
        if mode == 'bias':
            self.lookup_table_bias = nn.Parameter(torch.zeros(num_heads, num_buckets))
        elif side == 'v':
            self.lookup_table_weight = nn.Parameter(torch.zeros(num_heads, num_buckets, head_dim))
        else:
            self.lookup_table_weight = nn.Parameter(torch.zeros(num_heads, head_dim, num_buckets))

    def reset_parameters(self) -> None:
        """Zeros, as the official code (the model starts without a relative term)."""
        for p in self.parameters(recurse=False):
            nn.init.zeros_(p)

    def logits(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Additive logits ``[b, h, i, j]`` indexed by the token that owns ``x`` first.

        Args:
            x: the scaled queries (k side) or scaled keys (q side) ``(B, H, Lq, D)``; unused in bias mode.
            ids: bucket ids ``(B or 1, Lq, Lk)`` int64 (``Lq < Lk`` for a block of queries).

        Returns:
            ``(B or 1, H', Lq, Lk)`` (bias) or ``(B, H, Lq, Lk)`` (contextual); entry ``[n, ..., a, c]`` uses bucket
            ``ids[n, a, c]``.
        """
        if self.mode == 'bias':
            return self.lookup_table_bias[:, ids].transpose(0, 1)
        proj = torch.matmul(x, self.lookup_table_weight)  # (B, H, Lq, K): every query against every bucket
        b, h = proj.shape[:2]
        return torch.gather(proj, -1, ids.unsqueeze(1).expand(b, h, ids.shape[-2], ids.shape[-1]))

    def logits_separable(self, x: torch.Tensor, sep: 'ProductDigits', start: int, stop: int) -> torch.Tensor:
        """``logits(x, ids[:, start:stop])`` for the ``product`` method without prefix tokens and without the
        ``(Lq, Lk)`` bucket ids (contextual mode), for the block of queries ``start:stop``.

        The bucket of a pair is ``(dt_digit K + dr_digit) K + dc_digit`` (video; images have no time digit), each digit
        a function of one axis' offset, so a query's logit row over the key grid ``(T, R, C)`` is its projection
        ``(K, K, K)`` indexed axis by axis: the column digit first (a gather of ``K^2 x C`` entries per query instead of
        ``L``), then whole key rows of ``C`` entries picked by the (time, row) digits. The same entries as the gather
        over the ids, copied, never recomputed (equal bit for bit).

        Args:
            x: the scaled queries of the block ``(B, H, Lq, D)``.
            sep: the grid's per-axis digits (:meth:`IRPE.product_digits`).
            start, stop: the block's query tokens.

        Returns:
            ``(B, H, Lq, Lk)``.
        """
        proj = torch.matmul(x, self.lookup_table_weight)  # (B, H, Lq, K^n): every query against every bucket
        b, h, n = proj.shape[:3]
        k, c = sep.k, sep.cols
        hi = proj.shape[-1] // k  # the (time, row) digit pairs
        cols, rows = sep.block_index(start, stop)  # (Lq, C) column digits; (Lq * T * R,) row picks
        per_col = torch.gather(proj.reshape(b * h, n, hi, k), -1, cols[None, :, None].expand(b * h, n, hi, c))
        out = per_col.reshape(b * h, n * hi, c).index_select(1, rows)
        return out.reshape(b, h, n, rows.numel() // n * c)  # explicit key count: an empty batch reshapes too

    def projection_t(self, x: torch.Tensor) -> torch.Tensor:
        """The q-side projection ``(B, H, K, Lk)`` of the scaled keys ``x`` ``(B, H, Lk, D)`` on every bucket
        (contextual mode), contiguous, for :meth:`logits_transposed`."""
        return torch.matmul(x, self.lookup_table_weight).transpose(-1, -2).contiguous()

    def logits_transposed(self, x: torch.Tensor, ids_t: torch.Tensor,
                          proj_t: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``logits(x, ids)`` transposed on its last two axes, built directly in ``[i, j]`` order (q side).

        Entry ``[..., i, j]`` uses the table of token ``j`` (the scaled key) at bucket ``ids[j, i]``. Gathering along
        the bucket axis of the transposed projection avoids adding a transposed ``(B, H, L, L)`` tensor, which is
        about twice as slow on CPU.

        Args:
            x: scaled keys ``(B, H, Lk, D)``; unused in bias mode.
            ids_t: transposed bucket ids ``ids.transpose(-1, -2)`` ``(B or 1, Lq, Lk)`` int64, contiguous (the rows
                of a block of queries: ``ids_t[:, start:stop]``).
            proj_t: :meth:`projection_t` of ``x`` when the caller already has it (one per layer for all blocks).

        Returns:
            ``(B or 1, H', Lq, Lk)`` (bias) or ``(B, H, Lq, Lk)`` (contextual).
        """
        if self.mode == 'bias':
            return self.lookup_table_bias[:, ids_t].transpose(0, 1)
        if proj_t is None:
            proj_t = self.projection_t(x)  # (B, H, K, Lk)
        b, h = proj_t.shape[:2]
        return torch.gather(proj_t, -2, ids_t.unsqueeze(1).expand(b, h, ids_t.shape[-2], ids_t.shape[-1]))

    def values(self, attn: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Value term ``out[b, h, i] = sum_j attn[b, h, i, j] * table[bucket(i, j)]`` ``(B, H, L, D)``."""
        b, h, n, _ = attn.shape
        per_bucket = attn.new_zeros(b, h, n, self.num_buckets).scatter_add_(-1, ids.unsqueeze(1).expand(b, h, n, n),
                                                                            attn)
        return torch.matmul(per_bucket, self.lookup_table_weight.to(per_bucket.dtype))

    def extra_repr(self) -> str:
        return f'side={self.side}, mode={self.mode}, part={self.part}, heads={self.num_heads}, ' \
               f'head_dim={self.head_dim}, num_buckets={self.num_buckets}'


class IRPECross(nn.Module):
    """The ``cross`` method: ``rp_rows`` (row offsets) plus ``rp_cols`` (column offsets), and on videos ``rp_time``
    (tubelet offsets), one table each, summed."""

    def __init__(self, side: str, mode: str, num_heads: int, head_dim: int, num_buckets: int, num_axes: int = 2):
        super().__init__()
        self.rp_rows = IRPETable(side, mode, 'cross_rows', num_heads, head_dim, num_buckets)
        self.rp_cols = IRPETable(side, mode, 'cross_cols', num_heads, head_dim, num_buckets)
        if num_axes == 3:
            self.rp_time = IRPETable(side, mode, 'cross_time', num_heads, head_dim, num_buckets)
        else:
            self.rp_time = None

    def tables(self) -> List[IRPETable]:
        return [self.rp_rows, self.rp_cols] + ([self.rp_time] if self.rp_time is not None else [])


class IRPELayer(nn.Module):
    """The iRPE modules of one attention layer: ``rpe_q``, ``rpe_k``, ``rpe_v`` (each a table, a cross pair or None)."""

    def __init__(self, rpe_on: str, method: str, mode: str, num_heads: int, head_dim: int, num_buckets: int,
                 num_axes: int = 2):
        super().__init__()
        for side in 'qkv':
            module = None
            if side in rpe_on:
                if method == 'cross':
                    module = IRPECross(side, mode, num_heads, head_dim, num_buckets, num_axes)
                else:
                    module = IRPETable(side, mode, method, num_heads, head_dim, num_buckets)
            setattr(self, f'rpe_{side}', module)

    def tables(self, side: str) -> List[IRPETable]:
        module = getattr(self, f'rpe_{side}')
        if module is None:
            return []
        return module.tables() if isinstance(module, IRPECross) else [module]


def _accumulate(out: Optional[torch.Tensor], t: torch.Tensor) -> torch.Tensor:
    """``out + t``, in place where ``out`` (a fresh gather / index result, never a parameter) already has the
    broadcast shape: one pass over the ``(B, H, Lq, Lk)`` logits instead of a new tensor."""
    if out is None:
        return t
    return out.add_(t) if out.shape == torch.broadcast_shapes(out.shape, t.shape) else out + t


class IRPEAttnTerm(AttnTerm):
    """What one layer's iRPE adds to its attention, for one grid.

    ``bias`` returns the q and k terms as additive logits ``(B or 1, heads or 1, L, L)`` in the dtype of ``q``; the
    backbone passes them to ``F.scaled_dot_product_attention`` as ``attn_mask``. With iRPE on values the term declares
    ``needs_attn_weights`` and ``value_term`` adds the value encoding to ``attn @ v``.

    With ``query_block`` set (eager mode, many tokens, no value term: :class:`IRPE`'s ``block_above``) the attention
    asks :meth:`bias_rows` for one block of queries at a time, so the ``(B, H, L, L)`` bias never exists whole (59 MB
    per layer for a 16 x 224^2 video at ViT-S); the numbers are those of :meth:`bias`, row for row. With ``digits``
    (the ``product`` method on keys, contextual, no prefix tokens: :class:`ProductDigits`) the blocks are built from
    the per-axis digits and the ``(L, L)`` bucket ids are not built at all.

    Args:
        layer: the layer's tables.
        ids: ``{part: (B or 1, L, L) ids}`` (and ``part + '.t'``), or a callable returning them, called only when
            needed.
        num_tokens, grid, skip: the token layout the ids belong to.
        query_block: queries per block of the blocked path, or None.
        digits: the grid's :class:`ProductDigits` for the blocked path, or None.
    """

    def __init__(self, layer: IRPELayer, ids: Union[Dict[str, torch.Tensor], Callable[[], Dict[str, torch.Tensor]]],
                 num_tokens: int, grid: Tuple[int, ...], skip: int, query_block: Optional[int] = None,
                 digits: Optional[ProductDigits] = None):
        self.layer = layer
        self._ids = ids
        self.num_tokens = num_tokens
        self.grid = tuple(grid)
        self.skip = skip
        self.needs_attn_weights = layer.rpe_v is not None
        self.query_block = None if self.needs_attn_weights or query_block is None else int(query_block)
        self._proj_t = None  # (keys, [proj_t per q table]): the q side's projection, once per layer for all blocks
        self.digits = digits if self.query_block is not None else None

    @property
    def ids(self) -> Dict[str, torch.Tensor]:
        """The bucket ids ``{part: (B or 1, L, L)}`` (built on first use when given as a callable)."""
        if callable(self._ids):
            self._ids = self._ids()
        return self._ids

    def _check(self, n: int) -> None:
        if n != self.num_tokens:
            raise ValueError(f'iRPE got {n} tokens but the grid {"x".join(map(str, self.grid))} with skip={self.skip} '
                             f'has {self.num_tokens} ([T*]H*W + skip, or the kept patches + skip); pass the true patch '
                             f'grid in Positions and set skip to the number of prefix tokens')

    def bias(self, q: torch.Tensor, k: torch.Tensor, scale: float) -> Optional[torch.Tensor]:
        """Sum of the k-side and q-side terms.

        Args:
            q: queries ``(B, heads, L, head_dim)``, not scaled.
            k: keys, same shape.
            scale: the attention scale (``head_dim ** -0.5``); the official code scales q before the k-side term and
                k before the q-side term, and so does this.

        Returns:
            Additive logits ``(B|1, heads|1, L, L)`` in ``q.dtype``, or None when iRPE is only on values.
        """
        self._check(q.shape[-2])
        return self._rows(q, k, scale, None, None)

    def bias_rows(self, q: torch.Tensor, k: torch.Tensor, scale: float, start: int, stop: int) -> torch.Tensor:
        """Rows ``start:stop`` of :meth:`bias` ``(B|1, heads|1, stop - start, L)`` for the queries ``q`` of that block
        (``k``: every key). The q side's projection of the keys is computed once per layer, not per block."""
        self._check(k.shape[-2])
        return self._rows(q, k, scale, start, stop)

    def _rows(self, q: torch.Tensor, k: torch.Tensor, scale: float, start: Optional[int],
              stop: Optional[int]) -> Optional[torch.Tensor]:
        rows = slice(None) if start is None else slice(start, stop)
        out = None
        k_tables = self.layer.tables('k')
        if k_tables:
            qs = q * scale if k_tables[0].mode == 'contextual' else q
            for table in k_tables:
                if self.digits is not None and start is not None:
                    t = table.logits_separable(qs, self.digits, start, stop)
                else:
                    t = table.logits(qs, self.ids[table.part][:, rows])
                out = _accumulate(out, t)
        q_tables = self.layer.tables('q')
        if q_tables:
            contextual = q_tables[0].mode == 'contextual'
            projs = [None] * len(q_tables)
            if contextual and start is not None:  # blocks: the keys' projection once per layer
                if self._proj_t is None or self._proj_t[0] is not k:
                    ks = k * scale
                    self._proj_t = (k, [table.projection_t(ks) for table in q_tables])
                projs = self._proj_t[1]
            ks = k * scale if contextual and start is None else k
            for table, proj_t in zip(q_tables, projs):
                t = table.logits_transposed(ks, self.ids[table.part + '.t'][:, rows], proj_t)
                out = _accumulate(out, t)
        if start is not None and stop >= k.shape[-2]:
            self._proj_t = None  # the last block (queries are the last keys): let the projection go
        return None if out is None else out.to(q.dtype)

    def value_term(self, attn: torch.Tensor) -> Optional[torch.Tensor]:
        """Value encoding ``(B, heads, L, head_dim)`` from post-softmax weights ``attn`` ``(B, heads, L, L)``."""
        tables = self.layer.tables('v')
        if not tables:
            return None
        self._check(attn.shape[-1])
        out = None
        for table in tables:
            t = table.values(attn, self.ids[table.part])
            out = _accumulate(out, t)
        return out


def _tile_product_table(src: torch.Tensor, target: torch.Tensor, k: int) -> Optional[torch.Tensor]:
    """``src`` with ``k^2`` (+ class) entries along the one axis where it differs from ``target`` (``k^3`` + class)
    copied into every ``dt`` slice of ``target``'s shape; ``None`` unless the sizes are exactly those."""
    diff = [d for d in range(src.ndim) if src.shape[d] != target.shape[d]]
    if len(diff) != 1:
        return None
    ax = diff[0]
    src_skip, dst_skip = src.shape[ax] - k * k, target.shape[ax] - k ** 3
    if src_skip not in (0, 1) or dst_skip not in (0, 1):
        return None
    out = torch.zeros_like(target)
    plane = src.narrow(ax, 0, k * k)
    for dt in range(k):
        out.narrow(ax, dt * k * k, k * k).copy_(plane)
    if src_skip and dst_skip:
        out.narrow(ax, k ** 3, 1).copy_(src.narrow(ax, k * k, 1))
    return out


def _parse_rpe_on(rpe_on: Union[str, Iterable[str]]) -> str:
    sides = ''.join(rpe_on) if not isinstance(rpe_on, str) else rpe_on
    sides = sides.lower()
    bad = sorted(set(sides) - set('qkv'))
    if bad or not sides:
        raise ValueError(f'rpe_on={rpe_on!r} must be a non-empty combination of "q", "k" and "v" (e.g. "k", "qkv")')
    return ''.join(s for s in 'qkv' if s in sides)


@register_pos_encoding('irpe')
class IRPE(PosEncoding):
    """iRPE for a 2D ViT (Wu et al., ICCV 2021, arXiv:2107.14222), optionally with the DeiT learned APE.

    The official DeiT-iRPE models keep DeiT's learned absolute embedding and add iRPE in every block. ``ape=True``
    reproduces that layout (the embedding lives in ``ape.pos_embed``). With a video ``grid_size=(T', H', W')`` the
    buckets are 3D over (dt, dr, dc) (see the module docstring) and the optional APE is the 3D table of
    :class:`~zoo.encodings.absolute.LearnedAPE` (trilinear resampling, no prefix entries).

    Args:
        dim: embedding width C.
        num_heads: attention heads; ``head_dim = dim // num_heads``.
        depth: number of blocks; each gets its own tables.
        grid_size: training grid ``(H, W)`` in patches, or ``(T', H', W')`` for videos (3D buckets); sizes the APE, the
            iRPE tables do not depend on it otherwise.
        num_prefix_tokens: prefix tokens of the backbone (class + registers).
        ratio: iRPE ratio (paper's default 1.9): ``alpha, beta, gamma = ratio, 2 ratio, 8 ratio``.
        method: ``'product'``, ``'euclidean'`` (alias ``'euc'``), ``'quant'`` or ``'cross'``.
        mode: ``'contextual'`` (alias ``'ctx'``) or ``'bias'``.
        shared_head: one table shared by all heads (``H' = 1``) instead of one per head.
        skip: prefix tokens that get the extra class bucket; None means ``num_prefix_tokens``.
        rpe_on: where iRPE attaches, any combination of ``'q'``, ``'k'``, ``'v'`` (``'k'``, ``'qk'``, ``'qkv'``...).
        ape: also add the DeiT learned APE (``(1, num_prefix_tokens + H*W, C)``, trunc-normal std .02).
        query_block: at most this many queries per block when the attention computes the bias per block
            (``bias_rows``; the blocks as equal as possible). 256: at 16 x 224^2 (1568 tokens) 7 blocks of 224
            queries, 9.6 MB of bias per block at ViT-S (about 1.2x the sin-cos model's time and 1.1x its peak memory,
            docs/benchmarks; 128 was slower, 392 over the memory target).
        block_above: above this many tokens (eager mode, iRPE on q/k only) the attention computes the bias per block
            of ``query_block`` queries, so the ``(B, H, L, L)`` bias never exists whole (a 16 x 224^2 video at ViT-S:
            1568 tokens, 59 MB per layer); ``None`` never blocks. The numbers are the same either way. With the
            ``product`` method on keys only, contextual, and no prefix tokens (the video models), the blocks are
            built from per-axis digits (:class:`ProductDigits`) and the ``(L, L)`` bucket ids are never built.

    Parameters:
        ``layers.{i}.rpe_{q,k,v}.lookup_table_{weight,bias}`` (``...rpe_k.rp_rows.lookup_table_weight`` and
        ``rp_cols`` for cross); see :class:`IRPETable` for shapes. With ``ape``: ``ape.pos_embed``.

    Resolution: the bucket ids are recomputed (and cached) for every grid. With ``product`` and ratio 1.9, ``g``
    saturates at ``|dr|, |dc| >= 4``, so any grid larger than 4x4 uses exactly the buckets a 14x14 model was trained
    with. For ``euclidean``, ``quant`` and ``cross`` the table size is fixed by ``beta`` too, but a larger grid
    produces larger offsets: with a large ratio (e.g. 20 on a 14x14 training grid) they land on buckets that no
    training pair ever used. Those columns keep their initial value, zero, so such pairs receive no positional term
    (bias 0, contextual 0, value 0) rather than an error; offsets from about ``gamma`` on (for ``quant``: squared
    distances) all share the outermost (saturated) bucket. The APE is resampled bicubically.

    Raises:
        ValueError: unknown ``method`` or ``mode``, ``mode='bias'`` with v in ``rpe_on``, a bad ``rpe_on``, ``dim``
            not divisible by ``num_heads``, ``query_block < 1``, or (at forward) a token count different from
            ``H*W + skip``.
    """
    family = 'iRPE (relative, 2D)'
    adaptation = 'bucket ids recomputed for the new grid (product 1.9 saturates at |offset| >= 4); APE resampled'

    def __init__(self, dim: int, num_heads: int, depth: int, grid_size: Tuple[int, ...], num_prefix_tokens: int = 1,
                 ratio: float = 1.9, method: str = 'product', mode: str = 'contextual', shared_head: bool = True,
                 skip: Optional[int] = None, rpe_on: Union[str, Sequence[str]] = 'k', ape: bool = True,
                 query_block: int = 256, block_above: Optional[int] = 1024):
        super().__init__()
        if int(query_block) < 1:
            raise ValueError(f'irpe: query_block must be >= 1, got {query_block}')
        self.query_block = int(query_block)
        self.block_above = None if block_above is None else int(block_above)
        if method not in _METHOD_ALIASES:
            raise ValueError(f'unknown iRPE method {method!r}; choose one of {sorted(_METHOD_ALIASES)}')
        if mode not in _MODE_ALIASES:
            raise ValueError(f'unknown iRPE mode {mode!r}; choose "contextual" (alias "ctx") or "bias"')
        self.method = _METHOD_ALIASES[method]
        self.mode = _MODE_ALIASES[mode]
        self.rpe_on = _parse_rpe_on(rpe_on)
        if self.mode == 'bias' and 'v' in self.rpe_on:
            raise ValueError(f'iRPE bias mode is not defined on values (rpe_on={rpe_on!r}); use mode="contextual" '
                             f'or drop "v" from rpe_on')
        if dim % num_heads:
            raise ValueError(f'dim={dim} is not divisible by num_heads={num_heads}')
        if ratio <= 0:
            raise ValueError(f'iRPE ratio must be positive, got {ratio}')
        self.skip = num_prefix_tokens if skip is None else int(skip)
        if not 0 <= self.skip <= num_prefix_tokens:
            raise ValueError(f'skip must be between 0 and the number of prefix tokens ({num_prefix_tokens}), got '
                             f'{skip}; the registered iRPE models use skip=1 with the class token (class_token=True, '
                             f'reg_tokens=0)')
        self.ratio = float(ratio)
        self.shared_head = bool(shared_head)
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.video = len(parse_grid_size('irpe', grid_size)) == 3
        num_axes = 3 if self.video else 2
        if self.video:
            self.family = 'iRPE (relative, 3D)'
            self.adaptation = ('bucket ids recomputed for the new (T, H, W) grid (product 1.9 saturates at |offset| >= '
                               '4 per axis); APE resampled trilinearly')
        self.num_buckets = irpe_num_buckets(self.method, self.ratio, self.skip, num_axes)
        table_heads = 1 if self.shared_head else num_heads
        self.ape = LearnedAPE(dim, grid_size=grid_size, num_prefix_tokens=num_prefix_tokens) if ape else None
        self.layers = nn.ModuleList([
            IRPELayer(self.rpe_on, self.method, self.mode, table_heads, self.head_dim, self.num_buckets, num_axes)
            for _ in range(depth)])
        cross = ('cross_rows', 'cross_cols', 'cross_time')[:num_axes]
        self._parts = cross if self.method == 'cross' else (self.method,)
        self._buckets = TableCache(max_entries=16)  # plain attribute: never in the state_dict

    def extra_repr(self) -> str:
        return f'method={self.method}, mode={self.mode}, ratio={self.ratio}, rpe_on={self.rpe_on!r}, ' \
               f'shared_head={self.shared_head}, skip={self.skip}, num_buckets={self.num_buckets}'

    def bucket_ids(self, grid: Tuple[int, ...], device: torch.device) -> Dict[str, torch.Tensor]:
        """Cached bucket ids for grid ``(H, W)`` (images) or ``(T, H, W)`` (video models) on ``device``.

        Returns:
            ``{part: ids}`` with ``ids`` ``(skip + N, skip + N)`` int64, plus ``{part + '.t': ids.t()}``
            (contiguous) when iRPE is on queries.
        """
        frames = grid[0] if len(grid) == 3 else None  # no int(): sizes stay symbolic under torch.export
        h, w = grid[-2], grid[-1]

        def build():
            out = {}
            for part in self._parts:
                out[part] = irpe_bucket_ids(part, h, w, self.ratio, self.skip, device, frames=frames)
                if 'q' in self.rpe_on:
                    out[part + '.t'] = out[part].t().contiguous()
            return out
        return self._buckets.get((frames, h, w, self.method, self.ratio, self.skip, self.rpe_on, str(device)), build)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        return x if self.ape is None else self.ape.embed(x, pos)

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> List[IRPEAttnTerm]:
        if pos.grid is None:
            raise ValueError('iRPE needs a patch grid (Positions.grid), not explicit ids')
        if not self.video and pos.grid[0] != 1:
            raise ValueError(f'this iRPE is 2D (built with an (H, W) grid_size) and needs a (1, H, W) patch grid, got '
                             f'grid={pos.grid}; build it with a (T, H, W) grid_size for videos')
        grid = tuple(pos.grid) if self.video else pos.hw
        if pos.num_prefix_tokens != self.skip:
            raise ValueError(f'iRPE skip={self.skip} but the input has {pos.num_prefix_tokens} prefix tokens, so the '
                             f'token count {pos.num_tokens} is not [T*]H*W + skip = {pos.num_patches + self.skip}; '
                             f'build with skip={pos.num_prefix_tokens} (or leave skip=None)')
        block = None
        if self.block_above is not None and caching_allowed() and pos.num_tokens > self.block_above:
            block = self.query_block  # eager only: sizes are Python ints there
        digits = None
        if (block is not None and self.method == 'product' and self.mode == 'contextual' and self.skip == 0
                and self.rpe_on == 'k' and not pos.is_subset):
            # the blocked path builds its rows from per-axis digits: the (L, L) ids are never built
            digits = self.product_digits(grid, device)

        def ids() -> Dict[str, torch.Tensor]:
            full = self.bucket_ids(grid, device)
            if pos.is_subset:  # per-sample rows and columns of the full-grid ids
                out = {part: pos.select(v.unsqueeze(0), 1, dims=(2,)) for part, v in full.items()
                       if not part.endswith('.t')}
                out.update({part + '.t': v.transpose(-1, -2).contiguous() for part, v in list(out.items())
                            if 'q' in self.rpe_on})
                return out
            return {part: v.unsqueeze(0) for part, v in full.items()}
        # with digits the ids are built only if some caller asks for them (bias() of a whole layer), once for all layers
        shared = ids() if digits is None else functools.lru_cache(maxsize=None)(ids)
        return [IRPEAttnTerm(layer, shared, pos.num_tokens, grid, self.skip, block, digits) for layer in self.layers]

    def product_digits(self, grid: Tuple[int, ...], device: torch.device) -> ProductDigits:
        """Cached :class:`ProductDigits` of grid ``(H, W)`` or ``(T, H, W)`` on ``device`` (``product`` method)."""
        frames = grid[0] if len(grid) == 3 else None
        return self._buckets.get(('digits', frames, grid[-2], grid[-1], self.ratio, str(device)),
                                 lambda: ProductDigits(frames, grid[-2], grid[-1], self.ratio, device))

    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        if self.ape is not None:
            self.ape.set_grid_size(grid_size)

    def map_checkpoint(self, layout: str, state_dict: Dict[str, torch.Tensor],
                       prefix: str = '') -> Dict[str, torch.Tensor]:
        """Official DeiT-iRPE (Wu et al., https://github.com/wkcn/iRPE-model-zoo): ``blocks.N.attn.rpe_X.*`` ->
        ``layers.N.rpe_X.*`` (same shapes: moved, never changed); DeiT's ``pos_embed`` goes to ``ape`` (resampled
        when the grids differ). Other layouts: the APE only. See :meth:`PosEncoding.map_checkpoint`.

        Raises:
            CheckpointMismatchError: the checkpoint has a learned APE and this encoding none, or iRPE on other sides
                (q, k, v) than this encoding.
        """
        if layout != 'deit_irpe':
            return super().map_checkpoint(layout, state_dict, prefix)
        out: Dict[str, torch.Tensor] = {}
        sides = set()
        for k in list(state_dict):
            m = _DEIT_RPE_KEY.match(k)
            if m:
                out[f'{prefix}layers.{m.group(1)}.{m.group(2)}'] = state_dict.pop(k)
                sides.add(m.group(2)[len('rpe_')])
        if 'pos_embed' in state_dict and self.ape is None:
            raise CheckpointMismatchError(
                'the DeiT-iRPE checkpoint has a learned APE (pos_embed) but the model has none; build it with '
                "pe='irpe' and pe_kwargs ape=True (the default of the registered irpe models)")
        sides_ckpt = ''.join(s for s in 'qkv' if s in sides)
        sides_model = self.rpe_on if len(self.layers) else ''
        if sides_ckpt != sides_model:
            raise CheckpointMismatchError(
                f'the checkpoint has iRPE on {sides_ckpt!r} but the model on {sides_model!r}; build the model with '
                f'pe_kwargs rpe_on={sides_ckpt!r} (e.g. the *_irpe_qkv_* model for a qkv checkpoint)')
        out.update(super().map_checkpoint(layout, state_dict, prefix))
        return out

    def inflate_param(self, name: str, image_value: Optional[torch.Tensor], target: torch.Tensor,
                      image_grid: Tuple[int, int], prefix: str = '') -> Optional[torch.Tensor]:
        """A ``product`` lookup table with ``K^2`` (+ class) buckets -> ``K^3`` (+ class): the image buckets are the
        ``dt = 0`` slice of the video's ``(dt, dr, dc)`` buckets, and every ``dt`` slice starts as the image table
        (time the most significant digit of the bucket id; time-agnostic at first); the class bucket is kept when
        both have one. See :meth:`PosEncoding.inflate_param`."""
        tiled = None
        if image_value is not None and 'lookup_table' in name and self.method == 'product' and \
                image_value.ndim == target.ndim and tuple(image_value.shape) != tuple(target.shape):
            tiled = _tile_product_table(image_value, target, 2 * int(irpe_coefficients(self.ratio)[1]) + 1)
        if tiled is not None:
            return tiled
        return super().inflate_param(name, image_value, target, image_grid, prefix)

    def no_weight_decay(self) -> set:
        names = {name for name, _ in self.named_parameters() if 'lookup_table' in name}
        if self.ape is not None:
            names |= {f'ape.{n}' for n in self.ape.no_weight_decay()}
        return names
