"""AnyRes tiling of a high-resolution image: a ``cols x rows`` grid of square tiles plus a thumbnail (InternVL's
dynamic high resolution, as used by CoMemo's RoPE-DHR).

The rule (InternVL / CoMemo ``dynamic_preprocess``, "InternVL 1.5: How Far Are We to GPT-4V?", Chen et al.,
arXiv:2404.16821, Sec. 3.2; CoMemo, Liu et al., arXiv:2506.06279):

* Candidate grids: every ``(cols, rows)`` with ``min_tiles <= cols * rows <= max_tiles``, taken in order of
  increasing tile count (equal counts in the order Python iterates the set of grids, as the official code does; it
  matters only when two grids of one count are equally close to the image's aspect ratio).
* The grid whose aspect ratio ``cols / rows`` is closest to the image's ``width / height`` wins; a later candidate
  with the *same* distance replaces it when the image's area in pixels exceeds half the candidate's area
  (``width * height > 0.5 * tile_size**2 * cols * rows``): a large image takes the grid with more tiles.
* The image is resized to ``(rows * tile_size, cols * tile_size)`` px and cut into tiles in crop order, row by row
  (tile ``t`` is row ``t // cols``, column ``t % cols``). When there is more than one tile, a thumbnail (the whole
  image resized to ``tile_size``) follows the tiles.

Several images in one prompt: the official multi-image path gives each image ``max(1, max_tiles // num_images)``
tiles at most (:func:`tiles_per_image`).

Resizing: bicubic with antialiasing on float tensors (``F.interpolate``), where the official code uses PIL's bicubic
``resize``; the grid choice does not depend on it.
"""
from __future__ import annotations

from typing import List, Tuple

import torch
import torch.nn.functional as F

__all__ = ['tile_grid_candidates', 'choose_tile_grid', 'tile_image', 'tiles_per_image', 'num_crops']


def _check_counts(min_tiles: int, max_tiles: int) -> None:
    for name, v in (('min_tiles', min_tiles), ('max_tiles', max_tiles)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f'{name} must be a positive int (tiles), got {v!r}')
    if min_tiles > max_tiles:
        raise ValueError(f'min_tiles={min_tiles} > max_tiles={max_tiles}; fix: min_tiles <= max_tiles')


def tile_grid_candidates(min_tiles: int = 1, max_tiles: int = 6) -> List[Tuple[int, int]]:
    """The ``(cols, rows)`` grids with ``min_tiles <= cols * rows <= max_tiles``, by increasing tile count (equal
    counts in the set order the official code iterates).

    Raises:
        ValueError: counts that are not positive ints, or ``min_tiles > max_tiles``.
    """
    _check_counts(min_tiles, max_tiles)
    grids = {(c, r) for n in range(min_tiles, max_tiles + 1) for c in range(1, n + 1) for r in range(1, n + 1)
             if min_tiles <= c * r <= max_tiles}
    return sorted(grids, key=lambda g: g[0] * g[1])


def choose_tile_grid(width: int, height: int, tile_size: int, min_tiles: int = 1,
                     max_tiles: int = 6) -> Tuple[int, int]:
    """The AnyRes grid ``(cols, rows)`` of a ``width x height`` px image (the rule in the module docstring).

    Args:
        width, height: image size in px.
        tile_size: tile side in px (the vision tower's input size; 448 for InternVL / CoMemo).
        min_tiles, max_tiles: bounds on ``cols * rows`` (CoMemo's ``max_dynamic_patch`` is the upper one).

    Returns:
        ``(cols, rows)``, e.g. ``(2, 1)`` for an 896 x 448 px image.

    Raises:
        ValueError: non-positive sizes or counts.
    """
    if min(int(width), int(height), int(tile_size)) < 1:
        raise ValueError(f'image {width}x{height} px and tile_size {tile_size} px must be positive')
    aspect = width / height
    area = width * height
    best, best_diff = (1, 1), float('inf')
    for cols, rows in tile_grid_candidates(min_tiles, max_tiles):
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > 0.5 * tile_size * tile_size * cols * rows:
            best = (cols, rows)
    return best


def num_crops(cols: int, rows: int) -> int:
    """Crops of a ``cols x rows`` tiling: the tiles, plus the thumbnail when there is more than one tile."""
    return cols * rows + (cols * rows > 1)


def tiles_per_image(max_tiles: int, num_images: int) -> int:
    """The tile budget of each of ``num_images`` images of one prompt: ``max(1, max_tiles // num_images)``."""
    return max(1, int(max_tiles) // max(1, int(num_images)))


def tile_image(image: torch.Tensor, cols: int, rows: int, tile_size: int, thumbnail: bool = True) -> torch.Tensor:
    """Cut an image into its AnyRes tiles (crop order, row-major) and, for more than one tile, the thumbnail.

    Args:
        image: ``(C, H, W)`` float (any normalisation; resizing is linear in the values).
        cols, rows: the grid (:func:`choose_tile_grid`).
        tile_size: tile side in px.
        thumbnail: append the thumbnail when ``cols * rows > 1``.

    Returns:
        ``(K, C, tile_size, tile_size)`` with ``K = cols * rows (+ 1)``, same dtype as ``image``.

    Raises:
        ValueError: an image that is not a float ``(C, H, W)`` tensor, or a non-positive grid.
    """
    if not isinstance(image, torch.Tensor) or image.dim() != 3 or not image.is_floating_point():
        raise ValueError(f'tile_image takes a float (C, H, W) image, got {getattr(image, "shape", type(image))} '
                         f'{getattr(image, "dtype", "")}')
    if min(int(cols), int(rows), int(tile_size)) < 1:
        raise ValueError(f'tile grid {cols}x{rows} and tile_size {tile_size} must be positive')
    ts = int(tile_size)

    def resize(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
        if tuple(x.shape[-2:]) == (h, w):
            return x
        return F.interpolate(x[None], size=(h, w), mode='bicubic', antialias=True, align_corners=False)[0]

    big = resize(image, rows * ts, cols * ts)
    crops = big.unflatten(1, (rows, ts)).unflatten(3, (cols, ts)).permute(1, 3, 0, 2, 4).reshape(
        rows * cols, image.shape[0], ts, ts)
    if thumbnail and cols * rows > 1:
        crops = torch.cat([crops, resize(image, ts, ts)[None]])
    return crops
