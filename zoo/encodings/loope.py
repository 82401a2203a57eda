"""LOOPE: sin-cos over the Gilbert (generalised Hilbert) curve order of the patch grid, plus a learned offset.

Paper: "LOOPE: Learnable Optimal Patch Order in Positional Embeddings for Vision Transformers" (Chowdhury et al.,
2025, arXiv:2504.14386); the official code is AbtahiMajeed144/LOOPE (``models/positional_encodings/hilbert.py``,
``art_pe.py``, commit ``945704c``). The facts used here are those of
``../shared/golden/seeds/README-ids.md``, section 5.

* **Patch order.** The Gilbert curve (J. Cerveny's generalised Hilbert curve for any ``W x H`` rectangle) visits every
  patch once with unit steps. Patch ``(row, col)`` gets its 1-based step ``g(row, col)`` on the curve
  (:func:`gilbert_index_grid`). The official ``gilbert_2d`` always takes the width as the major axis
  (``major_axis='width'``, the default); the reference algorithm takes the longer side (``'longer'``), which differs
  on tall grids (both are valid curves).
* **Sin-cos of a 1D position** ``p`` (:func:`hilbert_sincos`): ``pe[2i] = sin(p w_i)``, ``pe[2i+1] = cos(p w_i)``,
  ``w_i = exp(-2i ln(10000) / d)`` (the sin and cos channels interleaved, as the official ``get_hilbert_pos_embed``).
* **Position of a patch**: ``p = g(row, col) + o(row, col)`` with a learned offset ``o = 2 sigmoid(z) - 1`` in
  ``(-1, 1)``, the official parameterisation. ``offset='learned'`` (the default): ``z`` is a learned per-patch table
  ``(H, W)`` at the training grid (zero at init: the pure Gilbert order), resampled bilinearly to a new grid.
  ``offset='none'``: ``o = 0`` (the official fixed ``get_hilbert_pos_embed``). ``offset='official'``: the official
  ``ArtPE`` module computes ``z`` from the image (a convolution stack over the raw pixels and two coordinate channels,
  then a Linear to the patch count), so it is fixed to one square grid, 16-px patches and a class token; it refuses
  other sizes and ``torch.export`` (it needs the image, which only the eager model hands it).
* **Prefix tokens.** Class tokens get the sin-cos of position 0 (``get_hilbert_pos_embed``), or with
  ``offset='official'`` the learned ``cls_token`` (``ArtPE``); register tokens get nothing.

A new grid: the Gilbert order of that grid (steps ``1 .. H*W``, so positions extrapolate beyond the trained range)
plus the resampled offset table. LOOPE is an image encoding; a video grid is refused (the paper and the official code
have no 3D form).
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ._cache import TableCache, caching_allowed, param_key
from ._grid import parse_grid_size, refuse_video_grid
from .absolute import add_to_patches
from .base import Positions, PosEncoding
from .registry import register_pos_encoding

__all__ = ['gilbert_index', 'gilbert_index_grid', 'gilbert_order', 'hilbert_sincos', 'ArtPE', 'LOOPE', 'OFFSETS',
           'MAJOR_AXES']

OFFSETS = ('learned', 'none', 'official')
MAJOR_AXES = ('width', 'longer')
_MAX_LEVELS = 64  # recursion levels of the vectorised descent (it stops when every cell is placed)
#: recursion levels of the descent in exported graphs: enough for every grid with sides up to 4096 patches
#: (tests/test_loope.py checks the bound)
EXPORT_LEVELS = 32


def _sgn(x: torch.Tensor) -> torch.Tensor:
    return (x > 0).long() - (x < 0).long()


def gilbert_index(rows: torch.Tensor, cols: torch.Tensor, height, width, major_axis: str = 'width',
                  levels: Optional[int] = None) -> torch.Tensor:
    """0-based step of cells ``(rows, cols)`` on the Gilbert curve of an ``height x width`` grid, computed with
    element-wise tensor operations (eager: it stops when every cell is placed; with ``levels`` it runs exactly that
    many recursion levels and never reads a tensor's value, so the sizes may be symbolic: the ONNX export,
    see :func:`gilbert_index_grid`).

    The curve is Cerveny's recursive generalised Hilbert curve ("gilbert", ``generate2d``): a rectangle spanned by a
    major vector ``a`` (length ``w``) and a minor vector ``b`` (length ``h``) from corner ``(x, y)`` is a single run
    when ``h == 1`` or ``w == 1``; when ``2w > 3h`` it is split along ``a`` into two halves (the first made even when
    ``w > 2``); otherwise into three parts: half of ``b`` by half of ``a`` (major and minor swapped), the far half of
    ``b`` along the whole of ``a``, and the rest walked back (the first half of ``b`` made even when ``h > 2``). Each
    cell descends the recursion on its own, adding the cell counts of the parts before its own, so the whole grid is
    a fixed sequence of element-wise operations.

    Args:
        rows, cols: same-shape integer tensors of cell coordinates (``0 <= row < height``, ``0 <= col < width``).
        height, width: grid size (ints, or symbolic sizes under tracing).
        major_axis: ``'width'`` (the official LOOPE ``gilbert_2d``: ``generate(0, 0, width, 0, 0, height)`` always) or
            ``'longer'`` (the reference ``gilbert2d``: the height is the major axis of a tall grid).
        levels: None (eager: descend until every cell is placed, at most 64 levels) or a fixed number of levels
            (:data:`EXPORT_LEVELS` covers every grid with sides up to 4096; a cell not placed by then gets a wrong
            step, unchecked).

    Returns:
        ``rows.shape`` int64 steps in ``[0, height * width)``.

    Raises:
        ValueError: an unknown ``major_axis``; a grid too large for the recursion bound (sides beyond 2**31).
    """
    if major_axis not in MAJOR_AXES:
        raise ValueError(f'major_axis must be one of {MAJOR_AXES}, got {major_axis!r}')
    py, px = rows.long(), cols.long()
    zero = torch.zeros_like(px)
    x, y = zero.clone(), zero.clone()
    ax, ay, bx, by = zero + width, zero.clone(), zero.clone(), zero + height
    if major_axis == 'longer':
        tall = (zero + height) > (zero + width)
        ax, ay, bx, by = torch.where(tall, 0, ax), torch.where(tall, by, ay), torch.where(tall, ax, bx), \
            torch.where(tall, 0, by)
    index = zero.clone()
    done = torch.zeros_like(px, dtype=torch.bool)
    fixed = levels is not None
    for _ in range(levels if fixed else _MAX_LEVELS):
        w, h = (ax + ay).abs(), (bx + by).abs()
        dax, day, dbx, dby = _sgn(ax), _sgn(ay), _sgn(bx), _sgn(by)
        i = (px - x) * dax + (py - y) * day  # offset along the major vector
        j = (px - x) * dbx + (py - y) * dby  # offset along the minor vector
        row_run, col_run = h == 1, (w == 1) & (h != 1)
        finish = ~done & (row_run | col_run)
        index = torch.where(finish, index + torch.where(row_run, i, j), index)
        done = done | finish
        if not fixed and bool(done.all()):
            break
        ax2, ay2 = torch.div(ax, 2, rounding_mode='floor'), torch.div(ay, 2, rounding_mode='floor')
        bx2, by2 = torch.div(bx, 2, rounding_mode='floor'), torch.div(by, 2, rounding_mode='floor')
        w2, h2 = (ax2 + ay2).abs(), (bx2 + by2).abs()
        long_case = 2 * w > 3 * h
        # long case: two parts along a (the first one even when w > 2)
        odd_w = (w2 % 2 == 1) & (w > 2)
        lax2, lay2 = torch.where(odd_w, ax2 + dax, ax2), torch.where(odd_w, ay2 + day, ay2)
        lw2 = (lax2 + lay2).abs()
        first = i < lw2
        l_state = (torch.where(first, x, x + lax2), torch.where(first, y, y + lay2),
                   torch.where(first, lax2, ax - lax2), torch.where(first, lay2, ay - lay2), bx, by)
        l_add = torch.where(first, 0, lw2 * h)
        # standard case: three parts
        odd_h = (h2 % 2 == 1) & (h > 2)
        sbx2, sby2 = torch.where(odd_h, bx2 + dbx, bx2), torch.where(odd_h, by2 + dby, by2)
        sh2 = (sbx2 + sby2).abs()
        part2, part1 = j >= sh2, (j < sh2) & (i < w2)
        s_state = (
            torch.where(part2, x + sbx2, torch.where(part1, x, x + (ax - dax) + (sbx2 - dbx))),
            torch.where(part2, y + sby2, torch.where(part1, y, y + (ay - day) + (sby2 - dby))),
            torch.where(part2, ax, torch.where(part1, sbx2, -sbx2)),
            torch.where(part2, ay, torch.where(part1, sby2, -sby2)),
            torch.where(part2, bx - sbx2, torch.where(part1, ax2, -(ax - ax2))),
            torch.where(part2, by - sby2, torch.where(part1, ay2, -(ay - ay2))))
        s_add = torch.where(part2, w2 * sh2, torch.where(part1, 0, w2 * sh2 + w * (h - sh2)))
        step = ~done
        new = [torch.where(long_case, a, b) for a, b in zip(l_state, s_state)]
        x, y, ax, ay, bx, by = [torch.where(step, n, o) for n, o in zip(new, (x, y, ax, ay, bx, by))]
        index = torch.where(step, index + torch.where(long_case, l_add, s_add), index)
    if not fixed and not bool(done.all()):
        raise ValueError(f'gilbert_index: a {height}x{width} grid needs more than {_MAX_LEVELS} recursion levels')
    return index


def _gilbert_steps(height: int, width: int, longer: bool, device: torch.device,
                   levels: Optional[int] = None) -> torch.Tensor:
    """``(height * width,)`` 1-based Gilbert steps in raster order (the body of the custom op below; with ``levels``
    the fixed-depth descent of the ONNX export)."""
    rows = torch.arange(height, device=device).view(-1, 1).expand(height, width)
    cols = torch.arange(width, device=device).view(1, -1).expand(height, width)
    return (gilbert_index(rows, cols, height, width, 'longer' if longer else 'width', levels) + 1).reshape(-1)


@torch.library.custom_op('zoo::gilbert_index_grid', mutates_args=())
def _gilbert_op(height: int, width: int, longer: bool, device: torch.device) -> torch.Tensor:
    """``(height * width,)`` 1-based Gilbert steps in raster order; an opaque op to ``torch.export`` /
    ``torch.compile`` (symbolic sizes stay symbolic, the descent runs eagerly when the graph runs)."""
    return _gilbert_steps(height, width, longer, device)


@_gilbert_op.register_fake
def _(height, width, longer, device):
    return torch.empty(height * width, dtype=torch.long, device=device)


def gilbert_index_grid(height: int, width: int, major_axis: str = 'width',
                       device: Optional[torch.device] = None) -> torch.Tensor:
    """The official ``gilbert_2d(width, height)``: ``(height, width)`` int64, ``[row, col]`` = the **1-based** step at
    which the Gilbert curve visits that patch (see :func:`gilbert_index`). ``torch.compile`` graphs hold it as the
    custom op ``zoo::gilbert_index_grid`` (registered when ``zoo.encodings`` is imported). Exported graphs
    (``torch.export``, the ONNX exporter) hold the descent itself, :data:`EXPORT_LEVELS` levels of element-wise
    integer operations on symbolic sizes, so the ONNX model computes the order of any grid with sides up to 4096
    patches.

    Raises:
        ValueError: an unknown ``major_axis``.
    """
    if major_axis not in MAJOR_AXES:
        raise ValueError(f'major_axis must be one of {MAJOR_AXES}, got {major_axis!r}')
    device = torch.device('cpu') if device is None else torch.device(device)
    if torch.jit.is_tracing():  # TorchScript tracing cannot hand a device to a custom op; sizes are constants there
        return _gilbert_steps(height, width, major_axis == 'longer', device).reshape(height, width)
    if torch.compiler.is_exporting():  # ONNX has no custom op: the fixed-depth descent, as graph operations
        return _gilbert_steps(height, width, major_axis == 'longer', device, EXPORT_LEVELS).reshape(height, width)
    return _gilbert_op(height, width, major_axis == 'longer', device).reshape(height, width)


def gilbert_order(height: int, width: int, major_axis: str = 'width') -> torch.Tensor:
    """The visit order of the Gilbert curve: ``(height * width, 2)`` int64 ``(row, col)`` of step 0, 1, ..."""
    grid = gilbert_index_grid(height, width, major_axis).reshape(-1) - 1
    cells = torch.stack(torch.meshgrid(torch.arange(height), torch.arange(width), indexing='ij'), -1).reshape(-1, 2)
    return cells[torch.argsort(grid)]


def hilbert_sincos(positions: torch.Tensor, dim: int, temperature: float = 10000.) -> torch.Tensor:
    """LOOPE's sin-cos of 1D positions: ``(..., dim)`` float32 with ``pe[2i] = sin(p w_i)``, ``pe[2i+1] = cos(p w_i)``,
    ``w_i = exp(-2i ln(temperature) / dim)`` (interleaved, computed in float32 as the official code)."""
    w = torch.exp(torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32) *
                  (-math.log(temperature) / dim))
    angle = positions.float().unsqueeze(-1) * w
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)


class ArtPE(nn.Module):
    """The official LOOPE learned position module (``art_pe.py``, ``ArtPE``), parameter names as there.

    Input: images ``(B, 3, S, S)`` with ``S = 16 * side``. Two coordinate channels (``cord``: row then column
    coordinate, ``linspace(-1, 1, S)`` each, rebuilt, not stored) are appended; ``art_conv``: Conv 5->32 (kernel 16,
    stride 16), GELU, four Conv 5x5 (pad 2) 32->16->8->4->1 each followed by GELU, BatchNorm2d(1), Flatten,
    Linear(side^2 -> side^2, no bias), Sigmoid, giving ``s`` ``(B, side^2)``. Patch ``t`` (raster order) sits at
    ``2 s_t - 1 + wrap_pos_hilbert[t]`` (its 1-based Gilbert step plus an offset in (-1, 1)), embedded by the
    interleaved sin-cos with ``div_term``; token 0 gets the learned ``cls_token``.

    Args:
        dim: embedding width (even).
        side: patch grid side (the official ``sqrt(seq_length - 1)``).
        patch_size: must be 16 (the first convolution's kernel and stride are fixed there).

    Raises:
        ValueError: ``patch_size != 16``, odd ``dim``; at forward an image that is not ``(B, 3, 16 side, 16 side)``.
    """

    def __init__(self, dim: int, side: int, patch_size: int = 16, major_axis: str = 'width'):
        super().__init__()
        if patch_size != 16:
            raise ValueError(f"loope offset='official': the official ArtPE convolution has kernel and stride 16, so it "
                             f'needs 16-px patches, got patch_size={patch_size}; use offset=\'learned\' instead')
        self.dim, self.side, self.major_axis = dim, side, major_axis
        self.img_size = 16 * side
        self.cls_token = nn.Parameter(torch.zeros(1, dim))
        self.register_buffer('wrap_pos_hilbert', torch.zeros(side * side, 1))  # the 1-based Gilbert steps
        self.register_buffer('div_term', torch.zeros(1, dim // 2))
        self.art_conv = nn.Sequential(
            nn.Conv2d(5, 32, kernel_size=16, stride=16), nn.GELU(),
            nn.Conv2d(32, 16, 5, padding=2), nn.GELU(), nn.Conv2d(16, 8, 5, padding=2), nn.GELU(),
            nn.Conv2d(8, 4, 5, padding=2), nn.GELU(), nn.Conv2d(4, 1, 5, padding=2), nn.GELU(),
            nn.BatchNorm2d(1), nn.Flatten(), nn.Linear(side * side, side * side, bias=False), nn.Sigmoid())
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default layer inits; ``cls_token`` normal(0, 0.02); the fixed Gilbert positions and frequencies
        rebuilt."""
        for m in self.art_conv:
            if hasattr(m, 'reset_parameters'):
                m.reset_parameters()
        if isinstance(self.art_conv[10], nn.BatchNorm2d):
            self.art_conv[10].reset_running_stats()
        nn.init.normal_(self.cls_token, std=0.02)
        with torch.no_grad():
            grid = gilbert_index_grid(self.side, self.side, self.major_axis, self.cls_token.device)
            self.wrap_pos_hilbert.copy_(grid.reshape(-1, 1).float())
            self.div_term.copy_(torch.exp(torch.arange(0, self.dim, 2, dtype=torch.float32,
                                                       device=self.div_term.device) * (-math.log(10000.) / self.dim))
                                .unsqueeze(0))

    def offsets(self, images: torch.Tensor) -> torch.Tensor:
        """``art_conv``'s sigmoid output ``(B, side^2)`` for images ``(B, 3, S, S)``."""
        if images.dim() != 4 or tuple(images.shape[1:]) != (3, self.img_size, self.img_size):
            raise ValueError(f"loope offset='official' is fixed to {self.img_size}x{self.img_size} RGB images "
                             f'({self.side}x{self.side} patches of 16 px), got {tuple(images.shape)}; use '
                             "offset='learned' for other sizes")
        lin = torch.linspace(-1, 1, self.img_size, device=images.device, dtype=images.dtype)
        cord = torch.stack(torch.meshgrid(lin, lin, indexing='ij'), 0).unsqueeze(0)
        return self.art_conv(torch.cat([images, cord.expand(images.shape[0], -1, -1, -1)], dim=1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """The official ``pos_embedding`` ``(B, 1 + side^2, dim)``."""
        pos = (2 * self.offsets(images) - 1).unsqueeze(-1) + self.wrap_pos_hilbert  # (B, N, 1)
        angle = pos * self.div_term
        pe = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)
        return torch.cat([self.cls_token.expand(images.shape[0], 1, -1).to(pe.dtype), pe], dim=1)


@register_pos_encoding('loope')
class LOOPE(PosEncoding):
    """LOOPE: sin-cos over each patch's Gilbert-curve step plus a learned offset (see the module docstring).

    Args:
        dim: embedding width C (even).
        grid_size: training grid ``(H, W)`` in patches (any rectangle).
        num_prefix_tokens, num_class_tokens: the backbone's prefix tokens; class tokens (first) get position 0.
        offset: ``'learned'`` (per-patch table, default), ``'none'`` (fixed Gilbert sin-cos) or ``'official'`` (the
            official ``ArtPE`` over the image; square grid, 16-px patches, one class token, no registers).
        major_axis: ``'width'`` (official ``gilbert_2d``) or ``'longer'`` (reference Gilbert curve).
        temperature: frequency base (10000).
        patch_size: only for ``offset='official'``: the backbone's patch size, which must be 16.

    Parameters: ``offset_logit`` ``(1, H*W, 1)`` (``offset='learned'``); ``art.*`` (``'official'``: the official
    names under ``art.``, see :class:`ArtPE`).

    Raises:
        ValueError: odd ``dim``, unknown ``offset`` / ``major_axis``, a video ``grid_size``; for ``'official'`` a
            non-square grid, prefix tokens other than one class token, or ``patch_size != 16``; at forward a video
            grid, or (``'official'``) another grid, a missing image or a traced/exported forward.
    """
    family = 'LOOPE (Gilbert-order sin-cos + learned offset)'
    adaptation = ('Gilbert order of the new grid (steps 1..H*W, extrapolated) plus the learned offset table resampled '
                  'bilinearly')
    supports_video = False

    def __init__(self, dim: int, grid_size: Tuple[int, ...], num_prefix_tokens: int = 1, num_class_tokens: int = 1,
                 offset: str = 'learned', major_axis: str = 'width', temperature: float = 10000.,
                 patch_size: Optional[int] = None):
        super().__init__()
        refuse_video_grid('loope', grid_size, "a 3D encoding such as 'sincos3d' or 'rope3d' (LOOPE has no 3D form)")
        self.grid_size = parse_grid_size('loope', grid_size)
        if dim % 2:
            raise ValueError(f'loope interleaves sin and cos channels, so dim must be even, got {dim}')
        if offset not in OFFSETS:
            raise ValueError(f'loope offset must be one of {OFFSETS}, got {offset!r}')
        if major_axis not in MAJOR_AXES:
            raise ValueError(f'loope major_axis must be one of {MAJOR_AXES}, got {major_axis!r}')
        if not temperature > 0:
            raise ValueError(f'loope temperature must be > 0, got {temperature}')
        self.dim, self.offset, self.major_axis, self.temperature = dim, offset, major_axis, float(temperature)
        self.num_class_tokens = num_class_tokens
        self.offset_logit = self.art = None
        if offset == 'learned':
            self.offset_logit = nn.Parameter(torch.zeros(1, math.prod(self.grid_size), 1))
        elif offset == 'official':
            h, w = self.grid_size
            if h != w or num_prefix_tokens != 1 or num_class_tokens != 1:
                raise ValueError(f"loope offset='official' (ArtPE) needs a square grid and exactly one class token "
                                 f'and no registers, got grid {self.grid_size}, {num_class_tokens} class and '
                                 f"{num_prefix_tokens - num_class_tokens} register tokens; use offset='learned'")
            self.art = ArtPE(dim, h, 16 if patch_size is None else patch_size, major_axis)
            self.adaptation = 'none: the official ArtPE is fixed to its training grid (refuses other sizes)'
        self._cache = TableCache()

    # ------------------------------------------------------------------------------------------------ tables
    def gilbert_steps(self, hw: Sequence[int], device: Optional[torch.device] = None) -> torch.Tensor:
        """``(H*W,)`` float32 1-based Gilbert steps of the grid ``hw`` in raster order (cached per grid)."""
        h, w = hw
        return self._cache.get(('steps', h, w, device),
                               lambda: gilbert_index_grid(h, w, self.major_axis, device).reshape(-1).float())

    def offsets(self, hw: Sequence[int]) -> torch.Tensor:
        """``(H*W,)`` learned offsets ``2 sigmoid(z) - 1`` for grid ``hw`` (the table resampled bilinearly,
        ``align_corners=False``, when ``hw`` is not the training grid); zeros for ``offset='none'``."""
        if self.offset_logit is None:
            return torch.zeros((), device=self._device())
        z = self.offset_logit
        if torch.compiler.is_exporting() or tuple(hw) != self.grid_size:  # no size guard in an exported graph
            h0, w0 = self.grid_size
            z = F.interpolate(z.float().reshape(1, 1, h0, w0), size=tuple(hw), mode='bilinear',
                              align_corners=False).reshape(-1)
        return (2 * torch.sigmoid(z.float()) - 1).reshape(-1)

    def _device(self) -> torch.device:
        return self.offset_logit.device if self.offset_logit is not None else torch.device('cpu')

    def table(self, hw: Sequence[int], device: Optional[torch.device] = None) -> torch.Tensor:
        """The patch rows ``(1, H*W, C)`` float32 for grid ``hw`` (``offset`` 'learned' or 'none'); cached in eval
        mode per (grid, device, parameter version), recomputed in training."""
        hw = tuple(hw)

        def build():
            return hilbert_sincos(self.gilbert_steps(hw, device) + self.offsets(hw).to(device), self.dim,
                                  self.temperature).unsqueeze(0)
        if self.training and self.offset_logit is not None:
            return build()
        params = () if self.offset_logit is None else (self.offset_logit,)
        return self._cache.get(lambda: ('table', hw, device, param_key(params)), build)

    def official_pos_embed(self, images: torch.Tensor) -> torch.Tensor:
        """``offset='official'``: the official ``ArtPE`` output ``(B, 1 + H*W, C)`` for images ``(B, 3, 16H, 16W)``.

        Raises:
            ValueError: the encoding was built with another ``offset``, or images of another size.
        """
        if self.art is None:
            raise ValueError(f"official_pos_embed needs loope built with offset='official', not {self.offset!r}")
        return self.art(images)

    # ------------------------------------------------------------------------------------------------ hooks
    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        hw = pos.hw_2d('loope')
        if self.art is not None:
            if not caching_allowed():
                raise ValueError("loope offset='official' (the ArtPE convolution over the image) cannot be traced or "
                                 "exported: it is fixed to its training grid; use offset='learned' for export")
            if tuple(hw) != self.grid_size:
                raise ValueError(f"loope offset='official' is fixed to its {self.grid_size} training grid, got "
                                 f"{tuple(hw)}; use offset='learned' for other sizes")
            if pos.images is None:
                raise ValueError("loope offset='official' needs the input images (Positions.images); this backbone "
                                 "does not hand them over; use offset='learned'")
            return x + self.art(pos.images).to(x.dtype)
        out = add_to_patches(x, self.table(hw, x.device).to(x.dtype), pos.num_prefix_tokens)
        if self.num_class_tokens and pos.num_class_tokens:
            c = pos.num_class_tokens
            cls = hilbert_sincos(torch.zeros(1, device=x.device), self.dim, self.temperature).to(x.dtype)
            out = torch.cat([out[:, :c] + cls, out[:, c:]], dim=1)
        return out

    @torch.no_grad()
    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        """Resample the learned offset table to ``grid_size`` (bilinear, in logit space); ``'official'`` refuses."""
        refuse_video_grid('loope', grid_size, "a 3D encoding such as 'sincos3d' or 'rope3d'")
        grid_size = parse_grid_size('loope', grid_size)
        if grid_size == self.grid_size:
            return
        if self.art is not None:
            raise ValueError(f"loope offset='official' is fixed to its {self.grid_size} training grid; got "
                             f"{grid_size}; use offset='learned' to change the input size")
        if self.offset_logit is not None:
            h0, w0 = self.grid_size
            z = F.interpolate(self.offset_logit.float().reshape(1, 1, h0, w0), size=grid_size, mode='bilinear',
                              align_corners=False)
            self.offset_logit = nn.Parameter(z.reshape(1, -1, 1).to(self.offset_logit.dtype))
        self.grid_size = grid_size
        self._cache.clear()

    def reset_parameters(self) -> None:
        """Offsets zero (the pure Gilbert order at init); the official module's own init."""
        if self.offset_logit is not None:
            nn.init.zeros_(self.offset_logit)
        if self.art is not None:
            self.art.reset_parameters()
        self._cache.clear()

    def no_weight_decay(self) -> set:
        out = {'offset_logit'} if self.offset_logit is not None else set()
        return out | ({'art.cls_token'} if self.art is not None else set())

    def load_official_state_dict(self, state_dict: Dict[str, torch.Tensor]) -> None:
        """Load an official ``ArtPE`` state dict (its own key names; ``cord`` dropped, as it is rebuilt) into
        ``offset='official'``.

        Raises:
            ValueError: the encoding was not built with ``offset='official'``.
            CheckpointMismatchError: missing or extra keys, or shapes that do not fit, all named.
        """
        from .checkpoint import CheckpointMismatchError
        if self.art is None:
            raise ValueError(f"an official ArtPE state dict loads into loope built with offset='official', not "
                             f'{self.offset!r}')
        sd = {k: v for k, v in state_dict.items() if k != 'cord'}
        own = self.art.state_dict()
        missing, extra = sorted(set(own) - set(sd)), sorted(set(sd) - set(own))
        shapes = [f'{k} {tuple(sd[k].shape)} vs {tuple(own[k].shape)}' for k in own
                  if k in sd and tuple(sd[k].shape) != tuple(own[k].shape)]
        if missing or extra or shapes:
            raise CheckpointMismatchError(f'official ArtPE state dict does not fit: missing {missing}, extra {extra}, '
                                          f'shape mismatches {shapes}')
        self.art.load_state_dict(sd, strict=True)
        self._cache.clear()
