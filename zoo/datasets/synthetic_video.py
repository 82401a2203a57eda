"""A labelled synthetic video set of real MP4 files whose classes need time to tell apart (``zoo make-videos``).

Eight classes, each a coloured shape (white rim) over moving backgrounds cut from real clips:

* ``motion_left``, ``motion_right``, ``motion_up``, ``motion_down``: one shape moves steadily across the frame; it
  starts anywhere, so no single frame tells the direction;
* ``order_red_first``, ``order_blue_first``: a red and a blue square appear one after the other at random places and
  stay; the last frame shows both;
* ``speed_slow``, ``speed_fast``: one shape swings back and forth once, or three times, over the clip.

``--task ranking`` / ``--task steps`` write the diagnostic tasks of :mod:`zoo.datasets.diagnostic_video` instead
(classes that only the order or time of tubelet-aligned events separates; the PE-ranking task of
``benchmarks/video_sweep.py``), on generated backgrounds.

Layout: ``<out>/train/<class>/<class>_NNNNN.mp4`` and ``<out>/val/<class>/...`` (the video-folder layout of
:class:`zoo.datasets.video_folder.SafeVideoFolder`), H.264 through PyAV, plus ``<out>/meta.json``. Every clip is drawn
from its own generator seeded by ``(seed, split, class, index)``: the same arguments give the same frames.
"""
from __future__ import annotations

import argparse
import logging
import os
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
from tqdm import tqdm

from ._synth import (COLORS, DEFAULT_CLIPS_DIR, SHAPES, background_segments, check_size, generator_main,
                     generator_parser, paint, pick_background, prepare_output, run_script, shape_mask, write_meta,
                     write_mp4)

_logger = logging.getLogger('zoo.datasets')

__all__ = ['CLASSES', 'VIDEO_TASKS', 'make_videos', 'render_clip', 'main']

CLASSES = ('motion_down', 'motion_left', 'motion_right', 'motion_up', 'order_blue_first', 'order_red_first',
           'speed_fast', 'speed_slow')
_SPLITS = ('train', 'val')
# --task: the original eight classes, or a diagnostic task (zoo.datasets.diagnostic_video.TASKS)
VIDEO_TASKS = ('basic', 'ranking', 'steps')


def render_clip(cls: str, num_frames: int, size: int, background: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draw one clip of class ``cls`` on ``background`` ``(T, size, size, 3)`` uint8 (modified and returned)."""
    t_axis = np.arange(num_frames) / max(1, num_frames - 1)
    frames = background
    r = size * rng.uniform(0.09, 0.13)
    if cls.startswith('motion_'):
        shape, color = SHAPES[rng.integers(len(SHAPES))], list(COLORS.values())[rng.integers(len(COLORS))]
        dist = size * rng.uniform(0.4, 0.55)
        a0 = rng.uniform(r, size - r - dist)  # along the motion axis
        b = rng.uniform(r, size - r)          # across it
        sign = 1 if cls in ('motion_right', 'motion_down') else -1
        for t, f in zip(t_axis, frames):
            a = a0 + dist * t if sign > 0 else size - (a0 + dist * t)
            cx, cy = (a, b) if cls in ('motion_left', 'motion_right') else (b, a)
            paint(f, shape_mask(shape, size, cx, cy, r), color)
    elif cls.startswith('order_'):
        first, second = ('red', 'blue') if cls == 'order_red_first' else ('blue', 'red')
        left = rng.random() < 0.5  # which side the first square is on
        xs = (rng.uniform(r, size / 2 - r), rng.uniform(size / 2 + r, size - r))
        pos = [(xs[0] if left else xs[1], rng.uniform(r, size - r)),
               (xs[1] if left else xs[0], rng.uniform(r, size - r))]
        t1 = int(rng.integers(int(0.1 * num_frames), int(0.35 * num_frames) + 1))
        t2 = int(rng.integers(t1 + max(2, int(0.2 * num_frames)), int(0.75 * num_frames) + 1))
        for t, f in enumerate(frames):
            for name, (cx, cy), t0 in ((first, pos[0], t1), (second, pos[1], t2)):
                if t >= t0:
                    paint(f, shape_mask('square', size, cx, cy, r), COLORS[name])
    elif cls.startswith('speed_'):
        shape, color = SHAPES[rng.integers(len(SHAPES))], list(COLORS.values())[rng.integers(len(COLORS))]
        swings = 1 if cls == 'speed_slow' else 3
        amp = size * rng.uniform(0.2, 0.3)
        c0 = rng.uniform(r + amp, size - r - amp)
        b = rng.uniform(r, size - r)
        horizontal = rng.random() < 0.5
        phase = rng.uniform(0, 2 * np.pi)
        for t, f in zip(t_axis, frames):
            a = c0 + amp * np.sin(2 * np.pi * swings * t + phase)
            cx, cy = (a, b) if horizontal else (b, a)
            paint(f, shape_mask(shape, size, cx, cy, r), color)
    else:
        raise ValueError(f'unknown class {cls!r}; classes are {", ".join(CLASSES)}')
    return frames


def make_videos(out_dir: str, num_per_class: int = 32, num_frames: int = 16, size: int = 64, seed: int = 0,
                clips_dir: Optional[str] = DEFAULT_CLIPS_DIR, val_per_class: Optional[int] = None, fps: int = 8,
                classes: Optional[Sequence[str]] = None, progress: bool = True, task: str = 'basic',
                blocks: int = 4, write_splits: Sequence[str] = _SPLITS, overwrite: bool = False) -> Dict:
    """Write the synthetic video-folder set.

    Args:
        out_dir: output root (created; it must be new or empty unless ``overwrite``).
        num_per_class: training clips per class.
        num_frames: frames per clip.
        size: frame height and width in pixels (even).
        seed: base seed.
        clips_dir: folder of real clips for the backgrounds of task ``basic`` (missing: generated backgrounds, with a
            warning); the diagnostic tasks always use generated backgrounds.
        val_per_class: validation clips per class (default ``max(1, num_per_class // 4)``).
        fps: frame rate written in the files.
        classes: subset of the task's classes (default all: :data:`CLASSES`, or
            :data:`zoo.datasets.diagnostic_video.TASKS` ``[task]``).
        progress: show a tqdm bar.
        task: ``basic`` (the eight classes above), ``ranking`` or ``steps`` (:mod:`zoo.datasets.diagnostic_video`).
        blocks: diagnostic tasks: blocks per clip, the training tubelet count (``num_frames`` must be a multiple).
        write_splits: the splits whose files are written (``meta.json`` records both): a diagnostic set trained with
            ``zoo train --in-memory-clips`` needs only its validation files for ``zoo eval-frames`` (``zoo demo``).
        overwrite: replace the set in a non-empty ``out_dir``: its ``meta.json`` is removed first, then its
            ``train/`` and ``val/``; ``meta.json`` is written last, so a run cut short leaves none.

    Returns:
        The metadata written to ``<out_dir>/meta.json`` (arguments, classes, counts, seconds taken).

    Raises:
        ValueError: non-positive counts, odd or tiny size, fewer than 4 frames, unknown task or class, frames not a
            multiple of ``blocks``.
        FileExistsError: ``out_dir`` is not empty and ``overwrite`` is false.
    """
    from .diagnostic_video import TASKS, DiagnosticClips, block_bounds
    if task not in VIDEO_TASKS:
        raise ValueError(f'unknown --task {task!r}; choose one of {", ".join(VIDEO_TASKS)}')
    all_classes = CLASSES if task == 'basic' else TASKS[task]
    classes = all_classes if classes is None else tuple(classes)
    if num_per_class < 1:
        raise ValueError(f'--num-per-class must be at least 1, got {num_per_class}')
    if val_per_class is not None and val_per_class < 0:
        raise ValueError(f'--val-per-class must be 0 or more (0 writes no validation clips), got {val_per_class}')
    if num_frames < 4:
        raise ValueError(f'--frames must be >= 4 so that motion and order can be seen, got {num_frames}')
    check_size(size)
    if fps < 1:
        raise ValueError(f'fps must be >= 1, got {fps}')
    bad = [c for c in classes if c not in all_classes]
    if bad or not classes:
        raise ValueError(f'unknown classes {bad} for --task {task}; choose from {", ".join(all_classes)}')
    if task != 'basic':
        block_bounds(num_frames, blocks)
    val_per_class = max(1, num_per_class // 4) if val_per_class is None else val_per_class
    t0 = time.time()
    counts = {'train': num_per_class, 'val': val_per_class}
    if task == 'basic':
        segs = background_segments(clips_dir, size, num_frames + 8, seed=seed)
    else:
        sets = {split: DiagnosticClips(task, split, max(1, counts[split]), num_frames, size, blocks, seed)
                for split in _SPLITS}
        segs, clips_dir = sets['train'].backgrounds, None
    if not set(write_splits) <= set(_SPLITS) or (task == 'basic' and tuple(write_splits) != _SPLITS):
        raise ValueError(f'write_splits {list(write_splits)}: a subset of {list(_SPLITS)}, diagnostic tasks only')
    prepare_output(out_dir, overwrite, _SPLITS)
    jobs = [(split, ci, cls, i) for split in _SPLITS if split in write_splits for ci, cls in enumerate(classes)
            for i in range(counts[split])]
    for split, ci, cls, i in tqdm(jobs, desc='make-videos', unit='clip', disable=not progress):
        if task == 'basic':
            rng = np.random.default_rng([seed, _SPLITS.index(split), CLASSES.index(cls), i])
            frames = render_clip(cls, num_frames, size, pick_background(segs, num_frames, rng), rng)
        else:  # the in-memory set's frames of this clip
            ds = sets[split]
            frames = ds.frames(ds.classes.index(cls) * ds.per_class + i)[0]
        folder = os.path.join(out_dir, split, cls)
        os.makedirs(folder, exist_ok=True)
        write_mp4(os.path.join(folder, f'{cls}_{i:05d}.mp4'), frames, fps=fps)
    meta = dict(generator='zoo.datasets.synthetic_video', task=task, classes=list(classes), num_per_class=counts,
                num_frames=num_frames, size=size, fps=fps, seed=seed, num_background_segments=len(segs))
    if task != 'basic':
        meta.update(blocks=blocks, written_splits=[s for s in _SPLITS if s in write_splits])
    meta = write_meta(out_dir, meta, clips_dir, t0)
    _logger.info('make-videos: %d clips in %.1f s (%.0f clips/s)', len(jobs), meta['seconds'],
                 len(jobs) / max(meta['seconds'], 1e-9))
    return meta


def build_parser() -> argparse.ArgumentParser:
    p = generator_parser(make_videos, 'Write a labelled synthetic video set of real MP4 files in video-folder layout: '
                         'classes that need time (--task basic: direction, order, speed; ranking: the order and '
                         'time of tubelet-aligned flashes, which NoPE cannot tell apart; steps: block-wise moves).',
                         'train/ and val/',
                         ('num_per_class', 'training clips per class'), 'frames per clip',
                         'frame rate written in the files', 'the backgrounds')
    p.add_argument('--val-per-class', type=int, default=None, help='validation clips per class (default N/4)')
    p.add_argument('--task', choices=VIDEO_TASKS, default='basic',
                   help='basic: the eight motion / order / speed classes on real-clip backgrounds (solvable without '
                        'positions); ranking: red-then-blue vs blue-then-red flashes of equal on-screen time in '
                        'tubelet-aligned blocks, plus one flash in the first vs the last block (the PE-ranking task: '
                        'no PE, at best 50 %%); steps: a shape stepping left / right / up / down one step per block '
                        '(harder). The diagnostic tasks use generated backgrounds (default basic)')
    p.add_argument('--blocks', type=int, default=4,
                   help='ranking / steps: blocks per clip, nothing moves inside one; use the training tubelet count '
                        '(8 sampled frames, 2-frame tubelets: 4); --frames must be a multiple (default 4)')
    return p


def _summary(meta: Dict) -> str:
    n = sum(meta['num_per_class'].values()) * len(meta['classes'])
    return f'{n} clips ({len(meta["classes"])} classes, {meta["num_frames"]} frames of {meta["size"]}x{meta["size"]})'


def _make_from_cli(clips_dir: Optional[str] = None, task: str = 'basic', **kwargs) -> Dict:
    """:func:`make_videos` with ``--clips-dir`` given (not ``None``) or not: only task ``basic`` uses real clips, so
    a folder given with a diagnostic task is said to be unused."""
    if clips_dir is not None and task != 'basic':
        _logger.warning('--clips-dir %s is not used: --task %s draws generated backgrounds (only --task basic cuts '
                        'backgrounds from real clips)', clips_dir, task)
    return make_videos(clips_dir=DEFAULT_CLIPS_DIR if clips_dir is None else clips_dir, task=task, **kwargs)


def main(argv: Optional[List[str]] = None) -> int:
    """``zoo make-videos``: parse ``argv``, write the set, print a one-line summary."""
    parser = build_parser()
    parser.set_defaults(clips_dir=None)  # tells a --clips-dir given from the default (the help keeps the default)
    return generator_main(parser, _make_from_cli, argv, _summary)


if __name__ == '__main__':
    run_script(main)
