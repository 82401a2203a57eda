"""Shared pieces of the synthetic video generators: MP4 writing through PyAV, shapes, colours, real-clip backgrounds,
the set's ``meta.json`` and the command-line options and entry point."""
from __future__ import annotations

import argparse
import glob
import inspect
import json
import logging
import os
import sys
import time
from fractions import Fraction
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

_logger = logging.getLogger('zoo.datasets')

COLORS: Dict[str, Tuple[int, int, int]] = {
    'red': (230, 30, 30), 'green': (30, 200, 50), 'blue': (40, 70, 240), 'yellow': (250, 220, 20),
}
SHAPES = ('circle', 'square', 'triangle', 'diamond')
DEFAULT_CLIPS_DIR = os.path.join('..', 'shared', 'data', 'videos')


def shape_mask(shape: str, size: int, cx: float, cy: float, r: float) -> np.ndarray:
    """Boolean ``(size, size)`` mask of a shape of half-width ``r`` pixels centred at ``(cx, cy)``."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    dx, dy = x - cx, y - cy
    if shape == 'circle':
        return dx * dx + dy * dy <= r * r
    if shape == 'square':
        return (np.abs(dx) <= r * 0.85) & (np.abs(dy) <= r * 0.85)
    if shape == 'diamond':
        return np.abs(dx) + np.abs(dy) <= r * 1.1
    if shape == 'triangle':  # apex up
        return (dy <= r * 0.8) & (dy >= -r) & (np.abs(dx) <= (dy + r) * 0.6)
    raise ValueError(f'unknown shape {shape!r}; use one of {SHAPES}')


def paint(frame: np.ndarray, mask: np.ndarray, color: Tuple[int, int, int]) -> None:
    """Paint ``color`` on ``frame`` (in place) where ``mask`` is set, with a one-pixel white rim for contrast."""
    rim = np.zeros_like(mask)
    rim[1:, :] |= mask[:-1, :]
    rim[:-1, :] |= mask[1:, :]
    rim[:, 1:] |= mask[:, :-1]
    rim[:, :-1] |= mask[:, 1:]
    frame[rim & ~mask] = 255
    frame[mask] = color


def write_mp4(path: str, frames: np.ndarray, fps: float = 8, crf: int = 18, faststart: bool = False) -> None:
    """Encode uint8 ``(T, H, W, 3)`` RGB frames as H.264 (yuv420p, libx264 through PyAV, one thread) to ``path``,
    atomically. H and W must be even. ``faststart`` puts the index (moov) before the frames."""
    import av
    from zoo.datasets.files import write_atomic
    t, h, w, _ = frames.shape
    if h % 2 or w % 2:
        raise ValueError(f'frame size {h}x{w} must be even for yuv420p H.264; choose an even --size')

    def write(tmp: str) -> None:
        with av.open(tmp, 'w', format='mp4', options={'movflags': 'faststart'} if faststart else {}) as out:
            rate = Fraction(fps).limit_denominator(1001)
            # one x264 thread (lookahead included): multi-threaded x264 output differs from run to run
            opts = {'crf': str(crf), 'preset': 'veryfast', 'threads': '1',
                    'x264-params': 'threads=1:lookahead-threads=1'}
            stream = out.add_stream('libx264', rate=rate, options=opts)
            stream.width, stream.height, stream.pix_fmt = w, h, 'yuv420p'
            stream.codec_context.thread_count = 1
            for f in frames:
                for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format='rgb24')):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
    write_atomic(path, write)


def list_clips(clips_dir: Optional[str]) -> List[str]:
    if not clips_dir or not os.path.isdir(clips_dir):
        return []
    return sorted(p for p in glob.glob(os.path.join(clips_dir, '*')) if p.lower().endswith(
        ('.mp4', '.mkv', '.mov', '.avi', '.webm')))


def background_segments(clips_dir: Optional[str], size: int, seg_len: int, per_clip: int = 6,
                        seed: int = 0) -> List[np.ndarray]:
    """Contiguous frame segments ``(seg_len, size, size, 3)`` uint8 cut from the real clips in ``clips_dir``.

    Each clip gives ``per_clip`` segments at evenly spaced starts, frames resized (shorter side) and centre-cropped.
    Without readable clips, returns smooth generated segments instead (with a warning when ``clips_dir`` was given;
    ``None`` asks for generated backgrounds).
    """
    from .video import FrameSampling, VideoReadError, probe_video, read_video
    segs: List[np.ndarray] = []
    clips = list_clips(clips_dir)
    for path in clips:
        try:
            info = probe_video(path, check_last=False)
        except VideoReadError as e:
            _logger.warning('background clip %s skipped (%s)', path, e)
            continue
        usable = max(1, info.num_frames - seg_len)
        for k in range(per_clip):
            start_f = int((k + 0.5) * usable / per_clip)
            try:
                clip = read_video(path, FrameSampling('stride', seg_len, stride=1), size=size,
                                  start=start_f / info.fps, end=(start_f + seg_len) / info.fps, on_truncated='clamp')
            except VideoReadError as e:
                _logger.warning('background clip %s skipped (%s)', path, e)
                break
            segs.append(clip.frames.numpy())
    if segs:
        return segs
    if clips_dir:  # asked for real backgrounds and got none: worth a warning; no folder given: generated, by choice
        _logger.warning('no readable background clips in %r (expected *.mp4 files, e.g. ../shared/data/videos); '
                        'using generated backgrounds instead', clips_dir)
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    for _ in range(max(3, per_clip)):
        c0, c1 = rng.uniform(40, 200, 3), rng.uniform(40, 200, 3)
        phase = rng.uniform(0, 2 * np.pi)
        seg = []
        for t in range(seg_len):
            a = 0.5 + 0.5 * np.sin(2 * np.pi * (x + 0.5 * y) + phase + 0.15 * t)
            seg.append((c0 * a[..., None] + c1 * (1 - a[..., None])).astype(np.uint8))
        segs.append(np.stack(seg))
    return segs


def pick_background(segs: List[np.ndarray], t: int, rng: np.random.Generator) -> np.ndarray:
    """``t`` consecutive background frames (a random segment, random start, random horizontal flip), a copy."""
    seg = segs[int(rng.integers(len(segs)))]
    if len(seg) < t:
        seg = np.concatenate([seg, seg[::-1]] * (t // (2 * len(seg)) + 1))
    s = int(rng.integers(0, len(seg) - t + 1))
    out = seg[s:s + t].copy()
    if rng.random() < 0.5:
        out = out[:, :, ::-1].copy()
    return out


def check_size(size: int) -> None:
    """Raise ``ValueError`` unless ``size`` is an even number of pixels >= 16 (yuv420p H.264 needs even sizes)."""
    if size < 16 or size % 2:
        raise ValueError(f'--size must be an even number of pixels >= 16, got {size}')


def prepare_output(out_dir: str, overwrite: bool, owned: Sequence[str]) -> None:
    """Make ``out_dir`` ready for a new set: refuse a folder that is not empty unless ``overwrite`` (the old and the
    new clips would mix); with ``overwrite``, remove the old set's ``meta.json`` first (so that a run cut short leaves
    no ``meta.json`` behind: :func:`write_meta` writes it last) and then the folders ``owned`` the generator writes.

    Raises:
        NotADirectoryError: ``out_dir`` is a file.
        FileExistsError: ``out_dir`` is not empty and ``overwrite`` is false.
    """
    import shutil
    if os.path.isfile(out_dir):
        raise NotADirectoryError(f'--output {out_dir!r} is a file; give a folder (new or empty)')
    entries = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    if entries and not overwrite:
        what = 'a set written before' if 'meta.json' in entries else \
            'files but no meta.json (a run cut short, or other files)'
        raise FileExistsError(f'--output {out_dir!r} is not empty (it holds {what}: {", ".join(entries[:4])}'
                              f'{" ..." if len(entries) > 4 else ""}); writing into it would mix the old clips with '
                              'the new ones: pass --overwrite to replace the set, or choose a new --output')
    if entries:
        meta = os.path.join(out_dir, 'meta.json')
        if os.path.lexists(meta):
            os.remove(meta)
        for name in owned:
            path = os.path.join(out_dir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.remove(path)
    os.makedirs(out_dir, exist_ok=True)


def write_meta(out_dir: str, meta: Dict[str, Any], clips_dir: Optional[str], t0: float) -> Dict[str, Any]:
    """Write a generated set's metadata to ``<out_dir>/meta.json`` (atomically) and return it. Generators call it
    last, after every clip is written: a set without ``meta.json`` is incomplete.

    Args:
        out_dir: the set's root.
        meta: what the generator records (its name, arguments, counts).
        clips_dir: the folder of real clips used (recorded as an absolute path, or ``None``).
        t0: ``time.time()`` at the start; the seconds taken are recorded last.

    Returns:
        ``meta`` with ``clips_dir`` and ``seconds`` added.
    """
    from zoo.datasets.files import write_text_atomic
    meta = dict(meta, clips_dir=os.path.abspath(clips_dir) if clips_dir else None,
                seconds=round(time.time() - t0, 2))
    write_text_atomic(os.path.join(out_dir, 'meta.json'), json.dumps(meta, indent=2) + '\n')
    return meta


def generator_parser(make: Callable[..., Dict[str, Any]], description: str, writes: str, count: Tuple[str, str],
                     frames_help: str, fps_help: str, clips_for: str) -> argparse.ArgumentParser:
    """The command-line parser of generator ``make`` (``make_videos`` -> ``zoo make-videos``) with the options every
    generator has: ``--output``, a count (clips per class, items per task), ``--frames``, ``--size``, ``--fps``,
    ``--seed``, ``--clips-dir`` and ``--overwrite``; the generator adds its own.

    Each option's ``dest`` is the parameter of ``make`` that it sets, and its default is that parameter's default, so
    :func:`generator_main` can call ``make(**options)``.

    Args:
        make: the generator, ``make(out_dir, ...) -> meta``.
        description: what the command writes.
        writes: what ``--output`` receives (``'train/ and val/'``).
        count: ``(parameter, help)`` of the count option (``('num_per_class', 'training clips per class')``).
        frames_help: what ``--frames`` counts; the default is appended.
        fps_help: what ``--fps`` sets; the default is appended.
        clips_for: what the real clips of ``--clips-dir`` are used for.
    """
    default = {k: v.default for k, v in inspect.signature(make).parameters.items()}
    p = argparse.ArgumentParser(prog='zoo ' + make.__name__.replace('_', '-'), description=description)
    p.add_argument('--output', dest='out_dir', metavar='OUTPUT', required=True,
                   help=f'output folder ({writes} are written in it)')
    name, what = count
    p.add_argument('--' + name.replace('_', '-'), type=int, default=default[name],
                   help=f'{what} (default {default[name]})')
    p.add_argument('--frames', dest='num_frames', metavar='FRAMES', type=int, default=default['num_frames'],
                   help=f'{frames_help} (default {default["num_frames"]})')
    p.add_argument('--size', type=int, default=default['size'],
                   help=f'frame size in pixels, even (default {default["size"]})')
    p.add_argument('--fps', type=int, default=default['fps'], help=f'{fps_help} (default {default["fps"]})')
    p.add_argument('--seed', type=int, default=default['seed'])
    p.add_argument('--clips-dir', default=default['clips_dir'],
                   help=f'real clips for {clips_for} (default {default["clips_dir"]})')
    p.add_argument('--overwrite', action='store_true',
                   help='replace the set in a non-empty --output (its meta.json first, then the folders this command '
                        'writes); without it a non-empty --output is refused, so that old and new clips never mix')
    return p


def generator_main(parser: argparse.ArgumentParser, make: Callable[..., Dict[str, Any]], argv: Optional[List[str]],
                   summary: Callable[[Dict[str, Any]], str]) -> int:
    """A generator's command: parse ``argv`` (a :func:`generator_parser`), write the set with ``make(**options)`` and
    print ``wrote <summary(meta)> to <output> in <seconds> s``; returns 0."""
    args = parser.parse_args(argv)
    meta = make(**vars(args))
    print(f'wrote {summary(meta)} to {args.out_dir} in {meta["seconds"]:.1f} s')
    return 0


def run_script(main: Callable[[], int]) -> None:
    """Run a generator's ``main`` as a script (``python -m ...``): log to stderr at INFO, exit with its status."""
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    sys.exit(main())
