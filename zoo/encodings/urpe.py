"""URPE: universal relative position encoding, a learned post-softmax multiplier per relative offset (2D and 1D).

Paper: "Your Transformer May Not be as Powerful as You Expect" (Luo et al., NeurIPS 2022, arXiv:2205.13401), Sec. 4
(Eq. 5): ``Attn = (softmax(Q K^T / sqrt(d) + B) * C) V`` with ``B`` an additive relative position bias and ``C`` a
learned Toeplitz matrix, both functions of the relative offset only, per head; ``*`` is the element-wise product
after the softmax (rows are **not** renormalised; ``C`` may be negative). Official code: github.com/lsj2408/URPE
(fairseq, 1D sequences only).

Here the offset of query ``i`` and key ``j`` on a patch grid is ``(drow, dcol) = (row_j - row_i, col_j - col_i)``
(key minus query, the official convention), and both tables hold one row per offset, ``(2H - 1) * (2W - 1)`` rows of
the training grid ``(H, W)``, index ``(drow + H - 1) * (2W - 1) + (dcol + W - 1)``, one column per head. A sequence is
the one-row grid ``grid_size=(1, L_max)``: index ``j - i + L_max - 1``, the official table layout (``urpe.pt``).
Prefix tokens (class, registers) get bias 0 and multiplier 1 in their rows and columns.

Official quirk (``shared_tables``): the official encoder computes ``B`` and ``C`` once and feeds the same tables to
every layer; the paper's model has them per layer (the default, ``shared_tables=False``). ``shared_tables=True``
reproduces the official encoder.

A new grid: offsets beyond the table's range are clamped to its edge (the farthest trained offset); ``set_grid_size``
(``set_input_size``) resamples both tables to the new grid's offset range (bicubic over the ``(2H-1, 2W-1)`` offset
plane, ``align_corners=True`` so the zero offset stays the centre). There is no 3D form: video geometries are refused.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from timm.layers import is_exporting, trunc_normal_
from torch import nn

from ._cache import TableCache
from ._grid import parse_grid_size, refuse_video_grid
from .base import AttnTerm, Positions, PosEncoding
from .registry import register_pos_encoding

__all__ = ['URPE', 'URPETerm', 'urpe_offset_index', 'gather_rows']


def urpe_offset_index(hw: Tuple[int, int], table_hw: Tuple[int, int], device: Optional[torch.device] = None
                      ) -> torch.Tensor:
    """``(N, N)`` long table row of every (query, key) pair of an ``hw`` grid (N = H*W, row-major): offsets
    ``key - query`` per axis, clamped to the ``table_hw`` range, index ``(drow + Ht - 1) * (2Wt - 1) + dcol + Wt - 1``.
    """
    th, tw = table_hw
    axes = [torch.arange(n, device=device) for n in hw]
    rows, cols = torch.meshgrid(*axes, indexing='ij')
    rows, cols = rows.reshape(-1), cols.reshape(-1)
    dr = (rows[None, :] - rows[:, None]).clamp(-(th - 1), th - 1)
    dc = (cols[None, :] - cols[:, None]).clamp(-(tw - 1), tw - 1)
    return (dr + th - 1) * (2 * tw - 1) + dc + tw - 1


class URPETerm(AttnTerm):
    """One layer's URPE: additive bias ``bias`` and post-softmax multiplier ``mult``, each ``(1 or B, heads, L, L)``."""
    needs_attn_weights = True
    tensor_fields = ('bias_table', 'mult')

    def __init__(self, bias_table: torch.Tensor, mult: torch.Tensor):
        self.bias_table, self.mult = bias_table, mult

    def bias(self, q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
        return self.bias_table[..., -q.shape[-2]:, :]

    def attn_multiplier(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self.mult[..., -q.shape[-2]:, :]


def gather_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[:, index]``: ``(S, R, heads)`` rows picked by ``index`` ``(M,)`` int64 -> ``(S, M, heads)``.

    In compiled inference (``torch.compile``, no gradient needed, not exporting) the gather is the opaque op
    ``zoo::urpe_gather_rows``, so inductor keeps it one realized buffer: inlined, it was re-gathered inside every
    kernel that reads the bias and the multiplier (compiled 1.48x eager at ViT-Ti/16 224, batch 4; 1.03x with the
    gather outside the graph). Elsewhere (eager, training, ``torch.export`` / ONNX) plain indexing.
    """
    if torch.compiler.is_compiling() and not is_exporting() and not (torch.is_grad_enabled() and table.requires_grad):
        return torch.ops.zoo.urpe_gather_rows(table, index)
    return table[:, index]


@torch.library.custom_op('zoo::urpe_gather_rows', mutates_args=())
def _urpe_gather_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return table[:, index]


@_urpe_gather_rows.register_fake
def _(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return table.new_empty((table.shape[0], index.shape[0], table.shape[-1]))


@register_pos_encoding('urpe')
class URPE(PosEncoding):
    """URPE (arXiv:2205.13401, Eq. 5) on a 2D patch grid (a sequence is the grid ``(1, L_max)``).

    Args:
        num_heads: attention heads (one table column each).
        depth: blocks; one pair of tables each unless ``shared_tables``.
        grid_size: training grid ``(H, W)`` in patches; the tables cover its offsets.
        shared_tables: one pair of tables for every layer (the official encoder) instead of one per layer (paper).
        init_std: truncated-normal std of the additive table (0.02).
        multiplier_init: constant start of the multiplier (1: URPE starts as the plain relative bias; the official
            ``--constant-init-ur-attn``).

    Parameters: ``bias_table`` and ``mult_table``, each ``(S, (2H-1)(2W-1), heads)`` float, ``S = 1`` with
    ``shared_tables`` else ``depth``.

    Raises:
        ValueError: a video geometry ``(T, H, W)`` (no 3D form), a bad ``grid_size``; at forward a grid with ``T > 1``.
    """
    family = 'URPE (relative bias + post-softmax multiplier)'
    adaptation = ('offsets beyond the trained range clamped to the table edge; set_input_size resamples both tables '
                  'bicubically over the offset plane')
    supports_video = False

    def __init__(self, num_heads: int, depth: int, grid_size: Tuple[int, ...], shared_tables: bool = False,
                 init_std: float = 0.02, multiplier_init: float = 1.0):
        super().__init__()
        refuse_video_grid('urpe', grid_size, 'a 3D relative encoding (irpe, rope3d, alibi, ...); urpe has no 3D form')
        self.grid_size = parse_grid_size('urpe', grid_size)
        self.num_heads, self.depth = int(num_heads), int(depth)
        self.shared_tables = bool(shared_tables)
        self.init_std, self.multiplier_init = float(init_std), float(multiplier_init)
        h, w = self.grid_size
        n = 1 if self.shared_tables else self.depth
        self.bias_table = nn.Parameter(torch.zeros(n, (2 * h - 1) * (2 * w - 1), self.num_heads))
        self.mult_table = nn.Parameter(torch.ones(n, (2 * h - 1) * (2 * w - 1), self.num_heads))
        self._index = TableCache()
        self.reset_parameters()

    def extra_repr(self) -> str:
        return f'grid_size={self.grid_size}, heads={self.num_heads}, shared_tables={self.shared_tables}'

    def reset_parameters(self) -> None:
        trunc_normal_(self.bias_table, std=self.init_std)
        nn.init.constant_(self.mult_table, self.multiplier_init)

    def offset_index(self, hw: Tuple[int, int], device: torch.device) -> torch.Tensor:
        """``(N, N)`` table rows of the patch pairs of an ``hw`` grid (cached per grid and device)."""
        return self._index.get(lambda: (tuple(int(s) for s in hw), self.grid_size, device),
                               lambda: urpe_offset_index(hw, self.grid_size, device))

    def tables(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(bias, mult)``, each ``(S, heads, L_full, L_full)`` in ``dtype`` over the full grid of ``pos`` with its
        prefix tokens (prefix rows and columns: bias 0, multiplier 1); ``S`` tables (1 when shared)."""
        idx = self.offset_index(pos.hw_2d('urpe'), device)
        n = idx.shape[0]
        npt = pos.num_prefix_tokens
        out = []
        for table, fill in ((self.bias_table, 0.), (self.mult_table, 1.)):
            t = gather_rows(table.to(dtype), idx.reshape(-1)).reshape(table.shape[0], n, n, -1).permute(0, 3, 1, 2)
            if npt:
                t = F.pad(t, (npt, 0, npt, 0), value=fill)
            out.append(t)
        return out[0], out[1]

    def attn_terms(self, pos: Positions, dtype: torch.dtype, device: torch.device) -> Sequence[Optional[AttnTerm]]:
        bias, mult = self.tables(pos, dtype, device)
        terms = [URPETerm(pos.select(bias[i:i + 1], 2, dims=(3,)), pos.select(mult[i:i + 1], 2, dims=(3,)))
                 for i in range(bias.shape[0])]
        return terms * self.depth if self.shared_tables else terms

    @torch.no_grad()
    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        """Resample both tables to the offset range of a new default grid ``(H, W)``."""
        refuse_video_grid('urpe', grid_size, 'a 3D relative encoding; urpe has no 3D form')
        new = parse_grid_size('urpe', grid_size)
        if new == self.grid_size:
            return
        (h, w), (nh, nw) = self.grid_size, new
        for name in ('bias_table', 'mult_table'):
            t = getattr(self, name)
            plane = t.float().reshape(t.shape[0], 2 * h - 1, 2 * w - 1, -1).permute(0, 3, 1, 2)
            plane = F.interpolate(plane, size=(2 * nh - 1, 2 * nw - 1), mode='bicubic', align_corners=True)
            plane = plane.permute(0, 2, 3, 1).reshape(t.shape[0], -1, t.shape[-1])
            setattr(self, name, nn.Parameter(plane.to(t.dtype)))
        self.grid_size = new
        self._index.clear()

    def no_weight_decay(self) -> set:
        return {'bias_table', 'mult_table'}
