"""Grid-size helpers shared by the encodings: 2D ``(H, W)`` image geometry vs 3D ``(T, H, W)`` video geometry."""
from __future__ import annotations

from typing import Sequence, Tuple

import torch
import torch.nn.functional as F

__all__ = ['parse_grid_size', 'as_thw', 'resample_grid_table', 'refuse_video_grid']


def parse_grid_size(name: str, grid_size: Sequence[int]) -> Tuple[int, ...]:
    """``grid_size`` as a tuple: ``(H, W)`` in patches for images or ``(T, H, W)`` (tubelets, patch rows, patch
    columns) for videos.

    Raises:
        ValueError: not 2 or 3 positive integers, naming the encoding ``name``.
    """
    try:
        size = tuple(int(s) for s in grid_size)
    except TypeError:
        size = ()
    if len(size) not in (2, 3) or min(size) < 1:
        raise ValueError(f'{name}: grid_size must be (H, W) patches for images or (T, H, W) tubelets x patches for '
                         f'videos, all >= 1; got {grid_size!r}')
    return size


def as_thw(grid_size: Sequence[int]) -> Tuple[int, int, int]:
    """``(T, H, W)`` of a 2- or 3-tuple grid size (an image is one frame)."""
    return tuple(grid_size) if len(grid_size) == 3 else (1, grid_size[0], grid_size[1])


def refuse_video_grid(name: str, grid_size, use_instead: str) -> None:
    """ValueError when an image-only encoding ``name`` is built with a 3-tuple (video) ``grid_size``."""
    if grid_size is not None and len(tuple(grid_size)) == 3:
        raise ValueError(f'{name} is a 2D image encoding; a video geometry grid_size={tuple(grid_size)} needs a 3D '
                         f'kind: {use_instead}')


def resample_grid_table(table: torch.Tensor, old_grid: Sequence[int], new_grid: Sequence[int],
                        mode: str = 'trilinear') -> torch.Tensor:
    """Resample a per-cell table ``(1, T*H*W, C)`` (t-major, row-major) to another ``(T', H', W')`` grid.

    ``F.interpolate`` over the ``(1, C, T, H, W)`` volume with ``align_corners=False`` (cell centres aligned), in
    float32; the result has ``table``'s dtype. The same grid gives the same table (interpolation weights 1 and 0).

    Returns:
        ``(1, T'*H'*W', C)``.
    """
    t, h, w = old_grid
    c = table.shape[-1]
    vol = table.float().reshape(1, t, h, w, c).permute(0, 4, 1, 2, 3)
    kwargs = {} if mode == 'nearest' else dict(align_corners=False)
    vol = F.interpolate(vol, size=tuple(new_grid), mode=mode, **kwargs)
    return vol.permute(0, 2, 3, 4, 1).reshape(1, -1, c).to(table.dtype)
