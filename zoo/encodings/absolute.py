"""Absolute position encodings added to the tokens: learned tables, fixed sin-cos tables, and none (NoPE).

* Learned APE: "An Image is Worth 16x16 Words" (Dosovitskiy et al., arXiv:2010.11929) and DeiT (arXiv:2012.12877);
  for videos one learned ``(T', H', W')`` table (ViViT, Arnab et al., arXiv:2103.15691).
* Space + time APE: TimeSformer, "Is Space-Time Attention All You Need for Video Understanding?" (Bertasius et al.,
  arXiv:2102.05095): a spatial table per frame plus a time table per position.
* 2D sin-cos: MAE / MoCo v3 (arXiv:2104.02057, Sec. 3), recomputed for the actual grid.
* 1D sin-cos over the flattened token index: VideoMAE (Tong et al., arXiv:2203.12602), as the Transformer's
  ("Attention Is All You Need", arXiv:1706.03762).
* 3D factorised sin-cos ``[t | h | w]``: V-JEPA (Bardes et al., arXiv:2404.08471) / MAE-ST (Feichtenhofer et al.,
  arXiv:2205.09113).

Tokens are laid out as ``[prefix tokens, patches]`` with patches t-major, then row-major (``zoo.encodings.Positions``).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from timm.layers import build_sincos2d_pos_embed, is_exporting, resample_abs_pos_embed, trunc_normal_
from timm.layers.pos_embed_sincos import freq_bands

from ._cache import TableCache
from ._grid import as_thw, parse_grid_size, refuse_video_grid, resample_grid_table
from .base import Positions, PosEncoding
from .checkpoint import CheckpointMismatchError
from .extrapolation import COORDINATE_STRATEGIES, Extrapolation
from .randomized import RandomPositions
from .registry import register_pos_encoding
from .rotation import grid_coords

__all__ = ['LearnedAPE', 'SpaceTimeAPE', 'SinCos2D', 'SinCos1D', 'SinCos3D', 'NoPE', 'add_to_patches',
           'sinusoid_table_1d', 'sincos_table_3d', 'timesformer_checkpoint_resize', 'videomae_v2_resize']


def add_to_patches(x: torch.Tensor, table: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """Add ``table`` ``(1, N, C)`` to the patch tokens of ``x`` ``(B, num_prefix_tokens + N, C)``, out of place."""
    if num_prefix_tokens == 0:
        return x + table
    return torch.cat([x[:, :num_prefix_tokens], x[:, num_prefix_tokens:] + table], dim=1)


def _inflate_image_table(key: str, table: torch.Tensor, target: torch.Tensor, image_grid: Tuple[int, int],
                         grid: Tuple[int, int, int], per_frame: bool) -> torch.Tensor:
    """A learned 2D position table ``(1, P + H*W, C)`` for the video table ``target``: the per-frame table of a
    space + time embedding (``per_frame``), else repeated over the ``T'`` tubelets of one ``(1, [P +] T'*H'*W', C)``
    table; the frame table is resampled bicubically (timm) when ``image_grid`` differs from the video frame grid. The
    video table keeps the first of the image's prefix rows it has room for.

    Raises:
        CheckpointMismatchError: ``table`` does not hold an ``image_grid`` patch table, or its prefix rows cannot fill
            ``target`` (``key`` names it).
    """
    t, h, w = grid
    src_p = table.shape[1] - image_grid[0] * image_grid[1]
    if src_p < 0 or src_p > 16:
        raise CheckpointMismatchError(
            f'{key} {tuple(table.shape)} does not hold a {image_grid[0]}x{image_grid[1]} patch table; pass '
            f'image_grid=(H, W), the patch grid the image model was trained on')
    patches = table[:, src_p:]
    if tuple(image_grid) != (h, w):
        patches = resample_abs_pos_embed(patches, new_size=[h, w], old_size=list(image_grid), num_prefix_tokens=0)
    dst_p = target.shape[1] - (h * w if per_frame else t * h * w)
    if not 0 <= dst_p <= src_p:
        raise CheckpointMismatchError(f'inflate_2d_to_3d: {key} {tuple(table.shape)} ({src_p} prefix rows) cannot '
                                      f'fill the video table {tuple(target.shape)} (grid {grid})')
    out = torch.cat([table[:, :dst_p], patches if per_frame else patches.repeat(1, t, 1)], dim=1)
    return out.to(target.dtype)


@register_pos_encoding('ape')
class LearnedAPE(PosEncoding):
    """Learned absolute position embedding: 2D (timm/DeiT) or 3D (one ``(T', H', W')`` table for videos).

    Images (``grid_size=(H, W)``): resampled bicubically (antialiased, as timm does) for other grids, prefix entries
    kept. Videos (``grid_size=(T', H', W')`` tubelets x patches): one table over the whole patch volume, with no
    prefix entries (video models have no class token by default; prefix tokens get no embedding). More frames or a
    bigger frame: the ``(1, C, T', H', W')`` volume is resampled **trilinearly** (``align_corners=False``: cell
    centres aligned), so positions between the trained ones are interpolated and the table always spans the same
    clip extent; the trained grid returns the table unchanged.

    Args:
        dim: embedding width C.
        grid_size: training grid ``(H, W)`` or ``(T', H', W')``.
        num_prefix_tokens: prefix tokens (class + registers) of the backbone.
        embed_prefix: images only: if True (DeiT/timm ViT layout) the table also holds one entry per prefix token,
            first; if False (timm Eva ``no_embed_class``) prefix tokens get no embedding. Video tables never do.

    Parameters: ``pos_embed`` ``(1, P + N, C)`` float with ``N = H*W`` (``T'*H'*W'`` for videos) and
    ``P = num_prefix_tokens`` for images with ``embed_prefix``, else 0.

    Raises:
        ValueError: a bad ``grid_size``; at forward a grid of the other kind (a 2D table with ``T > 1``) or a prefix
            count different from the table's.
    """
    family = 'APE (learned)'
    adaptation = 'learned table resampled bicubically (antialiased) to the new grid, prefix entries kept'

    def __init__(self, dim: int, grid_size: Tuple[int, ...], num_prefix_tokens: int = 1, embed_prefix: bool = True,
                 init_std: float = 0.02):
        super().__init__()
        self.grid_size = parse_grid_size('ape', grid_size)
        self.video = len(self.grid_size) == 3
        self.num_embed_prefix = num_prefix_tokens if embed_prefix and not self.video else 0
        self.init_std = init_std
        if self.video:
            self.adaptation = ('learned (T, H, W) table resampled trilinearly (align_corners=False) to the new frame '
                               'count and frame size; prefix tokens get no embedding')
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_embed_prefix + math.prod(self.grid_size), dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Truncated normal, std ``init_std`` (0.02, as timm's ViT)."""
        trunc_normal_(self.pos_embed, std=self.init_std)

    def table(self, size: Sequence[int]) -> torch.Tensor:
        """The embedding ``(1, P + N, C)`` for grid ``size`` (``(H, W)``, or ``(T, H, W)`` for a video table);
        resampled when ``size`` differs from ``grid_size``."""
        if not is_exporting() and tuple(size) == self.grid_size:  # no size guard in an exported graph
            return self.pos_embed
        if self.video:
            return resample_grid_table(self.pos_embed, self.grid_size, size, 'trilinear')
        return resample_abs_pos_embed(self.pos_embed, new_size=list(size), old_size=list(self.grid_size),
                                      num_prefix_tokens=self.num_embed_prefix)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        if self.video:
            if pos.grid is None:
                raise ValueError('ape needs a patch grid (Positions.grid), not explicit ids')
            return add_to_patches(x, self.table(pos.grid).to(x.dtype), pos.num_prefix_tokens)
        table = self.table(pos.hw_2d('ape')).to(x.dtype)
        if self.num_embed_prefix == pos.num_prefix_tokens:
            return x + table
        if self.num_embed_prefix == 0:
            return add_to_patches(x, table, pos.num_prefix_tokens)
        raise ValueError(f'the APE table has {self.num_embed_prefix} prefix entries but the input has '
                         f'{pos.num_prefix_tokens} prefix tokens; build the model with matching class/register tokens')

    @torch.no_grad()
    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        grid_size = parse_grid_size('ape', grid_size)
        if len(grid_size) != len(self.grid_size):
            raise ValueError(f'ape: this table is {len(self.grid_size)}D (grid {self.grid_size}); got grid_size '
                             f'{grid_size}')
        if grid_size != self.grid_size:
            self.pos_embed = nn.Parameter(self.table(grid_size).detach())
            self.grid_size = grid_size

    def checkpoint_table(self, table: torch.Tensor) -> torch.Tensor:
        """A checkpoint's 2D table ``(1, P + S*S, C)`` (square training grid, as timm and DeiT train) resampled
        bicubically to this table's grid, ``P`` prefix entries kept; unchanged when it already fits, when it is not
        such a table (the strict load reports it), and for video tables (2D -> 3D is :meth:`inflate_param`'s)."""
        target = self.pos_embed
        if self.video or table.shape == target.shape or table.ndim != 3 or table.shape[-1] != target.shape[-1]:
            return table
        old_n = table.shape[1] - self.num_embed_prefix
        side = math.isqrt(old_n) if old_n > 0 else 0
        if side * side != old_n:
            return table
        return resample_abs_pos_embed(table, new_size=list(self.grid_size), old_size=[side, side],
                                      num_prefix_tokens=self.num_embed_prefix)

    def map_checkpoint(self, layout: str, state_dict: Dict[str, torch.Tensor],
                       prefix: str = '') -> Dict[str, torch.Tensor]:
        """The learned table: ``pos_embed`` of a timm ViT / Eva, DeiT(-iRPE) or V-JEPA 2 checkpoint, or this table's
        own name in the zoo layout; 2D tables resampled to this grid (:meth:`checkpoint_table`). A V-JEPA 2 table
        is taken only when it has this table's shape (otherwise it is the fixed table of another encoding, which the
        backbone compares with what its encoding adds). See :meth:`PosEncoding.map_checkpoint`."""
        out = super().map_checkpoint(layout, state_dict, prefix)
        key = prefix + 'pos_embed' if layout == 'zoo' else 'pos_embed'
        if key not in state_dict:
            return out
        if layout == 'vjepa2' and tuple(state_dict[key].shape) != tuple(self.pos_embed.shape):
            return out
        out[prefix + 'pos_embed'] = self.checkpoint_table(state_dict.pop(key))
        return out

    def inflate_param(self, name: str, image_value: Optional[torch.Tensor], target: torch.Tensor,
                      image_grid: Tuple[int, int], prefix: str = '') -> Optional[torch.Tensor]:
        """``pos_embed``: the image table (frame table resampled bicubically if the frame grid differs) repeated over
        the ``T'`` tubelets. See :meth:`PosEncoding.inflate_param`."""
        if name != 'pos_embed' or image_value is None:
            return super().inflate_param(name, image_value, target, image_grid, prefix)
        return _inflate_image_table(prefix + name, image_value, target, image_grid, as_thw(self.grid_size), False)

    def no_weight_decay(self) -> set:
        return {'pos_embed'}


def timesformer_checkpoint_resize(pos_embed: torch.Tensor, time_embed: torch.Tensor, num_patches: int,
                                  num_frames: int, num_extra_tokens: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """TimeSformer's checkpoint-load resize (``helpers.load_pretrained``), a different rule from its forward resize.

    The patch rows of ``pos_embed`` are resized by 1D **nearest** over the flattened raster sequence (source row
    ``floor(i * P / N')``), the class rows kept; ``time_embed`` by 1D nearest over time. Use it to load a TimeSformer
    checkpoint into a :class:`SpaceTimeAPE` of another size exactly as the official code does (it scrambles the 2D
    layout when the grid shape changes; :meth:`SpaceTimeAPE.set_grid_size` resizes in 2D instead).

    Args:
        pos_embed: ``(1, E + P, C)`` spatial table, ``E = num_extra_tokens`` class rows first.
        time_embed: ``(1, T, C)`` time table.
        num_patches: patches per frame of the target model ``N' = H' * W'``.
        num_frames: frames of the target model (tubelets, TimeSformer has tubelet 1).

    Returns:
        ``(pos_embed (1, E + N', C), time_embed (1, num_frames, C))``.
    """
    if pos_embed.shape[1] != num_extra_tokens + num_patches:
        other = F.interpolate(pos_embed[:, num_extra_tokens:].transpose(1, 2), size=num_patches, mode='nearest')
        pos_embed = torch.cat([pos_embed[:, :num_extra_tokens], other.transpose(1, 2)], dim=1)
    if time_embed.shape[1] != num_frames:
        time_embed = F.interpolate(time_embed.transpose(1, 2), size=num_frames, mode='nearest').transpose(1, 2)
    return pos_embed, time_embed


@register_pos_encoding('st_ape')
class SpaceTimeAPE(PosEncoding):
    """Separable learned space + time embedding (TimeSformer): the spatial table is added to every frame, the time
    table to every position of a frame (Bertasius et al., arXiv:2102.05095, Sec. 3).

    A patch at (t, row, col) gets ``(x + pos_embed[P + row * W + col]) + time_embed[t]`` (TimeSformer's order of the
    two sums); class tokens get ``pos_embed[c]`` (``c < P``) and no time entry; register tokens get nothing.
    Token order is the zoo's (t-major, then row-major); TimeSformer itself orders patches (row, col, t) with t
    fastest, so compare after a reorder.

    More frames / a bigger frame: the tables are resampled separately. ``resize='interpolate'`` (default): spatial
    bicubic (antialiased, timm's ``resample_abs_pos_embed``, class rows kept) and temporal linear
    (``align_corners=False``). ``resize='nearest'``: TimeSformer's forward rule, 2D nearest for the spatial table
    (source row ``floor(r * P / H')``, column ``floor(c * P / W')``) and 1D nearest in time (``floor(i * T / T')``).
    :func:`timesformer_checkpoint_resize` is the official checkpoint-load rule.

    Args:
        dim: embedding width C.
        grid_size: training grid ``(T', H', W')`` (an image geometry ``(H, W)`` means ``T' = 1``).
        num_class_tokens: class tokens of the backbone; each gets a spatial row (TimeSformer: 1).
        resize: ``'interpolate'`` or ``'nearest'`` (see above).
        init_std: truncated-normal std of ``pos_embed`` (0.02 as TimeSformer; ``time_embed`` starts at zero as there).

    Parameters: ``pos_embed`` ``(1, P + H'*W', C)`` (``P = num_class_tokens``) and ``time_embed`` ``(1, T', C)``.

    Raises:
        ValueError: a bad ``grid_size`` or ``resize``; at forward a class-token count other than the table's.
    """
    family = 'APE (learned, space + time)'
    RESIZE = ('interpolate', 'nearest')

    def __init__(self, dim: int, grid_size: Tuple[int, ...], num_class_tokens: int = 0, resize: str = 'interpolate',
                 init_std: float = 0.02):
        super().__init__()
        if resize not in self.RESIZE:
            raise ValueError(f'st_ape resize must be one of {self.RESIZE}, got {resize!r}')
        self.grid_size = as_thw(parse_grid_size('st_ape', grid_size))
        self.resize = resize
        self.num_class_tokens = int(num_class_tokens)
        self.init_std = init_std
        self.adaptation = ('spatial table resampled per frame and time table along time, separately: ' +
                           ('bicubic (space) + linear (time)' if resize == 'interpolate' else
                            'nearest (TimeSformer forward rule)'))
        t, h, w = self.grid_size
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_class_tokens + h * w, dim))
        self.time_embed = nn.Parameter(torch.zeros(1, t, dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """TimeSformer's init: ``pos_embed`` truncated normal std ``init_std``, ``time_embed`` zeros."""
        trunc_normal_(self.pos_embed, std=self.init_std)
        nn.init.zeros_(self.time_embed)

    def spatial_table(self, hw: Tuple[int, int]) -> torch.Tensor:
        """``(1, P + H*W, C)``: class rows, then the per-frame table for a ``hw`` patch grid."""
        old = self.grid_size[1:]
        if not is_exporting() and tuple(hw) == old:
            return self.pos_embed
        p = self.num_class_tokens
        if self.resize == 'interpolate':
            return resample_abs_pos_embed(self.pos_embed, new_size=list(hw), old_size=list(old), num_prefix_tokens=p)
        c = self.pos_embed.shape[-1]
        grid = self.pos_embed[:, p:].transpose(1, 2).reshape(1, c, old[0], old[1])
        grid = F.interpolate(grid, size=tuple(hw), mode='nearest').flatten(2).transpose(1, 2)
        return torch.cat([self.pos_embed[:, :p], grid], dim=1)

    def time_table(self, frames: int) -> torch.Tensor:
        """``(1, T, C)`` for ``frames`` tubelets."""
        if not is_exporting() and frames == self.grid_size[0]:
            return self.time_embed
        if self.resize == 'nearest':
            out = F.interpolate(self.time_embed.transpose(1, 2), size=frames, mode='nearest')
        else:
            out = F.interpolate(self.time_embed.float().transpose(1, 2), size=frames, mode='linear',
                                align_corners=False).to(self.time_embed.dtype)
        return out.transpose(1, 2)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        if pos.grid is None:
            raise ValueError('st_ape needs a patch grid (Positions.grid), not explicit ids')
        if pos.num_class_tokens != self.num_class_tokens:
            raise ValueError(f'st_ape has {self.num_class_tokens} class rows but the input has '
                             f'{pos.num_class_tokens} class tokens; build it with num_class_tokens matching the model')
        t, h, w = pos.grid
        p, npt = self.num_class_tokens, pos.num_prefix_tokens
        spatial = self.spatial_table((h, w)).to(x.dtype)
        time = self.time_table(t).to(x.dtype)
        b, c = x.shape[0], x.shape[-1]
        patches = x[:, npt:].reshape(b, t, h * w, c) + spatial[:, None, p:]
        patches = (patches + time[:, :, None]).reshape(b, t * h * w, c)
        parts = [x[:, :p] + spatial[:, :p]] if p else []
        if npt > p:
            parts.append(x[:, p:npt])
        return torch.cat(parts + [patches], dim=1) if parts else patches

    @torch.no_grad()
    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        """Resample both tables to a new default grid with the ``resize`` rule."""
        grid_size = as_thw(parse_grid_size('st_ape', grid_size))
        if grid_size != self.grid_size:
            pos_embed, time_embed = self.spatial_table(grid_size[1:]).detach(), self.time_table(grid_size[0]).detach()
            self.pos_embed, self.time_embed = nn.Parameter(pos_embed), nn.Parameter(time_embed)
            self.grid_size = grid_size

    def inflate_param(self, name: str, image_value: Optional[torch.Tensor], target: torch.Tensor,
                      image_grid: Tuple[int, int], prefix: str = '') -> Optional[torch.Tensor]:
        """``pos_embed``: the image table is the spatial table (resampled bicubically if the frame grid differs);
        ``time_embed``: zeros when the image has none (TimeSformer's initialisation). See
        :meth:`PosEncoding.inflate_param`."""
        if name == 'pos_embed' and image_value is not None:
            return _inflate_image_table(prefix + name, image_value, target, image_grid, self.grid_size, True)
        if name == 'time_embed' and image_value is None:
            return torch.zeros_like(target)
        return super().inflate_param(name, image_value, target, image_grid, prefix)

    def no_weight_decay(self) -> set:
        return {'pos_embed', 'time_embed'}


def sincos2d_at(coords: torch.Tensor, dim: int, temperature: float = 10000.) -> torch.Tensor:
    """timm's ``build_sincos2d_pos_embed`` layout at arbitrary (row, col) positions ``coords`` ``(..., N, 2)`` (float,
    patches): ``[sin(row w), sin(col w), cos(row w), cos(col w)]`` with ``w`` = timm's ``freq_bands(dim // 4)``.
    Returns ``(..., N, dim)`` float32; integer coordinates give timm's table exactly."""
    bands = freq_bands(dim // 4, temperature=temperature, step=1, device=coords.device)
    pos2 = coords.float().unsqueeze(-1) * bands                              # (..., N, 2, dim / 4)
    return torch.stack([pos2.sin(), pos2.cos()], dim=-3).flatten(-3)


@register_pos_encoding('sincos')
class SinCos2D(PosEncoding):
    """Fixed 2D sin-cos embedding on integer patch indices, recomputed (and cached) for the actual grid.

    The first half of the channels encodes the row index, the second half the column index (timm's
    ``build_sincos2d_pos_embed``). Prefix tokens get no embedding. Images only: videos use ``sincos1d`` (VideoMAE)
    or ``sincos3d``.

    Args:
        dim: embedding width C, divisible by 4.
        temperature: frequency base (10000 as in the Transformer).
        grid_size: the training grid ``(H, W)`` (for ``extrapolation='pi'``); a video geometry is refused.
        extrapolation: ``'none'`` (integer patch indices of the new grid, extrapolated) or ``'pi'`` (indices
            multiplied by training / evaluated grid per axis, so a larger grid covers the trained range; see
            :mod:`zoo.encodings.extrapolation`).
        random_positions: ``None``, ``'subset'``, ``'cape'`` or a dict (:mod:`zoo.encodings.randomized`): per-sample
            random (row, col) coordinates in training; the integer grid in eval.
    """
    family = 'sin-cos 2D (fixed)'
    adaptation = 'recomputed on the integer patch indices of the new grid (extrapolation)'
    supports_video = False
    extrapolation_strategies = COORDINATE_STRATEGIES

    def __init__(self, dim: int, temperature: float = 10000., grid_size: Optional[Tuple[int, ...]] = None,
                 extrapolation: Any = 'none', random_positions: Any = None):
        super().__init__()
        refuse_video_grid('sincos', grid_size, "'sincos1d' (VideoMAE) or 'sincos3d' (V-JEPA)")
        self.random_positions = RandomPositions.parse(random_positions, 'sincos')
        self._extrapolation = Extrapolation.parse(extrapolation, grid_size, self.extrapolation_strategies, 'sincos')
        if dim % 4:
            raise ValueError(f'sincos needs an embedding dim divisible by 4, got {dim}; change embed_dim')
        if not temperature > 0:
            raise ValueError(f'sincos temperature must be > 0, got {temperature}')
        self.dim = dim
        self.temperature = temperature
        self._cache = TableCache()

    def table(self, hw: Tuple[int, int], device: torch.device) -> torch.Tensor:
        """``(1, H*W, C)`` float32 table for grid ``hw``."""
        factors = self.extrapolation.factors(hw, 'sincos')
        if all(f == 1.0 for f in factors):
            return self._cache.get((tuple(hw), device), lambda: build_sincos2d_pos_embed(
                list(hw), dim=self.dim, temperature=self.temperature, device=device).unsqueeze(0))
        return self._cache.get((tuple(hw), device, self.extrapolation.key()), lambda: sincos2d_at(
            self.extrapolation.coords(grid_coords((1, *hw), device)[:, 1:], factors), self.dim,
            self.temperature).unsqueeze(0))

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        hw = pos.hw_2d('sincos')
        if self.training and self.random_positions.active:  # per-sample random coordinates: (B, N, C), not cached
            coords = self.random_positions.draw((1, *hw), x.shape[0], x.device)[..., 1:]
            table = sincos2d_at(self.extrapolation.coords(coords, self.extrapolation.factors(hw, 'sincos')),
                                self.dim, self.temperature)
        else:
            table = self.table(hw, x.device)
        return add_to_patches(x, table.to(x.dtype), pos.num_prefix_tokens)


def sinusoid_table_1d(num_positions, dim: int, temperature: float = 10000.,
                      device: Optional[torch.device] = None) -> torch.Tensor:
    """VideoMAE's ``get_sinusoid_encoding_table``: ``(num_positions, dim)``, built in float64, returned float32.

    ``table[n, j] = sin(n / temperature^(2 floor(j/2) / dim))`` for even ``j`` and ``cos(...)`` for odd ``j``
    (interleaved). Float64 matters: float32 angles are off by up to 1e-4 at ``n ~ 1500``.
    """
    n = torch.arange(num_positions, dtype=torch.float64, device=device)[:, None]
    j = torch.arange(dim, device=device)
    angle = n / temperature ** (2 * torch.div(j, 2, rounding_mode='floor').double() / dim)
    return torch.where(j % 2 == 0, angle.sin(), angle.cos()).float()


def videomae_v2_resize(table: torch.Tensor, old_grid: Sequence[int], new_grid: Sequence[int]) -> torch.Tensor:
    """VideoMAE V2's position-table resize (``run_class_finetuning.py``): spatial bicubic per (t, channel), then
    temporal linear per (h, w, channel), both ``align_corners=False``, float32.

    Args:
        table: ``(1, T*H*W, C)`` t-major table.
        old_grid, new_grid: ``(T, H, W)``.

    Returns:
        ``(1, T'*H'*W', C)`` in ``table``'s dtype.
    """
    t, h, w = old_grid
    nt, nh, nw = new_grid
    c = table.shape[-1]
    x = table.float().reshape(t, h, w, c)
    if (nh, nw) != (h, w) or is_exporting():
        x = F.interpolate(x.permute(0, 3, 1, 2), size=(nh, nw), mode='bicubic', align_corners=False)
        x = x.permute(0, 2, 3, 1)
    if nt != t or is_exporting():
        x = F.interpolate(x.reshape(t, nh * nw * c).t()[None], size=nt, mode='linear', align_corners=False)
        x = x[0].t().reshape(nt, nh, nw, c)
    return x.reshape(1, nt * nh * nw, c).to(table.dtype)


@register_pos_encoding('sincos1d')
class SinCos1D(PosEncoding):
    """VideoMAE's fixed 1D sin-cos table over the flattened (t-major, row-major) token index, added to the patches.

    The table ignores the grid's shape: only the token count ``T*H*W`` matters, so the same index ``n`` means a
    different (t, row, col) when the frame size changes. More frames / a bigger frame: ``resize='rebuild'``
    (default, what the official code does) builds a longer table, whose first rows are unchanged (1D extrapolation).
    ``resize='interpolate'`` builds the table at the training ``grid_size`` and resizes it with VideoMAE V2's
    fine-tuning rule (:func:`videomae_v2_resize`: bicubic over (h, w), then linear over t).

    Args:
        dim: embedding width C (even).
        grid_size: training grid ``(T', H', W')`` (or ``(H, W)``); only ``resize='interpolate'`` uses it.
        temperature: frequency base (10000).
        resize: ``'rebuild'`` or ``'interpolate'``.

    Raises:
        ValueError: odd ``dim``, bad ``temperature`` or ``resize``, ``resize='interpolate'`` without ``grid_size``.
    """
    family = 'sin-cos 1D over the token index (fixed, VideoMAE)'
    RESIZE = ('rebuild', 'interpolate')

    def __init__(self, dim: int, grid_size: Optional[Tuple[int, ...]] = None, temperature: float = 10000.,
                 resize: str = 'rebuild'):
        super().__init__()
        if dim % 2:
            raise ValueError(f'sincos1d needs an even embedding dim, got {dim}; change embed_dim')
        if not temperature > 0:
            raise ValueError(f'sincos1d temperature must be > 0, got {temperature}')
        if resize not in self.RESIZE:
            raise ValueError(f'sincos1d resize must be one of {self.RESIZE}, got {resize!r}')
        if resize == 'interpolate' and grid_size is None:
            raise ValueError("sincos1d resize='interpolate' resizes the table of the training grid; pass grid_size")
        self.dim, self.temperature, self.resize = dim, float(temperature), resize
        self.grid_size = None if grid_size is None else as_thw(parse_grid_size('sincos1d', grid_size))
        self.adaptation = ('table rebuilt for the new token count (1D extrapolation over the flattened index)'
                           if resize == 'rebuild' else
                           'training-grid table resized: bicubic over (h, w), then linear over t (VideoMAE V2)')
        self._cache = TableCache()

    def table(self, grid: Sequence[int], device: Optional[torch.device] = None) -> torch.Tensor:
        """``(1, T*H*W, C)`` float32 table for the ``(T, H, W)`` grid ``grid``."""
        grid = tuple(grid)

        def build():
            if self.resize == 'rebuild':
                return sinusoid_table_1d(math.prod(grid), self.dim, self.temperature, device).unsqueeze(0)
            base = sinusoid_table_1d(math.prod(self.grid_size), self.dim, self.temperature, device).unsqueeze(0)
            if grid == self.grid_size and not is_exporting():
                return base
            return videomae_v2_resize(base, self.grid_size, grid)
        return self._cache.get((grid, device), build)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        if pos.grid is None:
            raise ValueError('sincos1d needs a patch grid (Positions.grid), not explicit ids')
        return add_to_patches(x, self.table(pos.grid, x.device).to(x.dtype), pos.num_prefix_tokens)

    def set_grid_size(self, grid_size: Tuple[int, ...]) -> None:
        if self.resize == 'interpolate':
            self.grid_size = as_thw(parse_grid_size('sincos1d', grid_size))
            self._cache.clear()


def sincos_table_3d(grid: Sequence[int], dim: int, temperature: float = 10000., uniform_power: bool = False,
                    device: Optional[torch.device] = None) -> torch.Tensor:
    """V-JEPA's ``get_3d_sincos_pos_embed``: ``(T*H*W, dim)`` float32 (built in float64), rows t-major.

    Channels ``[t block | h block | w block]``, each block ``[sin(p w) | cos(p w)]`` (halves) with
    ``w_j = temperature^(-j / (d / 2))`` for a block of width ``d`` and ``p`` the integer tubelet / patch index.
    ``uniform_power=False``: t gets ``dim / 2`` channels, h and w ``dim / 4`` each. ``uniform_power=True``: every block
    has ``ceil(dim / 6) * 2`` channels and the concatenation is cut to ``dim``.
    """
    return sincos3d_at(grid_coords(grid, device), dim, temperature, uniform_power)


def sincos3d_at(coords: torch.Tensor, dim: int, temperature: float = 10000.,
                uniform_power: bool = False) -> torch.Tensor:
    """:func:`sincos_table_3d`'s channels at arbitrary ``(t, row, col)`` positions ``coords`` ``(..., 3)`` (computed
    in float64). Returns ``(..., dim)`` float32."""
    coords = coords.double()
    widths = [int(math.ceil(dim / 6) * 2)] * 3 if uniform_power else [dim // 2, dim // 4, dim // 4]
    blocks = []
    for axis, d in enumerate(widths):
        omega = 1.0 / temperature ** (torch.arange(d // 2, dtype=torch.float64, device=coords.device) / (d / 2.0))
        out = coords[..., axis, None] * omega
        blocks += [out.sin(), out.cos()]
    return torch.cat(blocks, dim=-1)[..., :dim].float()


@register_pos_encoding('sincos3d')
class SinCos3D(PosEncoding):
    """Fixed factorised 3D sin-cos table ``[t | h | w]`` (V-JEPA / MAE-ST), see :func:`sincos_table_3d`.

    Positions are integer tubelet and patch indices, so more frames or a bigger frame simply evaluate the same
    formula at larger indices (extrapolation); the rows of the trained grid are unchanged. Prefix tokens get no
    embedding. On an image grid ``(1, H, W)`` the t block is the constant of position 0.

    Args:
        dim: embedding width C (divisible by 8 unless ``uniform_power``).
        temperature: frequency base (10000).
        uniform_power: equal channel blocks for t, h, w (V-JEPA's ``uniform_power=True``) instead of t: C/2,
            h, w: C/4.
        random_positions: ``None``, ``'subset'``, ``'cape'`` or a dict (:mod:`zoo.encodings.randomized`): per-sample
            random (t, row, col) coordinates in training; the integer grid in eval.

    Raises:
        ValueError: ``dim`` not divisible by 8 (``uniform_power=False``) or bad ``temperature``.
    """
    family = 'sin-cos 3D factorised (fixed)'
    adaptation = 'recomputed on the integer tubelet / patch indices of the new grid (extrapolation in t, h, w)'

    def __init__(self, dim: int, temperature: float = 10000., uniform_power: bool = False,
                 random_positions: Any = None):
        super().__init__()
        self.random_positions = RandomPositions.parse(random_positions, 'sincos3d')
        if not uniform_power and dim % 8:
            raise ValueError(f'sincos3d gives t dim/2 and h, w dim/4 channels as sin|cos halves, so dim must be '
                             f'divisible by 8, got {dim}; change embed_dim or pass uniform_power=True')
        if uniform_power and dim < 3:
            raise ValueError(f'sincos3d needs dim >= 3, got {dim}')
        if not temperature > 0:
            raise ValueError(f'sincos3d temperature must be > 0, got {temperature}')
        self.dim, self.temperature, self.uniform_power = dim, float(temperature), bool(uniform_power)
        self._cache = TableCache()

    def table(self, grid: Sequence[int], device: Optional[torch.device] = None) -> torch.Tensor:
        """``(1, T*H*W, C)`` float32 table for the ``(T, H, W)`` grid ``grid``."""
        return self._cache.get((tuple(grid), device), lambda: sincos_table_3d(
            grid, self.dim, self.temperature, self.uniform_power, device).unsqueeze(0))

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        if pos.grid is None:
            raise ValueError('sincos3d needs a patch grid (Positions.grid), not explicit ids')
        if self.training and self.random_positions.active:  # per-sample random coordinates: (B, N, C), not cached
            coords = self.random_positions.draw(pos.grid, x.shape[0], x.device)
            table = sincos3d_at(coords, self.dim, self.temperature, self.uniform_power)
        else:
            table = self.table(pos.grid, x.device)
        return add_to_patches(x, table.to(x.dtype), pos.num_prefix_tokens)


@register_pos_encoding('nope')
class NoPE(PosEncoding):
    """No position encoding (NoPE): attention is permutation-equivariant over patches, for any grid (images and
    videos alike); nothing changes with more frames or a bigger frame."""
    family = 'none (NoPE)'
    adaptation = 'nothing to adapt'

    def __init__(self):
        super().__init__()
