"""Diagnostic video tasks whose classes differ only in *when* (or when and where) something happens, built so that a
model without a position encoding cannot tell mirror classes apart (``zoo make-videos --task ranking|steps``).

A clip of ``T`` raw frames is cut into ``blocks`` equal blocks; nothing moves inside a block. With ``blocks`` = the
training tubelet count (``T = 32``, 8 sampled frames, 2-frame tubelets: 4 blocks of 8 raw frames), every tubelet of
a uniformly sampled clip lies inside one block, so no tubelet sees an event change and the Conv3d patch embedding
cannot solve the task locally; only attention with positions can. Measured behind this design:
``../shared/notes/video-learning.md`` (Part 1, "Where the time goes" and "Recommended CPU recipe").

Tasks and classes:

* ``ranking`` (the PE-ranking task): a red and a blue square, each shown for exactly one block at a random place,
  in two different blocks: ``flash_red_blue`` (red's block first) vs ``flash_blue_red``: equal on-screen time and
  the same content, only the order differs. Plus a pair that needs *absolute* time: one square (red or blue) shown
  for one block, the first (``flash_early``) or the last (``flash_late``). A model without positions sees the same
  bag of tokens in both classes of each pair, so it can at best tell the pairs apart: 50 % (4-class chance 25 %).
* ``steps`` (harder): one shape jumps one step per block, 45-60 % of the frame in total, ``step_left`` /
  ``step_right`` / ``step_up`` / ``step_down`` (the notes measured ~10k updates to learn it even for rope3d).

Backgrounds: smooth generated ones by default (``clips_dir=None``), or segments of real clips. Every clip is drawn
from its own generator seeded by ``(seed, split, class, index)``; :class:`DiagnosticClips` renders them in memory on
demand (thousands per second), :func:`zoo.datasets.synthetic_video.make_videos` writes them as MP4 files.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import Dataset

from ._synth import COLORS, SHAPES, shape_mask

__all__ = ['TASKS', 'render_diagnostic', 'block_bounds', 'DiagnosticClips', 'draw_record']

TASKS: Dict[str, Tuple[str, ...]] = {
    'ranking': ('flash_blue_red', 'flash_early', 'flash_late', 'flash_red_blue'),
    'steps': ('step_down', 'step_left', 'step_right', 'step_up'),
}
# the order pair of the ranking task: NoPE must sit at chance between them
ORDER_PAIR = ('flash_blue_red', 'flash_red_blue')
TIME_PAIR = ('flash_early', 'flash_late')


def block_bounds(num_frames: int, blocks: int) -> List[Tuple[int, int]]:
    """``[start, end)`` raw-frame ranges of the ``blocks`` equal blocks of a ``num_frames`` clip.

    Raises:
        ValueError: fewer than 2 blocks, or ``num_frames`` not a multiple of ``blocks``.
    """
    if blocks < 2 or num_frames % blocks:
        raise ValueError(f'--frames {num_frames} must be a multiple of --blocks {blocks} (>= 2) so that every block '
                         'has the same length; e.g. --frames 32 --blocks 4')
    n = num_frames // blocks
    return [(b * n, (b + 1) * n) for b in range(blocks)]


def _stamp(frames: np.ndarray, mask: np.ndarray, color: Sequence[int]) -> None:
    """Paint ``color`` with a 1-px white rim (as :func:`zoo.datasets._synth.paint`) on every frame of ``frames``."""
    rim = np.zeros_like(mask)
    rim[1:, :] |= mask[:-1, :]
    rim[:-1, :] |= mask[1:, :]
    rim[:, 1:] |= mask[:, :-1]
    rim[:, :-1] |= mask[:, 1:]
    frames[:, rim & ~mask] = 255
    frames[:, mask] = color


def draw_record(cls: str, blocks: int, size: int, rng: np.random.Generator) -> Dict[str, Any]:
    """What a clip of class ``cls`` shows: ``events``, a list of ``(block, shape, colour name, cx, cy, r)`` (one
    object shown for the whole of each listed block). Pure function of ``rng``'s draws.

    Raises:
        ValueError: unknown class.
    """
    r = 0.14 * size * rng.uniform(0.9, 1.1)
    place = lambda: (float(rng.uniform(r, size - r)), float(rng.uniform(r, size - r)))  # noqa: E731
    if cls in ORDER_PAIR:
        i, j = sorted(int(b) for b in rng.choice(blocks, size=2, replace=False))
        first, second = ('red', 'blue') if cls == 'flash_red_blue' else ('blue', 'red')
        return dict(events=[(i, 'square', first, *place(), r), (j, 'square', second, *place(), r)])
    if cls in TIME_PAIR:
        colour = ('red', 'blue')[int(rng.integers(2))]
        return dict(events=[(0 if cls == 'flash_early' else blocks - 1, 'square', colour, *place(), r)])
    if cls in TASKS['steps']:
        shape, colour = SHAPES[int(rng.integers(len(SHAPES)))], list(COLORS)[int(rng.integers(len(COLORS)))]
        dist = size * rng.uniform(0.45, 0.6)
        a0 = rng.uniform(r, size - r - dist)   # along the motion axis
        b = float(rng.uniform(r, size - r))    # across it
        events = []
        for k in range(blocks):
            a = a0 + dist * k / (blocks - 1)
            if cls in ('step_left', 'step_up'):
                a = size - a
            cx, cy = (a, b) if cls in ('step_left', 'step_right') else (b, a)
            events.append((k, shape, colour, float(cx), float(cy), r))
        return dict(events=events)
    raise ValueError(f'unknown diagnostic class {cls!r}; classes are {", ".join(c for t in TASKS.values() for c in t)}')


def render_diagnostic(cls: str, num_frames: int, size: int, blocks: int, background: np.ndarray,
                      rng: np.random.Generator) -> np.ndarray:
    """Draw one clip of diagnostic class ``cls`` on ``background`` ``(num_frames, size, size, 3)`` uint8 (modified
    and returned); objects are static inside each of the ``blocks`` blocks (:func:`block_bounds`)."""
    bounds = block_bounds(num_frames, blocks)
    for block, shape, colour, cx, cy, r in draw_record(cls, blocks, size, rng)['events']:
        a, b = bounds[block]
        _stamp(background[a:b], shape_mask(shape, size, cx, cy, r), COLORS[colour])
    return background


def _plain_backgrounds(size: int, length: int, seed: int, n: int = 8) -> List[np.ndarray]:
    """Smooth drifting two-colour gradients ``(length, size, size, 3)`` uint8 (no real clips needed)."""
    rng = np.random.default_rng([seed, 7919])
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    t = np.arange(length, dtype=np.float32)[:, None, None]
    segs = []
    for _ in range(n):
        c0, c1 = rng.uniform(40, 200, 3).astype(np.float32), rng.uniform(40, 200, 3).astype(np.float32)
        a = 0.5 + 0.5 * np.sin(2 * np.pi * (x + 0.5 * y)[None] + rng.uniform(0, 2 * np.pi) + 0.15 * t)
        segs.append((c0 * a[..., None] + c1 * (1 - a[..., None])).astype(np.uint8))
    return segs


class DiagnosticClips(Dataset):
    """A diagnostic task's clips rendered in memory on demand: the same frames as the MP4 files ``zoo make-videos
    --task TASK`` writes with the same arguments, before encoding.

    Items are ``(clip, target)`` like :class:`zoo.datasets.video_folder.SafeVideoFolder`'s, and the attributes
    :func:`zoo.datasets.splits.configure_clips` sets (``sampling``, ``size``, ``mean``, ``std``, ``seed``) mean the
    same: ``clip`` float32 ``(3, T, size, size)`` normalised with ``mean`` / ``std``, ``T`` frames of the
    ``num_frames`` raw ones chosen by ``sampling`` (:class:`zoo.datasets.video.FrameSampling`; random offsets drawn
    from ``(seed, epoch, index)``; ``None``: all raw frames), resized from ``frame_size`` when ``size`` differs;
    ``target`` the class id (classes sorted, as folders are). What is drawn depends on ``data_seed`` only.

    Args:
        task: ``'ranking'`` or ``'steps'`` (:data:`TASKS`).
        split: ``'train'`` or ``'val'`` (its own seeds).
        per_class: clips per class.
        num_frames: raw frames per clip (a multiple of ``blocks``).
        size: frame size in px (rendered; ``frame_size``).
        blocks: blocks per clip (the training tubelet count).
        seed: base seed of the clips (``data_seed``; also the first seed of the frame offsets).
        backgrounds: background segments (default: generated gradients from ``seed``).
        sampling, mean, std: what the items are made of (see above).

    Raises:
        ValueError: unknown task or split, bad counts or frame / block numbers.
    """

    def __init__(self, task: str, split: str, per_class: int, num_frames: int = 32, size: int = 32, blocks: int = 4,
                 seed: int = 0, backgrounds: Optional[List[np.ndarray]] = None, sampling: Any = None,
                 mean: Sequence[float] = (0.5, 0.5, 0.5), std: Sequence[float] = (0.5, 0.5, 0.5)):
        if task not in TASKS:
            raise ValueError(f'unknown task {task!r}; choose one of {", ".join(TASKS)}')
        if split not in ('train', 'val'):
            raise ValueError(f'split must be train or val, got {split!r}')
        if per_class < 1:
            raise ValueError(f'per_class must be at least 1, got {per_class}')
        block_bounds(num_frames, blocks)
        self.task, self.split, self.per_class = task, split, int(per_class)
        self.num_frames, self.frame_size, self.blocks = int(num_frames), int(size), int(blocks)
        self.data_seed = self.seed = int(seed)
        self.size = self.frame_size
        self.classes = list(TASKS[task])
        self.backgrounds = backgrounds if backgrounds is not None else _plain_backgrounds(size, num_frames + 8, seed)
        self.sampling, self.mean, self.std, self.epoch, self.cache = sampling, tuple(mean), tuple(std), 0, None

    def __len__(self) -> int:
        return self.per_class * len(self.classes)

    def set_epoch(self, epoch: int) -> None:
        """New random frame offsets every epoch (the clips stay the same)."""
        self.epoch = int(epoch)

    def frames(self, index: int) -> Tuple[np.ndarray, int]:
        """Raw uint8 frames ``(num_frames, size, size, 3)`` and class id of clip ``index`` (class-major order)."""
        ci, i = divmod(int(index), self.per_class)
        cls = self.classes[ci]
        rng = clip_rng(self.data_seed, self.split, self.task, cls, i)
        from ._synth import pick_background
        bg = pick_background(self.backgrounds, self.num_frames, rng)
        return render_diagnostic(cls, self.num_frames, self.frame_size, self.blocks, bg, rng), ci

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        frames, target = self.frames(index)
        if self.sampling is not None:
            gen = np.random.default_rng((self.seed, self.epoch, int(index))) if self.sampling.random else None
            frames = frames[self.sampling.indices(self.num_frames, 1.0, generator=gen)]
        from .video import frames_to_clip, resize_frames
        x = torch.from_numpy(np.ascontiguousarray(frames))
        if self.size != self.frame_size:
            x = resize_frames(x, self.size)
        return frames_to_clip(x, self.mean, self.std), target

    @classmethod
    def from_set(cls, data_dir: str, split: str, max_per_class: Optional[int] = None) -> 'DiagnosticClips':
        """The in-memory clips of a set ``zoo make-videos --task ranking|steps`` wrote to ``data_dir`` (read from its
        ``meta.json``): the same frames as its MP4 files, before H.264 encoding.

        Raises:
            FileNotFoundError: no ``data_dir/meta.json``.
            ValueError: the set is not a diagnostic task's, or its ``meta.json`` is not JSON or lacks a field (the
                message names the file).
        """
        import json
        import os
        path = os.path.join(data_dir, 'meta.json')
        if not os.path.isfile(path):
            raise FileNotFoundError(f'{path!r} does not exist: --in-memory-clips renders the clips of a set written '
                                    'by zoo make-videos --task ranking|steps; write one or drop --in-memory-clips')
        try:
            with open(path, encoding='utf-8') as f:
                meta = json.load(f)
            task = meta.get('task') if isinstance(meta, dict) else None
        except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
            raise ValueError(f'{path} is not a readable meta.json ({type(e).__name__}: {e}); write the set again with '
                             'zoo make-videos --task ranking|steps --overwrite') from None
        if task not in TASKS or meta.get('classes') != list(TASKS[task]):
            raise ValueError(f'{data_dir!r} was not written by zoo make-videos --task ranking|steps with all classes '
                             f'({path} names the task {task!r}); --in-memory-clips renders only those sets, '
                             'drop it to read the files')
        try:
            n = int(meta['num_per_class'][split])
            args = (int(meta['num_frames']), int(meta['size']), int(meta['blocks']), int(meta['seed']))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f'{path} lacks a field or holds a bad value ({type(e).__name__}: {e}); it should hold '
                             f'num_per_class.{split}, num_frames, size, blocks and seed as zoo make-videos writes them: '
                             'write the set again with --overwrite') from None
        if max_per_class is not None:
            n = min(n, int(max_per_class))
        return cls(task, split, n, *args)


def clip_rng(seed: int, split: str, task: str, cls: str, index: int) -> np.random.Generator:
    """The generator of one clip: seeded by ``(seed, split, task, class, index)``."""
    return np.random.default_rng([seed, ('train', 'val').index(split), list(TASKS).index(task),
                                  TASKS[task].index(cls), index])
