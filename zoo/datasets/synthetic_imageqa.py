"""A synthetic high-resolution image-QA set for tiled images (``zoo make-imageqa``): which AnyRes tile holds the
object?

Task ``tile_position``: an image of ``cols x rows`` tiles of ``tile_size`` px (grids ``2x1``, ``1x2``, ``2x2``,
``3x1``, ``1x3`` by default; each image size is an exact multiple of the tile size, so the AnyRes rule of
:func:`zoo.models.vlm.tiling.choose_tile_grid` picks that very grid for a model whose ``max_tiles`` is at least
``cols * rows``), grey noise, a small target shape (``object_size`` = 0.25 of the tile wide by default) inside one
tile and ``distractors`` (default 1) shapes of other shapes and colours in other tiles. The question names the
target ("Which tile holds the red circle?") and the options are the grid's tile names in crop order (row-major: "top
left", "top right", ... for ``2x2``; "left", "right" for ``2x1``), so the number of options is the number of tiles
(2 to 4 by default). By default the target is small (8 px wide on 32 px tiles, where one merged token of a patch-8
tower covers 16 px, and squeezed further in the thumbnail); a model must read the tiles and know where each tile
lies, which is what RoPE-DHR's positions give (every tile token at its thumbnail position).

Drawing: the shapes and colours of the synthetic video sets (:func:`zoo.datasets._synth.shape_mask`, ``paint``).

Layout (``zoo train-vlm --benchmark imageqa`` reads it, :mod:`zoo.datasets.videoqa.imageqa`)::

    OUT/json/tile_position.json     [{"image": "tile_position/00000.png", "question", "candidates", "answer",
                                      "cols", "rows", "tile"}, ...]
    OUT/image/tile_position/*.png   RGB, (rows * tile_size) x (cols * tile_size) px
    OUT/meta.json                   the options and counts (written last)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._synth import COLORS, SHAPES, paint, shape_mask

__all__ = ['make_imageqa', 'tile_names', 'IMAGEQA_TASKS', 'DEFAULT_GRIDS', 'main']

IMAGEQA_TASKS = ('tile_position',)
DEFAULT_GRIDS: Tuple[Tuple[int, int], ...] = ((2, 1), (1, 2), (2, 2), (3, 1), (1, 3))
_ROW = {1: [''], 2: ['top', 'bottom'], 3: ['top', 'middle', 'bottom']}
_COL = {1: [''], 2: ['left', 'right'], 3: ['left', 'centre', 'right']}


def tile_names(cols: int, rows: int) -> List[str]:
    """Names of the tiles of a ``cols x rows`` grid in crop order (row-major), e.g. ``['top left', 'top right',
    'bottom left', 'bottom right']``.

    Raises:
        ValueError: a grid with more than 3 columns or rows, or a single tile (nothing to ask).
    """
    if cols not in _COL or rows not in _ROW or cols * rows < 2:
        raise ValueError(f'tile grid {cols}x{rows}: tile_position names tiles of grids up to 3x3 with at least 2 '
                         'tiles; fix: pick grids like 2x1, 1x2, 2x2, 3x1, 1x3')
    return [' '.join(p for p in (_ROW[rows][j], _COL[cols][i]) if p) for j in range(rows) for i in range(cols)]


def _draw_one(rng: np.random.Generator, cols: int, rows: int, tile: int, distractors: int = 1,
              object_size: float = 0.25) -> Tuple[np.ndarray, Dict[str, Any]]:
    h, w = rows * tile, cols * tile
    img = np.clip(rng.normal(128, 12, size=(h, w, 3)), 0, 255).astype(np.uint8)
    r = max(2.0, object_size * tile / 2)
    n = 1 + distractors
    tiles = rng.choice(cols * rows, size=n, replace=False)
    shapes = rng.choice(len(SHAPES), size=n, replace=False)
    colors = rng.choice(len(COLORS), size=n, replace=False)
    names = list(COLORS)
    objs = []
    for k in range(n):  # the target, then the distractors (other shapes, colours and tiles)
        j, i = divmod(int(tiles[k]), cols)
        cx = i * tile + rng.uniform(r + 1, tile - r - 1)
        cy = j * tile + rng.uniform(r + 1, tile - r - 1)
        size = max(h, w)
        mask = shape_mask(SHAPES[int(shapes[k])], size, cx, cy, r)[:h, :w]
        paint(img, mask, COLORS[names[int(colors[k])]])
        objs.append(dict(tile=int(tiles[k]), shape=SHAPES[int(shapes[k])], color=names[int(colors[k])]))
    return img, dict(target=objs[0], distractors=objs[1:])


def _write_png(path: str, img: np.ndarray) -> None:
    from PIL import Image
    from zoo.datasets.files import write_atomic
    write_atomic(path, lambda tmp: Image.fromarray(img).save(tmp, format='PNG'))


def _write_json(path: str, data: Any) -> None:
    from zoo.datasets.files import write_atomic

    def write(tmp: str) -> None:
        with open(tmp, 'w', encoding='utf-8') as f:
            json.dump(data, f, indent=1)
    write_atomic(path, write)


def make_imageqa(out_dir: str, num_per_task: int = 64, tile_size: int = 32, seed: int = 0,
                 tasks: Sequence[str] = IMAGEQA_TASKS, grids: Sequence[Tuple[int, int]] = DEFAULT_GRIDS,
                 distractors: int = 1, overwrite: bool = False, object_size: float = 0.25) -> Dict[str, Any]:
    """Write the image-QA set (layout in the module docstring); deterministic for a seed.

    Args:
        out_dir: output folder (new or empty, unless ``overwrite``).
        num_per_task: questions per task (grids cycle through ``grids``).
        tile_size: tile side in px (the video-LLM tower's input size; even, >= 16).
        seed: the RNG seed.
        tasks: from :data:`IMAGEQA_TASKS`.
        grids: ``(cols, rows)`` grids, each with 2 to 9 tiles, up to 3x3.
        distractors: other shapes drawn (each of another shape and colour, in another tile); fewer than the smallest
            grid's tiles and at most 3.
        overwrite: replace an existing set in ``out_dir``.
        object_size: the shapes' width as a fraction of the tile side (0.25: 8 px on 32 px tiles), at most 0.8.

    Returns:
        The ``meta.json`` content: options, counts per task and grid, seconds taken.

    Raises:
        ValueError: an unknown task, a bad count, tile size or grid.
        FileExistsError: ``out_dir`` holds files and ``overwrite`` is false.
    """
    t0 = time.time()
    unknown = [t for t in tasks if t not in IMAGEQA_TASKS]
    if unknown or not tasks:
        raise ValueError(f'unknown image-QA task(s) {unknown or "(none given)"}; fix: use {list(IMAGEQA_TASKS)}')
    if isinstance(num_per_task, bool) or not isinstance(num_per_task, int) or num_per_task < 1:
        raise ValueError(f'--num-per-task must be a positive int, got {num_per_task!r}')
    if isinstance(tile_size, bool) or not isinstance(tile_size, int) or tile_size < 16 or tile_size % 2:
        raise ValueError(f'--tile-size must be an even number of pixels >= 16, got {tile_size!r}')
    grids = [(int(c), int(r)) for c, r in grids]
    for c, r in grids:
        tile_names(c, r)
    if not grids:
        raise ValueError('--grids needs at least one COLSxROWS grid')
    most = min(3, min(c * r for c, r in grids) - 1)
    if not 0 < float(object_size) <= 0.8:
        raise ValueError(f'--object-size must be in (0, 0.8] (the shape\'s width over the tile side), got '
                         f'{object_size!r}')
    if isinstance(distractors, bool) or not isinstance(distractors, int) or not 0 <= distractors <= most:
        raise ValueError(f'--distractors must be 0-{most} (other shapes, each in another tile of the smallest grid), '
                         f'got {distractors!r}')
    if os.path.isfile(out_dir):
        raise NotADirectoryError(f'--output {out_dir!r} is a file; give a folder (new or empty)')
    if os.path.isdir(out_dir) and os.listdir(out_dir) and not overwrite:
        raise FileExistsError(f'--output {out_dir!r} is not empty; pass --overwrite to replace the set or choose a '
                              'new folder')
    meta_path = os.path.join(out_dir, 'meta.json')
    if os.path.lexists(meta_path):
        os.remove(meta_path)  # a run cut short leaves no meta.json behind
    rng = np.random.default_rng(seed)
    counts: Dict[str, Dict[str, int]] = {}
    for task in tasks:
        os.makedirs(os.path.join(out_dir, 'image', task), exist_ok=True)
        os.makedirs(os.path.join(out_dir, 'json'), exist_ok=True)
        rows_out, per_grid = [], {}
        for k in range(num_per_task):
            cols, rows = grids[k % len(grids)]
            img, objs = _draw_one(rng, cols, rows, tile_size, distractors, float(object_size))
            name = f'{task}/{k:05d}.png'
            _write_png(os.path.join(out_dir, 'image', name), img)
            target = objs['target']
            options = tile_names(cols, rows)
            rows_out.append(dict(image=name, question=f'Which tile holds the {target["color"]} {target["shape"]}?',
                                 candidates=options, answer=options[target['tile']], cols=cols, rows=rows,
                                 tile=target['tile'], distractors=objs['distractors']))
            per_grid[f'{cols}x{rows}'] = per_grid.get(f'{cols}x{rows}', 0) + 1
        _write_json(os.path.join(out_dir, 'json', f'{task}.json'), rows_out)
        counts[task] = per_grid
    meta = dict(kind='imageqa', tasks=list(tasks), num_per_task=num_per_task, tile_size=tile_size, seed=seed,
                distractors=distractors, object_size=float(object_size),
                grids=[list(g) for g in grids], counts=counts, seconds=round(time.time() - t0, 2))
    _write_json(meta_path, meta)
    return meta


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='zoo make-imageqa',
        description='Write a synthetic high-resolution image-QA set for tiled images: which AnyRes tile holds the '
                    'object (OUT/json/<task>.json + OUT/image/<task>/*.png; zoo train-vlm --benchmark imageqa '
                    'reads it).',
        epilog='Example: zoo make-imageqa --output data/imageqa --num-per-task 256 --tile-size 32')
    p.add_argument('--output', required=True, help='output folder (new or empty)')
    p.add_argument('--tasks', nargs='+', default=list(IMAGEQA_TASKS),
                   help=f'tasks ({", ".join(IMAGEQA_TASKS)}; default all)')
    p.add_argument('--num-per-task', type=int, default=64, help='questions per task (default 64)')
    p.add_argument('--tile-size', type=int, default=32, help='tile side in px, the tower input size (default 32)')
    p.add_argument('--grids', nargs='+', default=[f'{c}x{r}' for c, r in DEFAULT_GRIDS],
                   help='tile grids COLSxROWS, cycled over the questions (default: '
                        + ' '.join(f'{c}x{r}' for c, r in DEFAULT_GRIDS) + ')')
    p.add_argument('--distractors', type=int, default=1, help='other shapes drawn, each in another tile (default 1)')
    p.add_argument('--object-size', type=float, default=0.25,
                   help="the shapes' width over the tile side (default 0.25: 8 px on 32 px tiles)")
    p.add_argument('--seed', type=int, default=0, help='RNG seed (default 0)')
    p.add_argument('--overwrite', action='store_true', help='replace an existing set in --output')
    return p


def _grid(text: str) -> Tuple[int, int]:
    try:
        c, r = (int(x) for x in text.lower().split('x'))
        return c, r
    except ValueError:
        raise ValueError(f'--grids takes COLSxROWS such as 2x1, got {text!r}') from None


def main(argv: Optional[List[str]] = None) -> int:
    """``zoo make-imageqa``: write the set, print one summary line."""
    args = build_parser().parse_args(argv)
    meta = make_imageqa(args.output, args.num_per_task, args.tile_size, args.seed, args.tasks,
                        [_grid(g) for g in args.grids], args.distractors, args.overwrite, args.object_size)
    print(f'wrote {sum(sum(c.values()) for c in meta["counts"].values())} questions ({", ".join(meta["tasks"])}; '
          f'grids {" ".join(f"{c}x{r}" for c, r in meta["grids"])}) to {args.output} in {meta["seconds"]} s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
