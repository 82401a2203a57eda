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

The four tasks above are kept as they were (old data folders load and new ones come out the same), but at 8 training
frames out of 32 they are hard or impossible to learn for a tiny model: a ``counting`` flash lasts 2 raw frames while
8-frame sampling takes 1 in 4, ``event_order`` and ``motion_direction`` shuffle their options, and the objects are
smaller than one merged tower token. The diagnostic tasks (``DIAGNOSTIC_TASKS``) are built so that a tiny video-LLM
can learn them and a position encoding is what separates them:

* ``object_colour``: the sanity gate, no time involved. A large square of one of 4 colours is on screen in every
  frame; what colour is it? Options in the fixed order red, green, blue, yellow.
* ``flash_position``: absolute time. A large square is shown in exactly one of ``blocks`` equal, consecutive blocks
  of raw frames; in which block ("in the first quarter" ... "in the last quarter" for 4 blocks)? Options in block
  order.
* ``flash_order``: relative time. A red and a blue square are each shown in one block (different blocks, equal
  on-screen time); which appeared first? Options always ``the red square``, ``the blue square``.

Their objects are squares of side ``size / 2`` (16 px at 32 px frames: at least one merged token of a tower with
8-px patches and a 2x2 merge) on a plain grey background, at a random place. With ``blocks`` set to the tower's
temporal patches at the training frame count (8 frames / 2-frame tubelets = 4, the default) every block is one
temporal patch, and every event is visible in any uniform sampling of ``num_frames / blocks`` or more frames, random
segment offsets included. Each item records ``events``: one ``[start, end)`` raw-frame range per shown square.
Training uses a fixed option order; a shuffled-option variant would be a separate task name.

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
                     generator_parser, list_clips, paint, pick_background, prepare_output, run_script, shape_mask,
                     write_meta, write_mp4)

_logger = logging.getLogger('zoo.datasets')

__all__ = ['TASKS', 'DIAGNOSTIC_TASKS', 'make_videoqa', 'main']

TASKS = ('event_order', 'motion_direction', 'counting', 'temporal_position')
DIAGNOSTIC_TASKS = ('object_colour', 'flash_position', 'flash_order')
_ALL = TASKS + ('vniah',) + DIAGNOSTIC_TASKS
_DEFAULT = TASKS + ('vniah',)
_GREY = 128
_ORDINALS = ('first', 'second', 'third', 'fourth', 'fifth', 'sixth', 'seventh', 'eighth')


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


def block_names(blocks: int) -> List[str]:
    """The options of ``flash_position``: ``'in the first quarter'`` ... for 4 blocks, else ``'in the first part'``
    ... (``'in the last ...'`` for the final block)."""
    unit = {2: 'half', 3: 'third', 4: 'quarter'}.get(blocks, 'part')
    return [f'in the {"last" if k == blocks - 1 else _ORDINALS[k]} {unit}' for k in range(blocks)]


def _diagnostic(task: str, num_frames: int, size: int, blocks: int, rng: np.random.Generator,
                object_size: float = 0.5) -> Tuple[np.ndarray, str, List[str], str, Dict]:
    """A diagnostic item: frames ``(num_frames, size, size, 3)`` uint8 on grey, question, candidates (fixed order),
    answer and extras (``events``: ``[start, end)`` raw frames per shown square; ``blocks``, ``block_len``).
    ``object_size``: the square's side as a fraction of ``size`` (0.5: 16 px at 32 px; 1.0 fills the frame)."""
    frames = np.full((num_frames, size, size, 3), _GREY, dtype=np.uint8)
    block_len = num_frames // blocks
    half = object_size * size / 2
    r = half / 0.85  # shape_mask's square is |dx| <= 0.85 r: side object_size * size

    def place() -> Tuple[float, float]:  # the whole square inside the frame
        return float(rng.uniform(half, size - half)), float(rng.uniform(half, size - half))

    def show(colour: str, block: int) -> List[int]:
        cx, cy = place()
        mask = shape_mask('square', size, cx, cy, r)
        start, end = block * block_len, (block + 1) * block_len
        for f in frames[start:end]:
            paint(f, mask, COLORS[colour])
        return [start, end]

    extra: Dict = dict(blocks=blocks, block_len=block_len)
    if task == 'object_colour':
        cands = list(COLORS)
        colour = cands[int(rng.integers(len(cands)))]
        cx, cy = place()
        mask = shape_mask('square', size, cx, cy, r)
        for f in frames:
            paint(f, mask, COLORS[colour])
        return frames, 'What colour is the square?', cands, colour, dict(extra, events=[[0, num_frames]])
    if task == 'flash_position':
        colour = list(COLORS)[int(rng.integers(len(COLORS)))]
        block = int(rng.integers(blocks))
        cands = block_names(blocks)
        ev = show(colour, block)
        return (frames, f'When is the {colour} square shown in the video?', cands, cands[block],
                dict(extra, events=[ev]))
    if task == 'flash_order':
        first, second = sorted(rng.choice(blocks, size=2, replace=False).tolist())
        red_first = bool(rng.integers(2))
        ev_red = show('red', first if red_first else second)
        ev_blue = show('blue', second if red_first else first)
        cands = ['the red square', 'the blue square']
        return (frames, 'Which square appeared first, the red one or the blue one?', cands,
                cands[0 if red_first else 1], dict(extra, events=[ev_red, ev_blue]))
    raise ValueError(f'unknown diagnostic task {task!r}; diagnostic tasks are {", ".join(DIAGNOSTIC_TASKS)}')


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
    if clips_dir is None:  # no clips folder asked for (the demo): generated backgrounds by choice, not a problem
        _logger.info('V-NIAH haystacks: generated backgrounds (no --clips-dir)')
    else:
        _logger.warning('no readable clips in %r for the V-NIAH haystacks (expected *.mp4 files, e.g. '
                        '../shared/data/videos); using generated backgrounds instead', clips_dir)
    return np.concatenate(background_segments(None, size, 32))


def _needle(size: int, o: Tuple[str, str]) -> np.ndarray:
    frame = np.full((size, size, 3), 235, dtype=np.uint8)
    _draw(frame, o, size / 2, size / 2, size * 0.3)
    return frame


def make_videoqa(out_dir: str, num_per_task: int = 16, num_frames: int = 32, size: int = 64, seed: int = 0,
                 clips_dir: Optional[str] = DEFAULT_CLIPS_DIR, fps: int = 8, tasks: Sequence[str] = _DEFAULT,
                 niah_lengths: Sequence[int] = (32, 64, 128),
                 niah_depths: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
                 niah_per_cell: int = 2, needle_span: int = 1, haystack_fps: float = 2.0, blocks: int = 4,
                 object_size: float = 0.5, progress: bool = True, overwrite: bool = False) -> Dict:
    """Write the synthetic video-QA set.

    Args:
        out_dir: output root.
        num_per_task: items per procedural task.
        num_frames: frames per procedural clip (>= 12).
        size: frame height and width in pixels (even, >= 16).
        seed: base seed.
        clips_dir: real clips for backgrounds and haystacks (missing: generated ones, with a warning).
        fps: frame rate of the procedural clips.
        tasks: subset of ``TASKS + ('vniah',) + DIAGNOSTIC_TASKS`` (default: ``TASKS + ('vniah',)``).
        niah_lengths: haystack lengths in frames.
        niah_depths: needle depths in ``[0, 1]``.
        niah_per_cell: V-NIAH items per (length, depth).
        needle_span: frames the needle occupies.
        haystack_fps: rate at which haystack frames are taken from the real clips, and written.
        blocks: temporal blocks of the diagnostic tasks (a divisor of ``num_frames``): the tower's temporal patches
            at the training frame count, e.g. 4 for 8 frames and 2-frame tubelets.
        object_size: side of the diagnostic tasks' squares as a fraction of ``size``, in (0, 1] (default 0.5: 16 px
            at 32 px, one merged token of a tower with 8-px patches; 1.0: the whole frame turns the colour).
        progress: show a tqdm bar.
        overwrite: replace the set in a non-empty ``out_dir``: its ``meta.json`` is removed first, then its
            ``json/`` and ``video/``; ``meta.json`` is written last, so a run cut short leaves none.

    Returns:
        The metadata written to ``<out_dir>/meta.json``.

    Raises:
        ValueError: bad counts, sizes, depths, blocks, object size or task names.
        FileExistsError: ``out_dir`` is not empty and ``overwrite`` is false.
    """
    bad = [t for t in tasks if t not in _ALL]
    if bad or not tasks:
        raise ValueError(f'unknown tasks {bad}; choose from {", ".join(_ALL)}')
    if num_per_task < 1 or niah_per_cell < 1:
        raise ValueError(f'--num-per-task and --niah-per-cell must be >= 1 (got {num_per_task}, {niah_per_cell})')
    if num_frames < 12:
        raise ValueError(f'--frames must be >= 12 for the temporal tasks, got {num_frames}')
    check_size(size)
    diagnostic = [t for t in tasks if t in DIAGNOSTIC_TASKS]
    if diagnostic and not (2 <= blocks <= len(_ORDINALS) and num_frames % blocks == 0):
        raise ValueError(f'--blocks must be 2-{len(_ORDINALS)} and divide --frames {num_frames} for the diagnostic '
                         f'tasks, got {blocks}; use the tower\'s temporal patches at the training frame count '
                         '(8 frames / 2-frame tubelets = 4)')
    if diagnostic and not 0 < object_size <= 1:
        raise ValueError(f'--object-size must be in (0, 1] (the square\'s side as a fraction of the frame), got '
                         f'{object_size}')
    if needle_span < 1 or any(int(L) < needle_span + 1 for L in niah_lengths) or not niah_lengths:
        raise ValueError(f'--niah-lengths must be > needle span {needle_span} frames, got {list(niah_lengths)}')
    if not niah_depths or any(not 0.0 <= float(d) <= 1.0 for d in niah_depths):
        raise ValueError(f'--niah-depths must lie in [0, 1], got {list(niah_depths)}')
    prepare_output(out_dir, overwrite, ('json', 'video'))
    t0 = time.time()
    jobs: List[Tuple[str, int, Dict]] = [(t, i, {}) for t in tasks if t != 'vniah' for i in range(num_per_task)]
    if 'vniah' in tasks:
        jobs += [('vniah', i, dict(length=int(L), depth=float(d)))
                 for i, (L, d, _) in enumerate((L, d, k) for L in niah_lengths for d in niah_depths
                                               for k in range(niah_per_cell))]
    segs = background_segments(clips_dir, size, num_frames + 8, seed=seed) if set(tasks) & set(TASKS) else []
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
        elif task in DIAGNOSTIC_TASKS:
            frames, q, cands, ans, extra = _diagnostic(task, num_frames, size, blocks, rng, object_size)
            extra = dict(extra, fps=fps)
            write_fps = fps
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
                niah_per_cell=niah_per_cell, needle_span=needle_span, haystack_fps=haystack_fps,
                **(dict(blocks=blocks, object_size=float(object_size)) if diagnostic else {}))
    return write_meta(out_dir, meta, clips_dir, t0)


def build_parser() -> argparse.ArgumentParser:
    p = generator_parser(make_videoqa, 'Write a synthetic video-QA set (real MP4 files, MVBench-format JSON): temporal '
                         'questions and V-NIAH on real clips.', 'json/ and video/',
                         ('num_per_task', 'items per procedural task'), 'frames per procedural clip',
                         'frame rate of the procedural clips', 'backgrounds and haystacks')
    p.add_argument('--tasks', nargs='+', default=list(_DEFAULT), choices=list(_ALL),
                   help=f'tasks to write (default {" ".join(_DEFAULT)}); the diagnostic tasks '
                   f'{", ".join(DIAGNOSTIC_TASKS)} are learnable at 8 of 32 frames (see the module docstring)')
    p.add_argument('--blocks', type=int, default=4,
                   help='temporal blocks of the diagnostic tasks: the tower\'s temporal patches at the training '
                   'frame count (default 4 = 8 frames / 2-frame tubelets); must divide --frames')
    p.add_argument('--object-size', type=float, default=0.5,
                   help='side of the diagnostic tasks\' squares as a fraction of --size (default 0.5; 1.0 fills the '
                   'frame)')
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
