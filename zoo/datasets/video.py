"""Reading frames from video files with decord (PyAV where decord has no wheel): sampling rules, timestamps, clear errors, an on-disk frame cache.

Sampling (:class:`FrameSampling`), all inside an optional ``[start, end]`` window in seconds:

* ``uniform``: N frames at the midpoints of N equal segments, with MVBench's exact formula (``get_index`` of
  "MVBench: A Comprehensive Multi-modal Video Understanding Benchmark", arXiv:2311.17005); with ``random=True`` one
  random frame per segment (TSN's training rule, "Temporal Segment Networks", arXiv:1608.00859);
* ``stride``: N frames ``stride`` frames apart, centred in the window (``random=True``: a random start), as
  VideoMAE ("VideoMAE: Masked Autoencoders are Data-Efficient Learners ...", arXiv:2203.12602) samples clips;
* ``fps``: one frame every ``1 / fps`` seconds (segment midpoints), at most ``num_frames`` of them (then spread
  uniformly over the window), the fps-with-a-cap protocol of video-LLM evaluations.

Every read returns the sampled frame indices and their presentation timestamps in seconds (decord's
``get_frame_timestamp``), which feed time-aware position encodings.

Real files fail in ways the header does not show: decord can report more frames than it can decode and raise in the
middle of ``get_batch``. Every failure becomes one :class:`VideoReadError` with a ``reason`` (``missing``,
``undecodable``, ``zero_frames``, ``truncated``, ``bad_window``) that datasets count and report. With
``on_truncated='clamp'`` a truncated file is read from a leading part that decodes instead (the sampling is redone
over shorter and shorter prefixes until a read succeeds).

Readers are opened per read and dropped right after (decord keeps whole packet indexes in memory), so memory stays flat
over long loops. :class:`FrameCache` stores decoded, resized frames on disk, keyed by the file (real path, size,
mtime), the output size and the sampling, so a sweep over model sizes decodes each video once per sampling.
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

_logger = logging.getLogger('zoo.datasets')

__all__ = ['VIDEO_EXTENSIONS', 'VideoReadError', 'FrameSampling', 'VideoInfo', 'VideoClip', 'FrameCache',
           'probe_video', 'read_video', 'resize_frames', 'frames_to_clip', 'video_backend']

VIDEO_EXTENSIONS = ('.mp4', '.mkv', '.mov', '.avi', '.webm')

SizeLike = Union[None, int, Tuple[int, int], Sequence[int]]


class VideoReadError(RuntimeError):
    """A video that cannot be used; ``reason`` is one of :attr:`REASONS`.

    Attributes:
        path: the file.
        reason: ``missing`` (no such file), ``undecodable`` (decord cannot open it, or it has no frame rate),
            ``zero_frames``, ``truncated`` (the file ends or breaks mid-stream: the demuxer fails while indexing, or
            frames the index promises do not decode), ``bad_window`` (the start/end window holds no frame).
        detail: one line saying what failed.
    """
    REASONS = ('missing', 'undecodable', 'zero_frames', 'truncated', 'bad_window')

    def __init__(self, path: str, reason: str, detail: str):
        self.path, self.reason, self.detail = path, reason, detail
        super().__init__(f'{path}: {reason}: {detail}')


def _decord():
    """decord, or ``None`` where it is not installed (no wheel for the platform) or ``ZOO_VIDEO_BACKEND=pyav``."""
    if os.environ.get('ZOO_VIDEO_BACKEND', '').lower() == 'pyav':
        return None
    try:
        import decord
    except ImportError:
        return None
    decord.logging.set_level(decord.logging.QUIET)  # ffmpeg's own log lines; failures come back as VideoReadError
    return decord


def video_backend() -> str:
    """``'decord'`` where decord is installed (x86-64 Linux and Windows wheels), else ``'pyav'``."""
    return 'decord' if _decord() is not None else 'pyav'


class _Frames:
    """What decord's ``get_batch`` returns, for the PyAV reader: an array behind ``asnumpy()``."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def asnumpy(self) -> np.ndarray:
        return self.array


class _PyAVReader:
    """decord's ``VideoReader`` interface (``len``, ``get_avg_fps``, ``get_batch``, ``get_frame_timestamp``) over PyAV,
    for platforms without a decord wheel (macOS, Linux aarch64) or ``ZOO_VIDEO_BACKEND=pyav``.

    Frames are decoded in presentation order from the start of the stream up to the last requested one (no seeking),
    so the frame at index ``i`` is exactly the ``i``-th decoded frame; slower than decord on long videos.

    Raises:
        av.error.FFmpegError / RuntimeError: the file cannot be opened or a requested frame does not decode (mapped
            to :class:`VideoReadError` by the callers, as decord's errors are).
    """

    def __init__(self, path: str, width: int = -1, height: int = -1):
        import av
        self.path = path
        self._decoded: Dict[int, Tuple[np.ndarray, float, float]] = {}
        with av.open(path) as container:
            if not container.streams.video:
                raise RuntimeError('the container has no video stream')
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
            self._fps = float(rate) if rate else float('nan')
            n = int(stream.frames or 0)
            if n <= 0:  # no frame count in the header: count the packets that carry data
                n = sum(1 for packet in container.demux(stream) if packet.size)
        self._n = n

    def __len__(self) -> int:
        return self._n

    def get_avg_fps(self) -> float:
        return self._fps

    def _decode(self, idx: Sequence[int]) -> None:
        import av
        wanted = {int(i) for i in idx} - set(self._decoded)
        if not wanted:
            return
        last = max(wanted)
        with av.open(self.path) as container:
            stream = container.streams.video[0]
            for i, frame in enumerate(container.decode(stream)):
                if i in wanted:
                    start = float(frame.pts * frame.time_base) if frame.pts is not None else float('nan')
                    step = 1.0 / self._fps if self._fps > 0 else float('nan')
                    self._decoded[i] = (frame.to_ndarray(format='rgb24'), start, start + step)
                if i >= last:
                    break
        missing = sorted(wanted - set(self._decoded))
        if missing:
            raise RuntimeError(f'frames {missing[0]}..{missing[-1]} do not decode (the stream ends early)')

    def get_batch(self, idx: Sequence[int]) -> _Frames:
        self._decode(idx)
        return _Frames(np.stack([self._decoded[int(i)][0] for i in idx]))

    def get_frame_timestamp(self, idx: Sequence[int]) -> np.ndarray:
        self._decode(idx)
        return np.array([self._decoded[int(i)][1:] for i in idx], dtype=np.float64)


def _open_reader(path: str, **kwargs):
    """Open one reader (decord on CPU with one thread, else PyAV). A single place, so tests can count openings."""
    decord = _decord()
    if decord is None:
        return _PyAVReader(path, **kwargs)
    return decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1, **kwargs)


def _batch(path: str, vr, idx: np.ndarray):
    """``vr.get_batch`` as uint8 ``(T, H, W, 3)``; returns ``(frames, reader)``.

    decord 0.6 fails on some frame widths (e.g. 48 px) with "DECORDArrayCopyFromTo: The size must exactly match"
    (its row padding); such files are decoded through decord's scaler at a width rounded up to 32 pixels and resized
    back to the native size.
    """
    try:
        return _get_batch(vr, idx), vr
    except Exception as e:
        if 'DECORDArrayCopyFromTo' not in str(e):
            raise
    import av
    with av.open(path) as c:
        h, w = c.streams.video[0].height, c.streams.video[0].width
    vr = _open_reader(path, width=-(-w // 32) * 32, height=h)
    arr = _get_batch(vr, idx)
    return resize_frames(torch.from_numpy(arr), (h, w)).numpy(), vr


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f'{type(e).__name__}: {text[-1][:200] if text else ""}'


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

    def indices(self, num_total: int, avg_fps: float, start: Optional[float] = None, end: Optional[float] = None,
                generator: Optional[np.random.Generator] = None) -> np.ndarray:
        """Frame indices to read.

        Args:
            num_total: frames in the video.
            avg_fps: its average frame rate (frames per second).
            start: window start in seconds (``None``: the first frame).
            end: window end in seconds (``None``: the last frame).
            generator: random source for ``random=True`` (``None``: a fresh unseeded one).

        Returns:
            int64 array ``(T,)`` of indices in ``[0, num_total)``, non-decreasing (repeats when the window is shorter
            than the clip).

        Raises:
            VideoReadError: (reason ``bad_window``) the window holds no frame.
        """
        max_frame = num_total - 1
        lo = 0 if start is None else max(0, int(round(start * avg_fps)))
        hi = max_frame if end is None else min(int(round(end * avg_fps)), max_frame)
        if lo > hi:
            raise VideoReadError('', 'bad_window', f'window [{start}, {end}] s holds no frame of a video of '
                                 f'{num_total} frames at {avg_fps:.3f} fps')
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
        else:
            n = max(1, int(math.floor(count * float(self.fps) / avg_fps + 1e-6)))
            if self.num_frames is not None:
                n = min(n, int(self.num_frames))
            step = count / n
            phase = rng.random(n) if self.random else np.full(n, 0.5)
            idx = lo + np.floor((np.arange(n) + phase) * step).astype(np.int64)
        return np.clip(idx, lo, hi).astype(np.int64)


@dataclass(frozen=True)
class VideoInfo:
    """What the container says about a video: ``num_frames``, ``fps`` (average), ``duration`` (seconds),
    ``height`` and ``width`` (pixels)."""
    num_frames: int
    fps: float
    duration: float
    height: int
    width: int


@dataclass
class VideoClip:
    """Frames read from one video.

    Attributes:
        frames: uint8 ``(T, H, W, 3)`` RGB.
        indices: int64 ``(T,)`` frame indices in the file.
        timestamps: float64 ``(T,)`` presentation times in seconds.
        fps: the video's average frame rate.
        num_frames: frames the header reports.
        decodable_frames: for a truncated file read with ``on_truncated='clamp'``, the number of leading frames
            the sampling was redone over (their read succeeded); else ``None``.
        path: the file.
    """
    frames: torch.Tensor
    indices: torch.Tensor
    timestamps: torch.Tensor
    fps: float
    num_frames: int
    decodable_frames: Optional[int] = None
    path: str = ''


def _check_file(path: str) -> None:
    if not os.path.isfile(path):
        raise VideoReadError(path, 'missing', 'no such file')


def _open(path: str):
    _check_file(path)
    try:
        vr = _open_reader(path)
        n = len(vr)
        fps = float(vr.get_avg_fps())
    except VideoReadError:
        raise
    except Exception as e:  # decord raises RuntimeError / DECORDError for anything it cannot parse
        # decord indexes every packet on open: a demuxer failure there is a file cut (or damaged) mid-stream
        reason = 'truncated' if 'av_read_frame failed' in str(e) else 'undecodable'
        raise VideoReadError(path, reason, _one_line(e)) from None
    if n <= 0:
        raise VideoReadError(path, 'zero_frames', 'the container holds no video frame')
    if not fps > 0 or not math.isfinite(fps):
        raise VideoReadError(path, 'undecodable', f'no usable frame rate ({fps})')
    return vr, n, fps


def probe_video(path: str, check_last: bool = True) -> VideoInfo:
    """Open a video and read its header; with ``check_last`` also decode the first and last frame.

    Raises:
        VideoReadError: missing, undecodable, zero frames, or (``check_last``) a last frame that does not decode
            (reason ``truncated``).
    """
    vr, n, fps = _open(path)
    try:
        first = _batch(path, vr, np.zeros(1, dtype=np.int64))[0].shape[1:]
    except Exception as e:
        raise VideoReadError(path, 'truncated', f'header says {n} frames, frame 0 does not decode '
                             f'({_one_line(e)})') from None
    if check_last and n > 1:
        try:
            _batch(path, vr, np.array([n - 1]))
        except Exception as e:
            raise VideoReadError(path, 'truncated', f'header says {n} frames, frame {n - 1} does not decode '
                                 f'({_one_line(e)})') from None
    del vr
    return VideoInfo(num_frames=n, fps=fps, duration=n / fps, height=int(first[0]), width=int(first[1]))


def _read_prefix(path: str, sampling: FrameSampling, n: int, fps: float, start: Optional[float],
                 end: Optional[float], generator: Optional[np.random.Generator], first_error: Exception):
    """Sample again over shorter and shorter leading parts of a truncated video until a read succeeds.

    Decodability after a cut is not monotone in the frame index (frames depend on later ones), so every try is a
    full batch read on a fresh reader. Returns ``(reader, indices, frames, decodable frames)``.
    """
    good = n
    while good > 1:
        good = good - 1 if good <= 8 else good * 3 // 4
        try:
            idx = sampling.indices(good, fps, start, end, generator)
        except VideoReadError as e:
            raise VideoReadError(path, 'truncated', f'{e.detail}, the header says {n} frames but only part of '
                                 f'them decode ({_one_line(first_error)})') from None
        vr = _open_reader(path)
        try:
            arr, vr = _batch(path, vr, idx)
            return vr, idx, arr, good
        except Exception:
            del vr
    raise VideoReadError(path, 'truncated', f'header says {n} frames, none decodes ({_one_line(first_error)})')


def _get_batch(vr, idx: np.ndarray) -> np.ndarray:
    return vr.get_batch(idx.tolist()).asnumpy()


def _timestamps(vr, idx: np.ndarray, fps: float) -> np.ndarray:
    try:
        ts = np.asarray(vr.get_frame_timestamp(idx.tolist()), dtype=np.float64).reshape(len(idx), -1)[:, 0]
        if np.all(np.isfinite(ts)):
            return ts
    except Exception:
        pass
    return idx.astype(np.float64) / fps


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
        spec = dict(path=os.path.realpath(path), bytes=st.st_size, mtime_ns=st.st_mtime_ns,
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
                                 num_frames=meta['num_frames'], decodable_frames=meta['decodable_frames'], path=path)
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
        meta = json.dumps(dict(fps=clip.fps, num_frames=clip.num_frames, decodable_frames=clip.decodable_frames))

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
        path: video file (any container/codec FFmpeg in decord reads).
        sampling: which frames.
        start: window start in seconds (``None``: beginning).
        end: window end in seconds (``None``: end).
        size: see :func:`resize_frames` (``None``: native size).
        generator: random source for ``sampling.random``.
        cache: reuse / store decoded frames (skipped for random sampling).
        on_truncated: ``'error'`` raises :class:`VideoReadError` (reason ``truncated``) when frames the header
            promises do not decode; ``'clamp'`` samples again over the decodable prefix and sets
            ``decodable_frames``.

    Returns:
        :class:`VideoClip` with uint8 frames ``(T, H, W, 3)``.

    Raises:
        VideoReadError: the video cannot be used (see its ``reason``).
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
    vr, n, fps = _open(path)
    try:
        try:
            idx = sampling.indices(n, fps, start, end, generator)
        except VideoReadError as e:
            raise VideoReadError(path, e.reason, e.detail) from None
        decodable = None
        try:
            arr, vr = _batch(path, vr, idx)
        except Exception as e:  # the index promised frames that do not decode: the data is cut or damaged
            vr = None
            if on_truncated == 'error':
                raise VideoReadError(path, 'truncated', f'header says {n} frames, reading frames '
                                     f'{idx.min()}..{idx.max()} failed ({_one_line(e)})') from None
            vr, idx, arr, decodable = _read_prefix(path, sampling, n, fps, start, end, generator, e)
        ts = _timestamps(vr, idx, fps)
    finally:
        del vr
    frames = resize_frames(torch.from_numpy(arr), size)
    clip = VideoClip(frames=frames, indices=torch.from_numpy(idx), timestamps=torch.from_numpy(ts), fps=fps,
                     num_frames=n, decodable_frames=decodable, path=path)
    if key is not None:
        cache.put(key, clip)
    return clip

