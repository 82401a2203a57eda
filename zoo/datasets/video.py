"""Reading frames from video files: sampling rules, true timestamps, exact frames, clear errors, an on-disk frame cache.

Sampling (:class:`FrameSampling`), all inside an optional ``[start, end]`` window in seconds:

* ``uniform``: N frames at the midpoints of N equal segments, with MVBench's exact formula (``get_index`` of
  "MVBench: A Comprehensive Multi-modal Video Understanding Benchmark", arXiv:2311.17005); with ``random=True`` one
  random frame per segment (TSN's training rule, "Temporal Segment Networks", arXiv:1608.00859);
* ``stride``: N frames ``stride`` frames apart, centred in the window (``random=True``: a random start), as
  VideoMAE ("VideoMAE: Masked Autoencoders are Data-Efficient Learners ...", arXiv:2203.12602) samples clips;
* ``fps``: one frame every ``1 / fps`` seconds (segment midpoints), at most ``num_frames`` of them (then spread
  uniformly over the window), the fps-with-a-cap protocol of video-LLM evaluations.

Seconds map to frames by the stream's own presentation timestamps, so windows and fps sampling are right on
variable-frame-rate clips too. Every read returns the sampled frame indices and their timestamps in seconds from the
first frame, which feed time-aware position encodings; a file without usable timestamps gets ``index / fps`` instead,
with a warning (once per file) and a count (:data:`zoo.datasets.video_streams.COUNTS`).

Frames are exact whatever the codec and container: decord reads them where it is installed, but a file is trusted to
decord only once its reads were checked against frames decoded in order (once per file); other files are read with
PyAV (:mod:`zoo.datasets.video_streams`). ``ZOO_VIDEO_BACKEND=pyav`` reads every file with PyAV; both backends give
the same frames.

Real files fail in ways the header does not show. Every failure becomes one :class:`VideoReadError` with a ``reason``
(``missing``, ``undecodable``, ``zero_frames``, ``truncated``, ``bad_window``) that datasets count and report. With
``on_truncated='clamp'`` a truncated file (fewer frames than its header says, or frames that do not decode) is sampled
over the frames that decode, read with PyAV where decord cannot open the file. The decoded size is estimated before
decoding, and a read that would not fit in the available memory is refused (:class:`VideoMemoryError`). A request for
more frames than a clip holds repeats frames (decoded once, resized once, then repeated).

:class:`FrameCache` stores decoded, resized frames on disk, keyed by the file (real path, size, mtime), the output
size and the sampling, so a sweep over model sizes decodes each video once per sampling.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import asdict, dataclass
from typing import Dict, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from zoo.errors import ZooError
from .video_streams import (COUNTS, FramesNotDecodable, IndexReplaced, VideoReadError, _one_line, count_decodable,
                            known_decodable, read_frames, stream_index, video_backend)

_logger = logging.getLogger('zoo.datasets')

__all__ = ['VIDEO_EXTENSIONS', 'VideoReadError', 'VideoMemoryError', 'FrameSampling', 'VideoInfo', 'VideoClip',
           'FrameCache', 'probe_video', 'read_video', 'resize_frames', 'frames_to_clip', 'video_backend',
           'available_memory', 'check_memory', 'COUNTS']

VIDEO_EXTENSIONS = ('.mp4', '.mkv', '.mov', '.avi', '.webm')

SizeLike = Union[None, int, Tuple[int, int], Sequence[int]]


class VideoMemoryError(ZooError, ValueError):
    """A read whose decoded frames would not fit in the available memory (estimated before decoding)."""


def available_memory() -> Optional[int]:
    """Bytes of memory available to a new allocation: ``MemAvailable`` of ``/proc/meminfo`` (Linux), else free
    physical pages (``os.sysconf``); ``None`` where neither is known."""
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf('SC_AVPHYS_PAGES')) * int(os.sysconf('SC_PAGE_SIZE'))
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(nbytes: int, what: str, fix: str) -> None:
    """Refuse a decode that would not fit: ``nbytes`` against :func:`available_memory`.

    Args:
        nbytes: the estimate, in bytes.
        what: what needs it, for the message (``'--frames 100000 x 3 clips'``).
        fix: what to change, for the message.

    Raises:
        VideoMemoryError: ``nbytes`` is above the available memory.
    """
    avail = available_memory()
    if avail is not None and nbytes > avail:
        raise VideoMemoryError(f'{what} needs about {nbytes / 2 ** 30:.3g} GiB of memory for the decoded frames, more '
                               f'than the {avail / 2 ** 30:.3g} GiB available; {fix}')


@dataclass(frozen=True)
class FrameSampling:
    """Which frames to read.

    Args:
        mode: ``'uniform'``, ``'stride'`` or ``'fps'`` (see the module docstring).
        num_frames: frames per clip for ``uniform`` and ``stride``; the cap for ``fps`` (``None``: no cap).
        stride: frames between samples for ``stride``.
        fps: samples per second for ``fps``.
        random: random offsets (training); reads with it are never cached.

    Raises:
        ValueError: unknown mode, ``num_frames`` < 1, ``stride`` < 1, ``fps`` missing or not positive.
    """
    mode: str = 'uniform'
    num_frames: Optional[int] = 8
    stride: int = 1
    fps: Optional[float] = None
    random: bool = False

    def __post_init__(self):
        if self.mode not in ('uniform', 'stride', 'fps'):
            raise ValueError(f'frame sampling mode {self.mode!r} is unknown; use uniform, stride or fps')
        if self.mode != 'fps' and (self.num_frames is None or int(self.num_frames) < 1):
            raise ValueError(f'{self.mode} sampling needs num_frames >= 1 (got {self.num_frames}); e.g. --frames 8')
        if self.num_frames is not None and int(self.num_frames) < 1:
            raise ValueError(f'num_frames must be >= 1 or None (no cap), got {self.num_frames}')
        if int(self.stride) < 1:
            raise ValueError(f'stride must be >= 1 frame, got {self.stride}')
        if self.mode == 'fps' and (self.fps is None or not float(self.fps) > 0 or not math.isfinite(float(self.fps))):
            raise ValueError(f'fps sampling needs a positive fps (got {self.fps}); e.g. fps=1.0')

    def key(self) -> Dict:
        """The fields as a plain dict (part of cache keys and result logs)."""
        return asdict(self)

    def window(self, num_total: int, avg_fps: float, start: Optional[float] = None, end: Optional[float] = None,
               timestamps: Optional[Sequence[float]] = None) -> Tuple[int, int, Optional[np.ndarray]]:
        """The first and last frame of the ``start`` / ``end`` window (seconds; arguments as in :meth:`indices`), and
        the frame times used (``None`` on a constant frame rate, where ``index / avg_fps`` is the same).

        Raises:
            VideoReadError: (reason ``bad_window``) the window holds no frame.
        """
        max_frame = num_total - 1
        times = None
        if timestamps is not None:
            times = np.asarray(timestamps, dtype=np.float64)[:num_total]
            if len(times) != num_total:
                raise ValueError(f'{len(times)} timestamps for {num_total} frames')
            if np.allclose(times, np.arange(num_total) / avg_fps, rtol=0, atol=1e-3 / avg_fps):
                times = None  # a constant frame rate: index / fps is the same, and keeps MVBench's rounding
        if times is None:
            lo = 0 if start is None else max(0, int(round(start * avg_fps)))
            hi = max_frame if end is None else min(int(round(end * avg_fps)), max_frame)
        else:
            half = 0.5 / avg_fps
            lo = 0 if start is None else (num_total if start > times[-1] + half else _nearest(times, start))
            hi = max_frame if end is None else (-1 if end < -half else _nearest(times, end))
        if lo > hi:
            raise VideoReadError('', 'bad_window', f'window [{start}, {end}] s holds no frame of a video of '
                                 f'{num_total} frames at {avg_fps:.3f} fps')
        return lo, hi, times

    def indices(self, num_total: int, avg_fps: float, start: Optional[float] = None, end: Optional[float] = None,
                generator: Optional[np.random.Generator] = None,
                timestamps: Optional[Sequence[float]] = None) -> np.ndarray:
        """Frame indices to read.

        Args:
            num_total: frames in the video.
            avg_fps: its average frame rate (frames per second).
            start: window start in seconds (``None``: the first frame): the frame nearest to it.
            end: window end in seconds (``None``: the last frame): the frame nearest to it.
            generator: random source for ``random=True`` (``None``: a fresh unseeded one).
            timestamps: the frames' presentation times in seconds from the first frame (``(num_total,)``,
                increasing); seconds then map to frames by them, so windows and ``fps`` sampling are right on
                variable-frame-rate clips. ``None``: ``index / avg_fps``.

        Returns:
            int64 array ``(T,)`` of indices in ``[0, num_total)``, non-decreasing (repeats when the window is shorter
            than the clip).

        Raises:
            VideoReadError: (reason ``bad_window``) the window holds no frame.
        """
        lo, hi, times = self.window(num_total, avg_fps, start, end, timestamps)
        count = hi - lo + 1
        rng = generator if generator is not None else (np.random.default_rng() if self.random else None)
        if self.mode == 'uniform':
            n = int(self.num_frames)
            if not self.random:  # MVBench: seg = (end_idx - start_idx) / N; int(start + seg / 2 + round(seg * k))
                seg = float(hi - lo) / n
                idx = np.array([int(lo + seg / 2 + np.round(seg * k)) for k in range(n)], dtype=np.int64)
            else:
                edges = lo + np.arange(n + 1) * (count / n)
                first = np.floor(edges[:-1]).astype(np.int64)
                last = np.maximum(first, np.ceil(edges[1:]).astype(np.int64) - 1)
                idx = first + np.floor(rng.random(n) * (last - first + 1)).astype(np.int64)
        elif self.mode == 'stride':
            n, s = int(self.num_frames), int(self.stride)
            span = (n - 1) * s + 1
            room = max(0, count - span)
            off = int(rng.integers(0, room + 1)) if self.random else room // 2
            idx = lo + off + s * np.arange(n, dtype=np.int64)
        elif times is None:
            n = max(1, int(math.floor(count * float(self.fps) / avg_fps + 1e-6)))
            if self.num_frames is not None:
                n = min(n, int(self.num_frames))
            step = count / n
            phase = rng.random(n) if self.random else np.full(n, 0.5)
            idx = lo + np.floor((np.arange(n) + phase) * step).astype(np.int64)
        else:  # by time: the frame on screen at each segment midpoint of the window's seconds
            span = float(times[hi] - times[lo]) + 1.0 / avg_fps
            n = max(1, int(math.floor(span * float(self.fps) + 1e-6)))
            if self.num_frames is not None:
                n = min(n, int(self.num_frames))
            phase = rng.random(n) if self.random else np.full(n, 0.5)
            at = times[lo] + (np.arange(n) + phase) * (span / n)
            idx = np.searchsorted(times, at + 1e-9, side='right').astype(np.int64) - 1
        return np.clip(idx, lo, hi).astype(np.int64)


def _nearest(times: np.ndarray, t: float) -> int:
    """Index of the frame whose time is nearest to ``t`` (the earlier one on a tie)."""
    k = int(np.searchsorted(times, t))
    if k <= 0:
        return 0
    if k >= len(times):
        return len(times) - 1
    return k - 1 if t - times[k - 1] <= times[k] - t else k


@dataclass(frozen=True)
class VideoInfo:
    """What a video holds: ``num_frames`` (frames in the stream), ``fps`` (average), ``duration`` (seconds),
    ``height`` and ``width`` (pixels), ``codec``, and ``timestamps_ok`` (``False``: the stream's timestamps were
    unusable and frame times are ``index / fps``)."""
    num_frames: int
    fps: float
    duration: float
    height: int
    width: int
    codec: str = ''
    timestamps_ok: bool = True


@dataclass
class VideoClip:
    """Frames read from one video.

    Attributes:
        frames: uint8 ``(T, H, W, 3)`` RGB.
        indices: int64 ``(T,)`` frame indices in the file (display order).
        timestamps: float64 ``(T,)`` presentation times in seconds from the first frame (``index / fps`` when
            ``timestamps_ok`` is ``False``).
        fps: the video's average frame rate.
        num_frames: frames in the stream.
        decodable_frames: for a truncated file read with ``on_truncated='clamp'``, the number of leading frames
            the sampling was done over (they decode); else ``None``.
        path: the file.
        timestamps_ok: the timestamps are the stream's own.
        window_frames: frames the sampling was done over (those of the ``start`` / ``end`` window, or of the whole
            clip): fewer than ``T`` means frames repeat. ``None`` when unknown (a frame-cache entry of an older zoo).
        duration: seconds the sampled frames span (last frame's time plus one frame, of the decodable prefix under
            ``'clamp'``): a window ending later is cut at the clip's end. ``None`` when unknown.
    """
    frames: torch.Tensor
    indices: torch.Tensor
    timestamps: torch.Tensor
    fps: float
    num_frames: int
    decodable_frames: Optional[int] = None
    path: str = ''
    timestamps_ok: bool = True
    window_frames: Optional[int] = None
    duration: Optional[float] = None


def _check_file(path: str) -> None:
    if not os.path.isfile(path):
        raise VideoReadError(path, 'missing', 'no such file')


def _decode(path: str, index, wanted: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The one place frames are decoded (tests count the calls): :func:`zoo.datasets.video_streams.read_frames`,
    ``(sorted distinct indices, their frames)``."""
    return read_frames(path, index, wanted)


def probe_video(path: str, check_last: bool = True) -> VideoInfo:
    """Read what a video holds (its stream index, no decoding); with ``check_last`` also decode its first and last
    frame.

    Raises:
        VideoReadError: missing, undecodable, zero frames, truncated (fewer frames than the header says, or with
            ``check_last`` a first or last frame that does not decode).
    """
    for attempt in (0, 1):
        index = stream_index(path)
        n = index.num_frames
        if index.cut:
            raise VideoReadError(path, 'truncated', index.cut)
        if not check_last:
            break
        try:
            _decode(path, index, np.array(sorted({0, n - 1})))
            break
        except IndexReplaced:  # decord's own index failed its check: PyAV's replaces it
            continue
        except FramesNotDecodable as e:
            raise VideoReadError(path, 'truncated', f'the stream holds {n} frames, frame {e.first} does not decode '
                                 f'({e.detail})') from None
    return VideoInfo(num_frames=n, fps=index.fps, duration=index.duration, height=index.height, width=index.width,
                     codec=index.codec, timestamps_ok=index.timestamps_ok)


def _parse_size(size: SizeLike) -> Optional[Tuple[str, Tuple[int, int]]]:
    if size is None:
        return None
    if isinstance(size, int):
        if size < 1:
            raise ValueError(f'frame size must be >= 1 pixel, got {size}')
        return 'short', (size, size)
    size = tuple(int(s) for s in size)
    if len(size) != 2 or min(size) < 1:
        raise ValueError(f'frame size must be an int or (height, width) of positive pixels, got {size}')
    return 'exact', size


def resize_frames(frames: torch.Tensor, size: SizeLike) -> torch.Tensor:
    """Resize uint8 ``(T, H, W, 3)`` frames (antialiased bilinear, torchvision).

    Args:
        size: ``int``: shorter side to ``size`` then a centre crop to ``size x size``; ``(h, w)``: exactly that size
            (aspect ratio not kept); ``None``: unchanged.

    Returns:
        uint8 ``(T, h, w, 3)``.
    """
    spec = _parse_size(size)
    if spec is None:
        return frames
    from torchvision.transforms.v2 import functional as F
    x = frames.permute(0, 3, 1, 2)
    kind, (h, w) = spec
    if kind == 'short':
        if min(x.shape[-2:]) != h:
            x = F.resize(x, [h], antialias=True)
        x = F.center_crop(x, [h, w])
    elif tuple(x.shape[-2:]) != (h, w):
        x = F.resize(x, [h, w], antialias=True)
    return x.permute(0, 2, 3, 1).contiguous()


def frames_to_clip(frames: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    """uint8 ``(T, H, W, 3)`` frames to a normalised float32 clip ``(C, T, H, W)``: ``(x / 255 - mean) / std``."""
    x = frames.permute(3, 0, 1, 2).float().div_(255.0)
    m = torch.tensor(mean, dtype=x.dtype).view(-1, 1, 1, 1)
    s = torch.tensor(std, dtype=x.dtype).view(-1, 1, 1, 1)
    return x.sub_(m).div_(s)


class FrameCache:
    """Decoded, resized frames on disk (one ``.npz`` per read), keyed by the file (real path, byte size, mtime in ns),
    the output size, the sampling and the window. Reads with ``random=True`` sampling are not cached.

    Files are written atomically, loaded with ``allow_pickle=False``; an unreadable entry counts as a miss and is
    rewritten.

    Attributes:
        hits, misses: counts since creation.
    """

    def __init__(self, root: str):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.hits = 0
        self.misses = 0

    def key(self, path: str, size: SizeLike, sampling: FrameSampling, start: Optional[float], end: Optional[float],
            on_truncated: str) -> str:
        st = os.stat(path)
        # version 2: exact frames and true timestamps (entries of version 1 may hold other frames than indexed);
        # version 3: frames turned upright by the display rotation (entries of version 2 of a rotated video are not)
        spec = dict(version=3, path=os.path.realpath(path), bytes=st.st_size, mtime_ns=st.st_mtime_ns,
                    size=None if size is None else (size if isinstance(size, int) else list(size)),
                    sampling=sampling.key(), start=start, end=end, on_truncated=on_truncated)
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]

    def _file(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + '.npz')

    def has(self, key: str) -> bool:
        """True when an entry for ``key`` is on disk (a read of it will not decode the video, unless damaged)."""
        return os.path.isfile(self._file(key))

    def get(self, key: str, path: str) -> Optional[VideoClip]:
        f = self._file(key)
        if not os.path.isfile(f):
            self.misses += 1
            return None
        try:
            with np.load(f, allow_pickle=False) as z:
                meta = json.loads(str(z['meta']))
                clip = VideoClip(frames=torch.from_numpy(z['frames'].copy()),
                                 indices=torch.from_numpy(z['indices'].copy()),
                                 timestamps=torch.from_numpy(z['timestamps'].copy()), fps=meta['fps'],
                                 num_frames=meta['num_frames'], decodable_frames=meta['decodable_frames'], path=path,
                                 timestamps_ok=meta.get('timestamps_ok', True),
                                 window_frames=meta.get('window_frames'), duration=meta.get('duration'))
        except Exception as e:  # a damaged entry is a miss
            _logger.warning('frame cache entry %s unreadable (%s); decoding again', f, _one_line(e))
            self.misses += 1
            return None
        self.hits += 1
        return clip

    def put(self, key: str, clip: VideoClip) -> None:
        from zoo.datasets.files import write_atomic
        f = self._file(key)
        os.makedirs(os.path.dirname(f), exist_ok=True)
        meta = json.dumps(dict(fps=clip.fps, num_frames=clip.num_frames, decodable_frames=clip.decodable_frames,
                               timestamps_ok=clip.timestamps_ok, window_frames=clip.window_frames,
                               duration=clip.duration))

        def write(tmp: str) -> None:
            with open(tmp, 'wb') as fh:
                np.savez(fh, frames=clip.frames.numpy(), indices=clip.indices.numpy(),
                         timestamps=clip.timestamps.numpy(), meta=np.array(meta))
        write_atomic(f, write)


def read_video(path: str, sampling: FrameSampling, *, start: Optional[float] = None, end: Optional[float] = None,
               size: SizeLike = None, generator: Optional[np.random.Generator] = None,
               cache: Optional[FrameCache] = None, on_truncated: str = 'error') -> VideoClip:
    """Read the sampled frames of one video.

    Args:
        path: video file (any container / codec FFmpeg reads).
        sampling: which frames.
        start: window start in seconds (``None``: beginning).
        end: window end in seconds (``None``: end).
        size: see :func:`resize_frames` (``None``: native size).
        generator: random source for ``sampling.random``.
        cache: reuse / store decoded frames (skipped for random sampling).
        on_truncated: ``'error'`` raises :class:`VideoReadError` (reason ``truncated``) for a file with fewer frames
            than its header says or with frames that do not decode; ``'clamp'`` samples over the frames that decode
            and sets ``decodable_frames``.

    Returns:
        :class:`VideoClip` with uint8 frames ``(T, H, W, 3)``.

    Raises:
        VideoReadError: the video cannot be used (see its ``reason``).
        VideoMemoryError: the decoded frames would not fit in the available memory (estimated before decoding).
        ValueError: bad ``size`` or ``on_truncated``.
    """
    if on_truncated not in ('error', 'clamp'):
        raise ValueError(f"on_truncated must be 'error' or 'clamp', got {on_truncated!r}")
    _parse_size(size)
    _check_file(path)
    key = None
    if cache is not None and not sampling.random:
        key = cache.key(path, size, sampling, start, end, on_truncated)
        hit = cache.get(key, path)
        if hit is not None:
            return hit
    state = generator.bit_generator.state if generator is not None else None
    try:
        clip = _read(path, sampling, start, end, size, generator, on_truncated)
    except IndexReplaced:  # decord's own index failed its check on this file: sample again on PyAV's index
        if state is not None:
            generator.bit_generator.state = state  # the same random draws as a read that never saw decord's index
        clip = _read(path, sampling, start, end, size, generator, on_truncated)
    if key is not None:
        cache.put(key, clip)
    return clip


def _read(path: str, sampling: FrameSampling, start: Optional[float], end: Optional[float], size: SizeLike,
          generator: Optional[np.random.Generator], on_truncated: str) -> VideoClip:
    """:func:`read_video` past the cache: index, sample, check the memory, decode, resize."""
    index = stream_index(path)
    n, fps = index.num_frames, index.fps
    if index.cut and on_truncated == 'error':
        raise VideoReadError(path, 'truncated', f"{index.cut} (cut short; on_truncated='clamp' reads the frames that "
                             'decode)')

    span = {}  # frames of the window sampled over, and the seconds the sampled frames span

    def sample(total: int) -> np.ndarray:
        try:
            lo, hi, _ = sampling.window(total, fps, start, end, index.times[:total])
            span.update(window_frames=hi - lo + 1, duration=float(index.times[total - 1]) + 1.0 / fps)
            return sampling.indices(total, fps, start, end, generator, timestamps=index.times[:total])
        except VideoReadError as e:
            raise VideoReadError(path, e.reason, e.detail) from None

    decodable = None
    if on_truncated == 'clamp':
        decodable = count_decodable(path, index) if index.cut else known_decodable(index)
        if decodable is not None and decodable < 1:
            raise VideoReadError(path, 'truncated', f'{index.cut or "the stream is damaged"}; no frame decodes')
    idx = sample(decodable or n)
    try:
        got = _read_checked(path, index, idx, size)
    except FramesNotDecodable as e:  # the index promised frames that do not decode: the data is cut or damaged
        if on_truncated == 'error':
            raise VideoReadError(path, 'truncated', f'the stream holds {n} frames, frame {e.first} does not decode '
                                 f"({e.detail}; on_truncated='clamp' reads the frames that decode)") from None
        decodable = count_decodable(path, index)
        if decodable < 1:
            raise VideoReadError(path, 'truncated', f'the stream holds {n} frames, none decodes ({e.detail})') \
                from None
        idx = sample(decodable)
        try:
            got = _read_checked(path, index, idx, size)
        except FramesNotDecodable as e2:
            raise VideoReadError(path, 'truncated', f'{decodable} of {n} frames decode in order, but frame '
                                 f'{e2.first} does not after a seek ({e2.detail})') from None
    unique, arr = got
    frames = resize_frames(torch.from_numpy(arr), size)
    if len(unique) != len(idx) or np.any(unique != idx):
        frames = frames[torch.from_numpy(np.searchsorted(unique, idx))]
    return VideoClip(frames=frames, indices=torch.from_numpy(idx), timestamps=torch.from_numpy(index.times[idx]),
                     fps=fps, num_frames=n, decodable_frames=decodable, path=path, timestamps_ok=index.timestamps_ok,
                     **span)


def _read_checked(path: str, index, idx: np.ndarray, size: SizeLike) -> Tuple[np.ndarray, np.ndarray]:
    """Decode the distinct frames of ``idx`` after checking that they, and the clip made of them, fit in memory."""
    unique = np.unique(idx)
    out = _parse_size(size)
    h, w = out[1] if out is not None else (index.height, index.width)
    native = len(unique) * index.height * index.width * 3
    check_memory(native + len(idx) * h * w * 3, f'reading {len(idx)} frames ({len(unique)} distinct) of '
                 f'{index.height}x{index.width} px from {path}', 'ask for fewer frames or a smaller size')
    return _decode(path, index, unique)
