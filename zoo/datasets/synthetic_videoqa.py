"""A synthetic video-QA set of real MP4 files in MVBench format (``zoo make-videoqa``).

Procedural tasks (shapes with a white rim over moving backgrounds cut from real clips), each answerable only from the
right frames in the right order:

* ``event_order``: two objects flash briefly; which appeared first (or both at once)?
* ``motion_direction``: one object moves steadily; left, right, up or down?
* ``counting``: one object flashes 1-4 times; how many times?
* ``temporal_position``: one object shows up briefly; at the beginning, in the middle or at the end?

And ``vniah``, the visual needle-in-a-haystack test of LongVA ("Long Context Transfer from Language to Vision",
arXiv:2406.16852) on real footage: a haystack of ``length`` frames sampled at ``haystack_fps`` from the real clips,
with a needle frame (a large coloured shape on a plain background) replacing the frames at ``depth`` (0 = start,
1 = end), over a grid of lengths x depths; the question asks the needle's colour or shape. Each item records
``length``, ``depth``, ``needle_start`` / ``needle_end`` (frame indices) and ``needle_time`` (seconds). To see the
needle for sure, sample every frame (``FrameSampling('stride', length)``).

Layout (read by ``load_benchmark('mvbench', out)``): ``<out>/json/<task>.json`` and ``<out>/video/<task>/*.mp4``,
plus ``<out>/meta.json``. Every clip has its own generator seeded by ``(seed, task, index)``.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from tqdm import tqdm

from ._synth import (COLORS, DEFAULT_CLIPS_DIR, SHAPES, background_segments, check_size, generator_main,
                     generator_parser, list_clips, paint, pick_background, run_script, shape_mask, write_meta,
                     write_mp4)

_logger = logging.getLogger('zoo.datasets')

__all__ = ['TASKS', 'make_videoqa', 'main']

TASKS = ('event_order', 'motion_direction', 'counting', 'temporal_position')
_ALL = TASKS + ('vniah',)


def _obj(rng: np.random.Generator, exclude: Optional[Tuple[str, str]] = None) -> Tuple[str, str]:
    while True:
        o = (list(COLORS)[rng.integers(len(COLORS))], SHAPES[rng.integers(len(SHAPES))])
        if exclude is None or (o[0] != exclude[0] and o[1] != exclude[1]):
            return o


def _name(o: Tuple[str, str]) -> str:
    return f'{o[0]} {o[1]}'


def _draw(frame: np.ndarray, o: Tuple[str, str], cx: float, cy: float, r: float) -> None:
    paint(frame, shape_mask(o[1], frame.shape[0], cx, cy, r), COLORS[o[0]])


def _procedural(task: str, frames: np.ndarray, rng: np.random.Generator) -> Tuple[str, List[str], str, Dict]:
    """Draw the task's events on ``frames`` (T, S, S, 3) in place; return question, candidates, answer, extras."""
    t_len, size = frames.shape[0], frames.shape[1]
    r = size * rng.uniform(0.1, 0.13)

    def pos() -> Tuple[float, float]:
        return rng.uniform(r, size - r), rng.uniform(r, size - r)

    if task == 'event_order':
        a = _obj(rng)
        b = _obj(rng, exclude=a)
        dur = max(2, t_len // 8)
        case = int(rng.integers(3))  # 0: a first, 1: b first, 2: together
        early = int(rng.integers(0, t_len // 2 - dur + 1))
        late = int(rng.integers(t_len // 2, t_len - dur + 1))
        ta, tb = {0: (early, late), 1: (late, early), 2: (early, early)}[case]
        xa, xb = (rng.uniform(r, size / 2 - r), rng.uniform(size / 2 + r, size - r))
        if rng.random() < 0.5:
            xa, xb = xb, xa
        ya, yb = rng.uniform(r, size - r), rng.uniform(r, size - r)
        for t, f in enumerate(frames):
            if ta <= t < ta + dur:
                _draw(f, a, xa, ya, r)
            if tb <= t < tb + dur:
                _draw(f, b, xb, yb, r)
        cands = [f'the {_name(a)}', f'the {_name(b)}', 'both appeared at the same time']
        return (f'Which appeared first in the video, the {_name(a)} or the {_name(b)}?', cands, cands[case],
                dict(times=[ta, tb]))
    if task == 'motion_direction':
        o = _obj(rng)
        direction = ('left', 'right', 'up', 'down')[int(rng.integers(4))]
        dist = size * rng.uniform(0.4, 0.55)
        a0, b = rng.uniform(r, size - r - dist), rng.uniform(r, size - r)
        for t, f in enumerate(frames):
            a = a0 + dist * t / max(1, t_len - 1)
            if direction in ('left', 'up'):
                a = size - a
            _draw(f, o, *((a, b) if direction in ('left', 'right') else (b, a)), r)
        return (f'In which direction does the {_name(o)} move?', ['left', 'right', 'up', 'down'], direction, {})
    if task == 'counting':
        o = _obj(rng)
        k = int(rng.integers(1, 5))
        slot = t_len // 4
        dur = max(1, slot // 4)
        slots = sorted(rng.choice(4, size=k, replace=False).tolist())
        starts = [s * slot + int(rng.integers(1, max(2, slot - dur))) for s in slots]
        places = [pos() for _ in starts]
        for t, f in enumerate(frames):
            for s, (cx, cy) in zip(starts, places):
                if s <= t < s + dur:
                    _draw(f, o, cx, cy, r)
        return (f'How many times does the {_name(o)} appear in the video?', ['1', '2', '3', '4'], str(k),
                dict(times=starts))
    if task == 'temporal_position':
        o = _obj(rng)
        part = int(rng.integers(3))
        third = t_len // 3
        dur = max(2, third // 2)
        s = part * third + int(rng.integers(0, third - dur + 1))
        cx, cy = pos()
        for t, f in enumerate(frames):
            if s <= t < s + dur:
                _draw(f, o, cx, cy, r)
        cands = ['at the beginning', 'in the middle', 'at the end']
        return (f'When does the {_name(o)} appear: at the beginning, in the middle or at the end of the video?',
                cands, cands[part], dict(times=[s]))
    raise ValueError(f'unknown task {task!r}; tasks are {", ".join(_ALL)}')


def _haystack_pool(clips_dir: Optional[str], size: int, fps: float, max_frames: int) -> np.ndarray:
    """Frames of the real clips, sampled at ``fps`` and resized, concatenated: ``(N, size, size, 3)`` uint8."""
    from .video import FrameSampling, VideoReadError, read_video
    parts = []
    for path in list_clips(clips_dir):
        try:
            parts.append(read_video(path, FrameSampling('fps', max_frames, fps=fps), size=size,
                                    on_truncated='clamp').frames.numpy())
        except VideoReadError as e:
            _logger.warning('haystack clip %s skipped (%s)', path, e)
    if parts:
        return np.concatenate(parts)
    _logger.warning('no readable clips in %r for the V-NIAH haystacks (expected *.mp4 files, e.g. '
                    '../shared/data/videos); using generated backgrounds instead', clips_dir)
    return np.concatenate(background_segments(None, size, 32))


def _needle(size: int, o: Tuple[str, str]) -> np.ndarray:
    frame = np.full((size, size, 3), 235, dtype=np.uint8)
    _draw(frame, o, size / 2, size / 2, size * 0.3)
    return frame


def make_videoqa(out_dir: str, num_per_task: int = 16, num_frames: int = 32, size: int = 64, seed: int = 0,
                 clips_dir: Optional[str] = DEFAULT_CLIPS_DIR, fps: int = 8, tasks: Sequence[str] = _ALL,
                 niah_lengths: Sequence[int] = (32, 64, 128),
                 niah_depths: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
                 niah_per_cell: int = 2, needle_span: int = 1, haystack_fps: float = 2.0,
                 progress: bool = True) -> Dict:
    """Write the synthetic video-QA set.

    Args:
        out_dir: output root.
        num_per_task: items per procedural task.
        num_frames: frames per procedural clip (>= 12).
        size: frame height and width in pixels (even, >= 16).
        seed: base seed.
        clips_dir: real clips for backgrounds and haystacks (missing: generated ones, with a warning).
        fps: frame rate of the procedural clips.
        tasks: subset of ``TASKS + ('vniah',)``.
        niah_lengths: haystack lengths in frames.
        niah_depths: needle depths in ``[0, 1]``.
        niah_per_cell: V-NIAH items per (length, depth).
        needle_span: frames the needle occupies.
        haystack_fps: rate at which haystack frames are taken from the real clips, and written.
        progress: show a tqdm bar.

    Returns:
        The metadata written to ``<out_dir>/meta.json``.

    Raises:
        ValueError: bad counts, sizes, depths or task names.
    """
    bad = [t for t in tasks if t not in _ALL]
    if bad or not tasks:
        raise ValueError(f'unknown tasks {bad}; choose from {", ".join(_ALL)}')
    if num_per_task < 1 or niah_per_cell < 1:
        raise ValueError(f'--num-per-task and --niah-per-cell must be >= 1 (got {num_per_task}, {niah_per_cell})')
    if num_frames < 12:
        raise ValueError(f'--frames must be >= 12 for the temporal tasks, got {num_frames}')
    check_size(size)
    if needle_span < 1 or any(int(L) < needle_span + 1 for L in niah_lengths) or not niah_lengths:
        raise ValueError(f'--niah-lengths must be > needle span {needle_span} frames, got {list(niah_lengths)}')
    if not niah_depths or any(not 0.0 <= float(d) <= 1.0 for d in niah_depths):
        raise ValueError(f'--niah-depths must lie in [0, 1], got {list(niah_depths)}')
    t0 = time.time()
    jobs: List[Tuple[str, int, Dict]] = [(t, i, {}) for t in tasks if t != 'vniah' for i in range(num_per_task)]
    if 'vniah' in tasks:
        jobs += [('vniah', i, dict(length=int(L), depth=float(d)))
                 for i, (L, d, _) in enumerate((L, d, k) for L in niah_lengths for d in niah_depths
                                               for k in range(niah_per_cell))]
    segs = background_segments(clips_dir, size, num_frames + 8, seed=seed) if set(tasks) - {'vniah'} else []
    pool = _haystack_pool(clips_dir, size, haystack_fps, max(niah_lengths)) if 'vniah' in tasks else None
    items: Dict[str, List[Dict]] = {t: [] for t in tasks}
    for task, i, cell in tqdm(jobs, desc='make-videoqa', unit='clip', disable=not progress):
        rng = np.random.default_rng([seed, _ALL.index(task), i])
        name = f'{task}_{i:05d}.mp4'
        if task == 'vniah':
            length, depth = cell['length'], cell['depth']
            start = int(rng.integers(len(pool)))
            frames = pool[(start + np.arange(length)) % len(pool)].copy()
            o = _obj(rng)
            p = int(round(depth * (length - needle_span)))
            frames[p:p + needle_span] = _needle(size, o)
            ask_colour = i % 2 == 0
            if ask_colour:
                q, cands, ans = 'What colour was the object shown briefly in the video?', list(COLORS), o[0]
            else:
                q, cands, ans = 'What shape was the object shown briefly in the video?', list(SHAPES), o[1]
            extra = dict(length=length, depth=depth, needle_start=p, needle_end=p + needle_span - 1,
                         needle_time=round(p / haystack_fps, 3), fps=haystack_fps,
                         question_type='colour' if ask_colour else 'shape')
            write_fps = haystack_fps
        else:
            frames = pick_background(segs, num_frames, rng)
            q, cands, ans, extra = _procedural(task, frames, rng)
            extra = dict(extra, fps=fps)
            write_fps = fps
        order = rng.permutation(len(cands)) if task in ('event_order', 'motion_direction') else np.arange(len(cands))
        cands = [cands[j] for j in order]
        folder = os.path.join(out_dir, 'video', task)
        os.makedirs(folder, exist_ok=True)
        write_mp4(os.path.join(folder, name), frames, fps=write_fps)
        items[task].append(dict(video=name, question=q, candidates=cands, answer=ans, **extra))
    from zoo.datasets.files import write_text_atomic
    os.makedirs(os.path.join(out_dir, 'json'), exist_ok=True)
    for task, rows in items.items():
        write_text_atomic(os.path.join(out_dir, 'json', f'{task}.json'), json.dumps(rows, indent=1) + '\n')
    meta = dict(generator='zoo.datasets.synthetic_videoqa', format='mvbench', tasks=list(tasks),
                items={t: len(v) for t, v in items.items()}, num_frames=num_frames, size=size, fps=fps, seed=seed,
                niah_lengths=[int(x) for x in niah_lengths], niah_depths=[float(x) for x in niah_depths],
                niah_per_cell=niah_per_cell, needle_span=needle_span, haystack_fps=haystack_fps)
    return write_meta(out_dir, meta, clips_dir, t0)


def build_parser() -> argparse.ArgumentParser:
    p = generator_parser(make_videoqa, 'Write a synthetic video-QA set (real MP4 files, MVBench-format JSON): temporal '
                         'questions and V-NIAH on real clips.', 'json/ and video/',
                         ('num_per_task', 'items per procedural task'), 'frames per procedural clip',
                         'frame rate of the procedural clips', 'backgrounds and haystacks')
    p.add_argument('--tasks', nargs='+', default=list(_ALL), choices=list(_ALL), help='tasks to write (default all)')
    p.add_argument('--niah-lengths', type=int, nargs='+', default=[32, 64, 128], help='haystack lengths in frames')
    p.add_argument('--niah-depths', type=float, nargs='+', default=[0.0, 0.25, 0.5, 0.75, 1.0],
                   help='needle depths in [0, 1]')
    p.add_argument('--niah-per-cell', type=int, default=2, help='V-NIAH items per length x depth (default 2)')
    p.add_argument('--needle-span', type=int, default=1, help='frames the needle occupies (default 1)')
    p.add_argument('--haystack-fps', type=float, default=2.0, help='haystack frames per second of real clip')
    return p


def _summary(meta: Dict) -> str:
    return f'{sum(meta["items"].values())} items ({", ".join(f"{k}={v}" for k, v in meta["items"].items())})'


def main(argv: Optional[List[str]] = None) -> int:
    """``zoo make-videoqa``: parse ``argv``, write the set, print a one-line summary."""
    return generator_main(build_parser(), make_videoqa, argv, _summary)


if __name__ == '__main__':
    run_script(main)
