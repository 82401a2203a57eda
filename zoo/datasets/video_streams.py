"""What a video file holds and how its frames are decoded exactly: the stream index, true timestamps, the exact
PyAV decoder, and decord's fast reads, verified once per file.

Why: decord's seeking is known to return frames other than the ones asked for in some codec / container
combinations (decord issues #54, #195, #325, #365: HEVC with open GOPs near keyframes, MPEG-4 Part 2 in AVI, H.264 in
MPEG-TS, and more), while it reports the requested indices; it reports a sentinel of about -3.7e17 s as the time of
frames without timestamps; and it loops forever on some files whose header over-reports the frame count (#373).

What this module does about it:

* :func:`stream_index` keeps, per file: the number of frames, the header's count, whether the file was cut short, the
  presentation timestamps in display order, the keyframes and the codec. Frame ``i`` is the ``i``-th frame in
  presentation order. With decord in use the index is decord's own (it reads every packet when it opens a file),
  taken only when its numbers pass the checks; else a PyAV demux pass (packets only, no decoding) makes it.
* Timestamps are checked (present, strictly increasing, a span that agrees with the frame rate within a factor of
  10); unusable ones are replaced by ``index / fps``, logged once per file and counted in :data:`COUNTS`.
* :func:`decode_exact` decodes with PyAV: it seeks to the keyframe before each needed range and identifies every
  decoded frame by its timestamp (exact by construction), or, in a file without usable timestamps or where seeking
  lands wrong, decodes in order from the start (the ``i``-th decoded frame is frame ``i``).
* :func:`read_frames` uses decord where it is installed (``ZOO_VIDEO_BACKEND=pyav`` turns it off), but trusts it
  with a file only after a check, done once per file (real path, size, mtime): the frames decord returns at up to
  three keyframes spread over the file (those before requested frames first: decord decodes them anyway in the same
  batch) must equal PyAV's, each decoded alone (:func:`_check_frames`), and on a PyAV index decord's count and every
  frame time must equal it. A file
  that fails is indexed again with PyAV (:class:`IndexReplaced`: the request is sampled again) and read with
  :func:`decode_exact` from then on, with one warning naming the file and the reason. Indexes and verdicts are kept in
  the process and on disk (:func:`index_cache_dir`), so new processes (DataLoader workers) do not check again.
  decord's own log lines (C++, written to file descriptor 2) are caught and logged at debug level.

Both backends give the same frames for the same request; the check costs one PyAV open and up to three seeks and
decoded keyframes per file (measured by ``benchmarks/video_decode_speed.py``, in ``docs/video_input.md``).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import threading
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

_logger = logging.getLogger('zoo.datasets')

__all__ = ['VideoReadError', 'IndexReplaced', 'StreamIndex', 'stream_index', 'decode_exact', 'read_frames',
           'count_decodable', 'known_decodable', 'index_cache_dir', 'video_backend', 'verdict', 'forget', 'COUNTS',
           'FramesNotDecodable']

#: Events counted in this process: ``timestamps_replaced`` (files whose timestamps were unusable),
#: ``decord_inexact`` (files decord would have read wrong, read with PyAV instead), ``decord_verified`` (files checked
#: and read with decord).
COUNTS: Counter = Counter()

_INDEX_CACHE: 'OrderedDict[Tuple, StreamIndex]' = OrderedDict()
_INDEX_CACHE_SIZE = 1024
_VERDICTS: Dict[Tuple, str] = {}
_WARNED: set = set()
_NO_SEEK: set = set()  # files where seeking by timestamp proved unreliable
_DECODABLE: Dict[Tuple, int] = {}  # file -> leading frames that decode (cut or damaged files)
_REFERENCE: Dict[Tuple, Dict[int, np.ndarray]] = {}  # file -> its check frames, decoded exactly
_PYAV_INDEX: set = set()  # files whose index must come from a PyAV demux pass
_HANDOFF: Dict[Tuple, Tuple] = {}  # file -> (decord reader, PyAV container) its index was taken from, for its read
_STDERR_LOCK = threading.Lock()
_INHERITED: List[Tuple] = []  # readers a forked process inherited: kept, never used nor closed (see _after_fork)


def _after_fork() -> None:
    """In a forked child (DataLoader workers): the decord readers and PyAV containers of ``_HANDOFF`` belong to the
    parent (their decoder threads did not fork); using one hung the child in a futex, and so could destroying one.
    Keep them alive, unused; and a fresh stderr lock, in case another thread of the parent held it."""
    global _STDERR_LOCK
    _INHERITED.extend(_HANDOFF.values())
    _HANDOFF.clear()
    _STDERR_LOCK = threading.Lock()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_after_fork)


class VideoReadError(RuntimeError):
    """A video that cannot be used; ``reason`` is one of :attr:`REASONS`.

    Attributes:
        path: the file.
        reason: ``missing`` (no such file), ``undecodable`` (no video stream, an unknown format, no frame rate),
            ``zero_frames``, ``truncated`` (the file ends or breaks mid-stream: fewer frames than its header says,
            or frames that do not decode), ``bad_window`` (the start/end window holds no frame).
        detail: one line saying what failed.
    """
    REASONS = ('missing', 'undecodable', 'zero_frames', 'truncated', 'bad_window')

    def __init__(self, path: str, reason: str, detail: str):
        self.path, self.reason, self.detail = path, reason, detail
        super().__init__(f'{path}: {reason}: {detail}')


class FramesNotDecodable(RuntimeError):
    """Frames the index promises do not decode (the data is cut or damaged).

    Attributes:
        first: the smallest requested frame index that did not decode.
        detail: what the decoder said.
    """

    def __init__(self, first: int, detail: str):
        self.first, self.detail = first, detail
        super().__init__(f'frame {first} does not decode ({detail})')


class IndexReplaced(Exception):
    """The index a request was sampled on was decord's, and decord failed its check on this file: the file has been
    re-indexed with PyAV (:func:`stream_index` returns the new index); sample again and read again."""


class _Unreliable(Exception):
    """Seeking by timestamp cannot be trusted in this file (frames without timestamps, a seek past the target)."""


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f'{type(e).__name__}: {text[-1][:200] if text else ""}'


def _file_key(path: str) -> Tuple[str, int, int]:
    st = os.stat(path)
    return os.path.realpath(path), st.st_size, st.st_mtime_ns


def _warn_once(key: Tuple, kind: str, msg: str, *args) -> None:
    if (key, kind) not in _WARNED:
        _WARNED.add((key, kind))
        _logger.warning(msg, *args)


# ---- the stream index ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StreamIndex:
    """What demuxing the first video stream of a file tells (no frame is decoded).

    Attributes:
        path: the file.
        codec: decoder name (``h264``, ``hevc``, ``mpeg4``, ``vp9`` ...).
        container: demuxer name (``mov,mp4,m4a,3gp,3g2,mj2``, ``avi``, ``matroska,webm``, ``mpegts`` ...).
        height, width: frame size in pixels.
        num_frames: frames in the stream (packets that carry data).
        header_frames: the frame count the container's header states (0: none stated).
        cut: ``''``, or one line saying why the file looks cut short (fewer frames than the header states, or
            demuxing stopped on an error).
        fps: average frame rate (frames per second): the container's, or the timestamps' where they disagree by
            more than 1 % (variable frame rate).
        times: float64 ``(num_frames,)`` seconds from the first frame, in display order: the true presentation
            times, or ``index / fps`` where ``timestamp_problem`` is set.
        pts: int64 ``(num_frames,)`` presentation timestamps in ``time_base`` units in display order, or ``None``
            when they are unusable.
        time_base: the stream's time base (seconds per ``pts`` unit).
        keyframes: int64 display-order indices of the keyframes (empty without ``pts``).
        timestamp_problem: ``''``, or why the timestamps were replaced by ``index / fps``.
        key: the file's identity when indexed (real path, size, mtime in ns).
        source: ``'pyav'`` (a PyAV demux pass) or ``'decord'`` (decord's own index, taken while decord opens the file
            anyway; trusted only once decord's frames pass the check, else replaced by PyAV's).
        pts_tolerance: how far (in ``time_base`` units) a decoded frame's pts may be from ``pts`` and still be that
            frame: 0 for PyAV's index; decord's frame times are float32, so its ``pts`` are rebuilt to within this.
    """
    path: str
    codec: str
    container: str
    height: int
    width: int
    num_frames: int
    header_frames: int
    cut: str
    fps: float
    times: np.ndarray = field(repr=False)
    pts: Optional[np.ndarray] = field(repr=False)
    time_base: Fraction
    keyframes: np.ndarray = field(repr=False)
    timestamp_problem: str = ''
    key: Tuple = ()
    source: str = 'pyav'
    pts_tolerance: int = 0

    def frame_at(self) -> Callable[[Optional[int]], Optional[int]]:
        """``pts -> frame index`` (``None`` for a pts the index does not hold), within ``pts_tolerance``."""
        assert self.pts is not None
        if not self.pts_tolerance:
            exact = {int(p): i for i, p in enumerate(self.pts)}
            return lambda p: None if p is None else exact.get(int(p))
        pts, tol = self.pts, self.pts_tolerance

        def near(p: Optional[int]) -> Optional[int]:
            if p is None:
                return None
            k = int(np.searchsorted(pts, p))
            best = min((j for j in (k - 1, k) if 0 <= j < len(pts)), key=lambda j: abs(int(pts[j]) - p))
            return best if abs(int(pts[best]) - p) <= tol else None
        return near

    @property
    def timestamps_ok(self) -> bool:
        """True when ``times`` are the stream's own presentation times."""
        return not self.timestamp_problem

    @property
    def duration(self) -> float:
        """Seconds from the first frame to the end of the last (one average frame period after its start)."""
        return float(self.times[-1]) + 1.0 / self.fps


def _times_of(pts: np.ndarray, time_base: Fraction) -> np.ndarray:
    """float64 seconds from the first frame of sorted ``pts``."""
    return (pts - pts[0]).astype(np.float64) * float(time_base)


def _open_container(path: str):
    import av
    if not os.path.isfile(path):
        raise VideoReadError(path, 'missing', 'no such file')
    try:
        return av.open(path)
    except Exception as e:  # av.error.InvalidDataError and friends: not a container FFmpeg can read
        hint = ' (an MP4 cut before its index, the moov atom, cannot be read either)' \
            if path.lower().endswith(('.mp4', '.mov', '.m4v')) else ''
        raise VideoReadError(path, 'undecodable', f'{_one_line(e)}{hint}') from None


def _check_timestamps(pts: List[Optional[int]], time_base: Fraction, rate: float) -> Tuple[Optional[np.ndarray],
                                                                                         str]:
    """Sorted pts, or ``None`` and the reason they cannot be used."""
    n = len(pts)
    if any(p is None for p in pts):
        missing = sum(p is None for p in pts)
        return None, f'{missing} of {n} frames carry no presentation timestamp'
    arr = np.sort(np.asarray(pts, dtype=np.int64))
    if n > 1 and not np.all(arr[1:] > arr[:-1]):
        return None, 'presentation timestamps repeat'
    span = float((int(arr[-1]) - int(arr[0])) * time_base) if n > 1 else 0.0
    if not math.isfinite(span):
        return None, 'presentation timestamps are not finite'
    if n > 1 and rate > 0:
        expected = (n - 1) / rate
        if not 0.1 <= span / expected <= 10:
            return None, (f'presentation timestamps span {span:.6g} s for {n} frames at {rate:.4g} fps '
                          f'(expected about {expected:.4g} s)')
    return arr, ''


def _build_index(path: str, key: Tuple) -> StreamIndex:
    """Demux the first video stream of ``path`` (no decoding) into its :class:`StreamIndex`."""
    with _open_container(path) as container:
        if not container.streams.video:
            raise VideoReadError(path, 'undecodable', 'the file holds no video stream')
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        header_rate = float(rate) if rate else float('nan')
        time_base = stream.time_base or Fraction(1, 1)
        pts: List[Optional[int]] = []
        keys: List[bool] = []
        error = ''
        try:
            for packet in container.demux(stream):
                if packet.size:
                    pts.append(packet.pts)
                    keys.append(bool(packet.is_keyframe))
        except Exception as e:  # a cut or damaged file: demuxing stops here
            error = _one_line(e)
        header = int(stream.frames or 0)
        n = len(pts)
        if n == 0:
            if error or header:
                raise VideoReadError(path, 'truncated', f'the header says {header} frames, none can be read'
                                     + (f' ({error})' if error else ''))
            raise VideoReadError(path, 'zero_frames', 'the container holds no video frame')
        cut = ''
        if error:
            cut = f'demuxing stopped after {n} frames ({error})'
        elif header and n < header:
            cut = f'the header says {header} frames, the file holds {n}'
        arr, problem = _check_timestamps(pts, time_base, header_rate)
        fps = header_rate
        if arr is not None and n > 1:
            ts_rate = (n - 1) / float((int(arr[-1]) - int(arr[0])) * time_base)
            if not (header_rate > 0 and math.isfinite(header_rate)) or abs(header_rate / ts_rate - 1) > 0.01:
                fps = ts_rate  # variable frame rate (or no stated rate): the timestamps' average
        if not (fps > 0 and math.isfinite(fps)):
            raise VideoReadError(path, 'undecodable', f'no usable frame rate ({rate}) and no timestamps to derive '
                                 'one')
        if arr is not None:
            times = _times_of(arr, time_base)
            keyframes = np.unique(np.searchsorted(arr, np.asarray(pts, dtype=np.int64)[np.asarray(keys, bool)]))
        else:
            times = np.arange(n, dtype=np.float64) / fps
            keyframes = np.zeros(0, dtype=np.int64)
        index = StreamIndex(path=path, codec=stream.codec_context.name, container=container.format.name,
                            height=int(stream.height or 0), width=int(stream.width or 0), num_frames=n,
                            header_frames=header, cut=cut, fps=float(fps), times=times, pts=arr,
                            time_base=time_base, keyframes=keyframes.astype(np.int64), timestamp_problem=problem,
                            key=key)
    return index


def _index_from_decord(decord, path: str, key: Tuple) -> Optional[StreamIndex]:
    """The index from decord's own (frame count, frame times, keyframes: decord reads every packet when it opens a
    file, so a PyAV demux pass would read them twice) plus the container header from PyAV; ``None`` when decord cannot
    open the file or its numbers fail the checks (then PyAV indexes it). The reader is kept in ``_HANDOFF`` for the
    read that follows."""
    try:
        with _native_stderr_to_log():
            vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        n = len(vr)
        ts = np.asarray(vr.get_frame_timestamp(list(range(n))), dtype=np.float64)[:, 0] if n else np.zeros(0)
        keyframes = np.asarray(vr.get_key_indices(), dtype=np.int64)
    except Exception as e:  # cut, damaged or unusual files: PyAV's demux pass decides
        _logger.debug('%s: decord cannot index it (%s); indexing with PyAV', path, _one_line(e))
        return None
    container = _open_container(path)  # kept open for the check's exact decode (one open instead of two)
    if not container.streams.video:
        container.close()
        return None
    stream = container.streams.video[0]
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    header, time_base = int(stream.frames or 0), stream.time_base or Fraction(1, 1)
    start = int(stream.start_time or 0)
    codec, fmt = stream.codec_context.name, container.format.name
    height, width = int(stream.height or 0), int(stream.width or 0)
    index = _decord_numbers(path, key, n, ts, keyframes, rate, header, time_base, start, codec, fmt, height, width)
    if index is None:
        container.close()
        return None
    _drop_handoff()
    _HANDOFF[key] = (vr, container)
    return index


def forget(disk: bool = False) -> None:
    """Forget every index, verdict and warning this process holds (the next read of a file starts over, as in a new
    process); with ``disk=True`` also delete the on-disk cache (:func:`index_cache_dir`), as on a new machine. For
    tests and benchmarks."""
    for d in (_INDEX_CACHE, _VERDICTS, _DECODABLE, _REFERENCE):
        d.clear()
    for s in (_WARNED, _NO_SEEK, _PYAV_INDEX):
        s.clear()
    _drop_handoff()
    root = index_cache_dir()
    if disk and root is not None:
        shutil.rmtree(root, ignore_errors=True)


def _drop_handoff() -> None:
    for _, container in _HANDOFF.values():
        container.close()
    _HANDOFF.clear()


def _decord_numbers(path: str, key: Tuple, n: int, ts: np.ndarray, keyframes: np.ndarray, rate, header: int,
                    time_base: Fraction, start: int, codec: str, fmt: str, height: int,
                    width: int) -> Optional[StreamIndex]:
    """decord's count, times and keyframes as a :class:`StreamIndex`, or ``None`` when they fail the checks."""
    if n < 1 or (header and header != n) or not np.all(np.isfinite(ts)) or np.abs(ts).max() > 1e7:
        return None  # no frames, a count other than the header's, sentinel times: PyAV looks at the packets
    pts = start + np.round((ts - ts[0]) / float(time_base)).astype(np.int64)
    arr, problem = _check_timestamps(pts.tolist(), time_base, float(rate) if rate else float('nan'))
    if arr is None or not np.array_equal(arr, pts):
        return None
    # decord's times are float32: the pts rebuilt from them are within a few units, far less than a frame apart
    tol = int(math.ceil(float(np.abs(ts).max()) * 2.0 ** -22 / float(time_base))) + 1
    if n > 1 and 4 * tol >= int(np.diff(pts).min()):
        return None
    times = _times_of(pts, time_base)  # as PyAV's index has them (not decord's float32 rounding)
    fps = float(rate) if rate else float('nan')
    if n > 1 and times[-1] > 0:
        ts_rate = (n - 1) / float(times[-1])
        if not (fps > 0 and math.isfinite(fps)) or abs(fps / ts_rate - 1) > 0.01:
            fps = ts_rate
    if not (fps > 0 and math.isfinite(fps)):
        return None
    keyframes = keyframes[(keyframes >= 0) & (keyframes < n)]
    return StreamIndex(path=path, codec=codec, container=fmt, height=height, width=width, num_frames=n,
                       header_frames=header, cut='', fps=fps, times=times, pts=pts, time_base=time_base,
                       keyframes=np.unique(keyframes), key=key, source='decord', pts_tolerance=tol)


# ---- the index cache on disk -------------------------------------------------------------------------------------
#: Bump when the stored fields change.
_DISK_VERSION = 3


def index_cache_dir() -> Optional[str]:
    """Where stream indexes and decord verdicts are kept between processes (DataLoader workers are new processes
    every epoch and every sweep cell): ``$ZOO_VIDEO_INDEX_CACHE``, else ``$XDG_CACHE_HOME/zoo/video-index`` (default
    ``~/.cache/zoo/video-index``); ``None`` when ``ZOO_VIDEO_INDEX_CACHE`` is ``off``. About 1 kB per video file
    (timestamps compressed); safe to delete at any time."""
    env = os.environ.get('ZOO_VIDEO_INDEX_CACHE')
    if env is not None:
        return None if env.strip().lower() in ('', 'off', '0', 'none') else env
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'zoo', 'video-index')


def _disk_file(key: Tuple) -> Optional[str]:
    root = index_cache_dir()
    if root is None:
        return None
    digest = hashlib.sha256(json.dumps([_DISK_VERSION, *key]).encode()).hexdigest()[:32]
    return os.path.join(root, digest[:2], digest + '.npz')


def _decord_version() -> str:
    import decord
    return str(getattr(decord, '__version__', '?'))


def _load_disk(key: Tuple) -> Optional[StreamIndex]:
    """The stored index of a file version (and its decord verdict, seek flag), or ``None``; a damaged entry is a
    miss."""
    f = _disk_file(key)
    if f is None or not os.path.isfile(f):
        return None
    try:
        with np.load(f, allow_pickle=False) as z:
            meta = json.loads(str(z['meta']))
            if meta.get('key') != list(key):
                return None
            time_base = Fraction(*meta['time_base'])
            pts = np.cumsum(z['pts_steps'], dtype=np.int64) if meta['has_pts'] else None
            times = _times_of(pts, time_base) if pts is not None else \
                np.arange(meta['num_frames'], dtype=np.float64) / meta['fps']
            index = StreamIndex(path=meta['path'], codec=meta['codec'], container=meta['container'],
                                height=meta['height'], width=meta['width'], num_frames=meta['num_frames'],
                                header_frames=meta['header_frames'], cut=meta['cut'], fps=meta['fps'],
                                times=times, pts=pts,
                                time_base=time_base, keyframes=z['keyframes'].astype(np.int64),
                                timestamp_problem=meta['timestamp_problem'], key=key,
                                source=meta.get('source', 'pyav'), pts_tolerance=int(meta.get('pts_tolerance', 0)))
    except Exception as e:  # another format, a cut write of an older version, ...: index the file again
        _logger.debug('video index cache entry %s unreadable (%s)', f, _one_line(e))
        return None
    if meta.get('verdict') and meta.get('decord') == _decord_version_or_none():
        _VERDICTS.setdefault(key, meta['verdict'])
    if meta.get('no_seek'):
        _NO_SEEK.add(key)
    return index


def _decord_version_or_none() -> Optional[str]:
    try:
        return _decord_version()
    except ImportError:
        return None


def _save_disk(index: StreamIndex) -> None:
    """Store ``index`` with the process's verdict and seek flag for its file (atomic; failures only logged)."""
    f = _disk_file(index.key)
    if f is None:
        return
    meta = dict(key=list(index.key), path=index.path, codec=index.codec, container=index.container,
                height=index.height, width=index.width, num_frames=index.num_frames,
                header_frames=index.header_frames, cut=index.cut, fps=index.fps,
                time_base=[index.time_base.numerator, index.time_base.denominator],
                timestamp_problem=index.timestamp_problem, has_pts=index.pts is not None, source=index.source,
                pts_tolerance=index.pts_tolerance,
                verdict=_VERDICTS.get(index.key), decord=_decord_version_or_none(),
                no_seek=index.key in _NO_SEEK)

    # the times follow from the pts (or are index / fps); pts as steps, which compress to a few bytes per file
    steps = _small(np.diff(index.pts, prepend=0)) if index.pts is not None else np.zeros(0, np.int32)

    def write(tmp: str) -> None:
        with open(tmp, 'wb') as fh:
            np.savez_compressed(fh, keyframes=_small(index.keyframes), pts_steps=steps,
                                meta=np.array(json.dumps(meta)))
    try:
        from .files import write_atomic
        os.makedirs(os.path.dirname(f), exist_ok=True)
        write_atomic(f, write)
    except Exception as e:  # a read-only home, a full disk: the cache is an optimisation only
        _logger.debug('video index cache %s not written (%s)', f, _one_line(e))


def _small(a: np.ndarray) -> np.ndarray:
    """``a`` as int32 where its values fit (half the bytes to compress), else int64."""
    return a.astype(np.int32) if len(a) == 0 or (a.min() >= -2 ** 31 and a.max() < 2 ** 31) else a.astype(np.int64)


def stream_index(path: str) -> StreamIndex:
    """The :class:`StreamIndex` of a file, built once per file version (real path, size, mtime) and kept in this
    process and on disk (:func:`index_cache_dir`).

    A file whose timestamps are unusable gets ``index / fps`` times, a warning (once per file) and a count in
    :data:`COUNTS` (``timestamps_replaced``).

    Raises:
        VideoReadError: ``missing``, ``undecodable`` (not a container FFmpeg reads, no video stream, no frame
            rate), ``zero_frames``, ``truncated`` (the header promises frames but none can be read).
    """
    if not os.path.isfile(path):
        raise VideoReadError(path, 'missing', 'no such file')
    key = _file_key(path)
    hit = _INDEX_CACHE.get(key)
    if hit is not None:
        _INDEX_CACHE.move_to_end(key)
        return hit
    index = _load_disk(key)
    if index is None:
        decord = _decord()
        state = _VERDICTS.get(key)
        if decord is not None and (state is None or state == 'exact') and key not in _PYAV_INDEX:
            index = _index_from_decord(decord, path, key)
        if index is None:
            index = _build_index(path, key)
        if decord is None or key in _VERDICTS:
            _save_disk(index)  # else stored once decord's verdict is known
    if index.timestamp_problem and (key, 'timestamps') not in _WARNED:
        COUNTS['timestamps_replaced'] += 1
        _warn_once(key, 'timestamps', '%s: %s; frame times are index / fps (%.4g fps) instead', path,
                   index.timestamp_problem, index.fps)
    _INDEX_CACHE[key] = index
    while len(_INDEX_CACHE) > _INDEX_CACHE_SIZE:
        _INDEX_CACHE.popitem(last=False)
    return index


# ---- the exact decoder (PyAV) -------------------------------------------------------------------------------------

def _to_rgb(frame) -> np.ndarray:
    """A decoded frame as uint8 RGB ``(H, W, 3)``, turned upright by the stream's display rotation (a display-matrix
    side datum, e.g. a phone video stored landscape and shown portrait): as players show it, and as decord returns
    it. PyAV without ``VideoFrame.rotation`` gives the frames as stored."""
    arr = frame.to_ndarray(format='rgb24')
    k = int(round(float(getattr(frame, 'rotation', 0) or 0) / 90.0)) % 4  # counter-clockwise quarter turns
    return np.ascontiguousarray(np.rot90(arr, k)) if k else arr


def _decode_in_order(path: str, index: StreamIndex, wanted: List[int]) -> np.ndarray:
    """Decode from the start: a frame is identified by its timestamp where the index has them, else the ``i``-th
    decoded frame is frame ``i``. Returns the frames of the sorted distinct ``wanted``, stacked."""
    pos_of = {i: k for k, i in enumerate(wanted)}
    last = wanted[-1]
    at = index.frame_at() if index.pts is not None else None
    out: Optional[np.ndarray] = None
    done = np.zeros(len(wanted), dtype=bool)
    count = 0
    with _open_container(path) as container:
        stream = container.streams.video[0]
        try:
            for pos, frame in enumerate(container.decode(stream)):
                count = pos + 1
                i = pos if at is None else at(frame.pts)
                k = pos_of.get(i)
                if k is not None:
                    rgb = _to_rgb(frame)
                    if out is None:
                        out = np.empty((len(wanted),) + rgb.shape, dtype=np.uint8)
                    out[k] = rgb
                    done[k] = True
                if (i is not None and i >= last) or done.all():
                    break
        except Exception as e:
            raise FramesNotDecodable(wanted[int(np.argmin(done))], f'decoding stopped after {count} frames: '
                                     f'{_one_line(e)}') from None
    if out is None or not done.all():
        raise FramesNotDecodable(wanted[int(np.argmin(done))], f'the stream ends after {count} decodable frames')
    return out


def _decode_by_pts(container, index: StreamIndex, wanted: List[int]) -> np.ndarray:
    """Seek to the keyframe before each needed range and decode forward, each frame identified by its pts; returns
    the frames of the sorted distinct ``wanted``, stacked.

    A seek that lands after the wanted frame is retried from up to 3 keyframes earlier; a seek that lands before
    frames already decoded turns further seeks off (decoding goes on forward).

    Raises:
        _Unreliable: frames without a known timestamp, out of order, skipped, or seeks that keep landing late.
        FramesNotDecodable: the stream ends or breaks before a wanted frame.
    """
    assert index.pts is not None
    at = index.frame_at()
    todo = list(wanted)
    out: Optional[np.ndarray] = None
    k_out = 0
    kf = index.keyframes if len(index.keyframes) else np.zeros(1, dtype=np.int64)
    back, last, skip_ahead = 0, -1, True
    stream = container.streams.video[0]
    while todo:
        first = todo[0]
        kpos = int(np.searchsorted(kf, first, side='right')) - 1 - back
        if kpos < 0:
            raise _Unreliable(f'seeking for frame {first} lands after it even from the first keyframe')
        container.seek(int(index.pts[kf[kpos]]), stream=stream, backward=True, any_frame=False)
        landed = None
        try:
            for frame in container.decode(stream):
                i = at(frame.pts)
                if i is None:
                    raise _Unreliable(f'a decoded frame has a timestamp ({frame.pts}) the index does not hold')
                if landed is None:
                    landed = i
                    if i > first:
                        break  # landed late: seek again from an earlier keyframe
                    if i <= last:
                        skip_ahead = False  # the seek went back before frames already decoded
                elif i <= last:
                    raise _Unreliable('decoded frames come out of presentation order')
                last = i
                if i == todo[0]:
                    rgb = _to_rgb(frame)
                    if out is None:
                        out = np.empty((len(wanted),) + rgb.shape, dtype=np.uint8)
                    out[k_out] = rgb
                    k_out += 1
                    todo.pop(0)
                    if not todo:
                        break
                elif i > todo[0]:
                    raise _Unreliable(f'frame {todo[0]} was not produced (the decoder went on to frame {i})')
                nxt = int(np.searchsorted(kf, i, side='right'))
                if skip_ahead and nxt < len(kf) and todo[0] >= kf[nxt] and todo[0] - i > 8:
                    break  # the next wanted frame is past the next keyframe: seek there instead
            else:
                if todo:
                    raise FramesNotDecodable(todo[0], f'the stream ends after frame {last}')
        except (_Unreliable, FramesNotDecodable):
            raise
        except Exception as e:  # av errors: damaged or cut data
            raise FramesNotDecodable(todo[0], _one_line(e)) from None
        if landed is not None and landed > first:
            back += 1
            if back > 3:
                raise _Unreliable(f'seeking for frame {first} landed on frame {landed}')
        else:
            back = 0
    assert out is not None
    return out


def decode_exact(path: str, index: StreamIndex, wanted: Sequence[int]) -> np.ndarray:
    """Decode frames ``wanted`` (display-order indices) with PyAV, exactly: by timestamp after a keyframe seek where
    the file has usable timestamps, else in order from the start.

    Returns:
        uint8 ``(U, H, W, 3)`` RGB frames of the sorted distinct wanted indices.

    Raises:
        FramesNotDecodable: a wanted frame does not decode (cut or damaged data).
        VideoReadError: the file cannot be opened.
    """
    want = sorted(set(int(i) for i in wanted))
    if not want:
        raise ValueError('no frame to decode')
    key = index.key or _file_key(path)
    if index.pts is not None and key not in _NO_SEEK:
        try:
            with _open_container(path) as container:
                return _decode_by_pts(container, index, want)
        except _Unreliable as e:
            _NO_SEEK.add(key)
            if index.key:
                _save_disk(index)
            _warn_once(key, 'seek', '%s: %s; decoding it in order from the start instead (exact, slower)', path, e)
    return _decode_in_order(path, index, want)


def count_decodable(path: str, index: StreamIndex) -> int:
    """How many leading frames (display order) decode: the whole stream is decoded once per file in this process,
    without converting pixels (only files found cut or damaged get here)."""
    key = index.key or _file_key(path)
    if key in _DECODABLE:
        return _DECODABLE[key]
    n = 0
    with _open_container(path) as container:
        stream = container.streams.video[0]
        try:
            for n, _ in enumerate(container.decode(stream), start=1):
                pass
        except Exception:
            pass
    _DECODABLE[key] = min(n, index.num_frames)
    return _DECODABLE[key]


def known_decodable(index: StreamIndex) -> Optional[int]:
    """The decodable frame count found earlier in this process by :func:`count_decodable`, else ``None``."""
    return _DECODABLE.get(index.key)


# ---- decord, verified once per file -------------------------------------------------------------------------------

def _decord():
    """decord, or ``None`` where it is not installed (no wheel for the platform) or ``ZOO_VIDEO_BACKEND=pyav``."""
    if os.environ.get('ZOO_VIDEO_BACKEND', '').lower() == 'pyav':
        return None
    try:
        import decord
    except ImportError:
        return None
    decord.logging.set_level(decord.logging.QUIET)  # FFmpeg's log lines
    return decord


def video_backend() -> str:
    """``'decord'`` where decord is installed (x86-64 Linux and Windows wheels) and ``ZOO_VIDEO_BACKEND`` is not
    ``pyav``, else ``'pyav'``. Both give the same frames (decord is checked per file; see the module docstring)."""
    return 'decord' if _decord() is not None else 'pyav'


def _is_decord_line(line: str) -> bool:
    return line.startswith('[') and ('.cc:' in line or 'decord' in line or 'src/video' in line)


@contextmanager
def _native_stderr_to_log() -> Iterator[None]:
    """Catch what native code writes to file descriptor 2 (decord's C++ logger) while the block runs: decord's lines
    are logged at debug level, anything else is written back to stderr."""
    with _STDERR_LOCK:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):
            yield
            return
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                tmp.seek(0)
                text = tmp.read().decode('utf-8', errors='replace')
                keep = []
                for line in text.splitlines(keepends=True):
                    if _is_decord_line(line):
                        _logger.debug('decord: %s', line.rstrip())
                    else:
                        keep.append(line)
                if keep:
                    os.write(2, ''.join(keep).encode())


def _check_frames(index: StreamIndex, wanted: Sequence[int], count: int = 3) -> List[int]:
    """Up to ``count`` keyframes after the first, spread over the file, where decord's seeks land: those before
    wanted frames first (decord decodes them anyway for this request: only their colour conversion is extra), then
    others of the file (the verdict serves every later request). decord's known wrong reads (HEVC open GOPs, MPEG-TS,
    MPEG-4 Part 2 in AVI) are wrong at the keyframe a seek lands on, but not at every keyframe of a file (HEVC: at
    the CRA keyframes with leading pictures, not at the IDR ones), hence several. ``[0]`` for a file of one GOP."""
    kf = [int(k) for k in index.keyframes if 0 < k < index.num_frames]
    if not kf:
        return [0]
    w = sorted(wanted)
    used = sorted({kf[p - 1] for p in np.searchsorted(kf, w, side='right') if p > 0})

    def spread(ks: List[int], m: int) -> List[int]:
        if len(ks) <= m:
            return ks
        return [ks[int(round(j * (len(ks) - 1) / (m - 1)))] for j in range(m)] if m > 1 else [ks[len(ks) // 2]]
    out = spread(used, count)
    if len(out) < count:
        out += spread([k for k in kf if k not in out], count - len(out))
    return sorted(out)


#: the most two decoders' RGB values of the same frame may differ by (grey levels, 0-255) and still count as equal.
#: Measured (``tests/test_video_input_fixes.py::test_pixel_tolerance_is_measured``): decord and PyAV give
#: identical RGB (difference 0) on 8-bit H.264 (4:2:0 and 4:4:4), HEVC, VP9 and MPEG-4 Part 2 files and on the
#: real clips of ``../shared/data/videos``; 2 leaves room for another FFmpeg build rounding its colour conversion
#: differently. On 10-bit files (H.264 High 10, HEVC Main 10) decord's frames differ by up to 78 levels.
PIXEL_TOLERANCE = 2


def _same_pixels(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal frames: no pixel differs by more than :data:`PIXEL_TOLERANCE` grey levels, over every other row (half
    the work). A maximum, not a mean: another frame differs only where its content moved (a small object is a small
    part of the mean), and a wrong conversion (decord on 10-bit video) can be off by 45 levels in some pixels with a
    mean below one."""
    if a.shape != b.shape:
        return False
    a, b = a[::2], b[::2]
    diff = np.maximum(a, b)
    diff -= np.minimum(a, b)
    return int(diff.max(initial=0)) <= PIXEL_TOLERANCE


def verdict(path: str) -> Optional[str]:
    """What this process found decord to be for ``path``: ``'exact'``, ``'inexact: <reason>'``, or ``None`` when
    the file was not checked yet (or decord is not used)."""
    try:
        return _VERDICTS.get(_file_key(path))
    except OSError:
        return None


def _set_verdict(index: StreamIndex, reason: str) -> None:
    """Record (and store with the index) decord's verdict on a file. An inexact verdict on decord's own index drops
    that index: the file is indexed again with PyAV (which stores the verdict)."""
    _VERDICTS[index.key] = f'inexact: {reason}' if reason else 'exact'
    _tell(index)
    if reason and index.source == 'decord':
        _INDEX_CACHE.pop(index.key, None)
        return
    _save_disk(index)


def _tell(index: StreamIndex) -> None:
    """Count the file's verdict and, for an inexact one, warn: once per file in this process."""
    state = _VERDICTS.get(index.key)
    if state is None or (index.key, 'decord') in _WARNED:
        return
    _WARNED.add((index.key, 'decord'))
    if state == 'exact':
        COUNTS['decord_verified'] += 1
        return
    COUNTS['decord_inexact'] += 1
    _logger.warning('%s: not read with decord, which returns frames other than those asked for in some files (%s; '
                    'codec %s in %s): read with PyAV instead (exact, slower)', index.path, state[len('inexact: '):],
                    index.codec, index.container)


def _decord_check(vr, index: StreamIndex) -> str:
    """Why decord's own index disagrees with the stream's ('' when it agrees): frame count and every frame time."""
    if len(vr) != index.num_frames:
        return f'decord counts {len(vr)} frames, the stream holds {index.num_frames}'
    ts = np.asarray(vr.get_frame_timestamp(list(range(len(vr)))), dtype=np.float64)[:, 0]
    ts = ts - ts[0]
    bad = np.flatnonzero(~(np.abs(ts - index.times) <= 0.5 / index.fps))
    if len(bad):
        return f'decord gives frame {int(bad[0])} the time {ts[bad[0]]:.6g} s, the stream {index.times[bad[0]]:.6g} s'
    return ''


def _decord_read(decord, path: str, index: StreamIndex, wanted: List[int]) -> Optional[np.ndarray]:
    """decord's frames of the sorted distinct ``wanted``, checked on the first read of the file (frame count and
    times against PyAV's index where decord did not make it, and the check frames against the exact decoder's);
    ``None`` when the file must be read exactly.

    Raises:
        IndexReplaced: the check failed on decord's own index, which is dropped (sample again on PyAV's).
    """
    state = _VERDICTS.get(index.key)
    if state is not None and state != 'exact':
        _tell(index)
        return None
    try:
        vr, container = _HANDOFF.pop(index.key, (None, None))
        if vr is None:
            with _native_stderr_to_log():
                vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        reason = _decord_check(vr, index) if state is None and index.source == 'pyav' else ''
        check: List[int] = []
        if state is None and not reason:  # the first read of the file: decode the check frames exactly
            check = _check_frames(index, wanted)
            reason = _reference_problem(path, index, check, container)
            ref = _REFERENCE.pop(index.key, {})
        elif container is not None:
            container.close()
        if reason:
            _set_verdict(index, reason)
            if index.source == 'decord':
                raise IndexReplaced(reason)
            return None
        want = sorted(set(wanted) | set(check)) if check else wanted
        with _native_stderr_to_log():
            arr = vr.get_batch(want).asnumpy()
        del vr
    except IndexReplaced:
        raise
    except Exception as e:  # decord cannot read these frames (cut data, odd widths ...): the exact path decides
        _logger.debug('%s: decord failed (%s); reading with PyAV', path, _one_line(e))
        return None
    if check:
        pos = {i: k for k, i in enumerate(want)}
        diff = [i for i in check if not _same_pixels(arr[pos[i]], ref[i])]
        if diff:
            _set_verdict(index, f'its frame {diff[0]} is another frame than the one decoded in order')
            if index.source == 'decord':
                raise IndexReplaced(_VERDICTS[index.key])
            return None
        arr = arr[[pos[i] for i in wanted]]
    if state is None:
        _set_verdict(index, '')
    return arr


def _decode_keyframes(container, index: StreamIndex, keyframes: Sequence[int]) -> List[np.ndarray]:
    """Each of the sorted ``keyframes`` decoded alone: a seek to it, its packet found by pts (packets before it
    skipped undecoded), decoded, and the decoder drained, so that one frame is decoded per keyframe whatever the
    codec's delay.

    Raises:
        _Unreliable: a packet whose pts the index does not hold, a keyframe packet not marked as one, not found
            after the seek, or decoded into a frame with another pts.
        FramesNotDecodable: its packet does not decode.
    """
    assert index.pts is not None
    at = index.frame_at()
    stream = container.streams.video[0]
    out = []
    for k in keyframes:
        container.seek(int(index.pts[k]), stream=stream, backward=True, any_frame=False)
        frames = None
        try:
            for seen, packet in enumerate(container.demux(stream)):
                if not packet.size:
                    continue
                i = at(packet.pts)
                if i is None:
                    raise _Unreliable(f'a packet has a timestamp ({packet.pts}) the index does not hold')
                if i == k:
                    if not packet.is_keyframe:
                        raise _Unreliable(f'frame {k} is not a keyframe in the packets')
                    frames = list(stream.decode(packet)) + list(stream.decode(None))
                    break
                if seen > 4 * (int(np.diff(index.keyframes).max()) if len(index.keyframes) > 1 else 1) + 64:
                    break
        except _Unreliable:
            raise
        except Exception as e:  # av errors: damaged data
            raise FramesNotDecodable(k, _one_line(e)) from None
        if frames is None:
            raise _Unreliable(f'the seek to keyframe {k} did not reach its packet')
        got = [f for f in frames if at(f.pts) == k]
        if not got:
            raise _Unreliable(f'keyframe {k} decoded into frames of other timestamps')
        out.append(_to_rgb(got[0]))
    return out


def _reference_problem(path: str, index: StreamIndex, check: List[int], container=None) -> str:
    """Decode the check frames exactly into ``_REFERENCE[index.key]`` (in ``container`` when the index left one open;
    it is closed); ``''``, or why they cannot be (then decord is not trusted with the file)."""
    try:
        try:  # on decord's index, its pts are rebuilt from decord's times: they must name PyAV's packets
            with container if container is not None else _open_container(path) as c:
                frames = _decode_keyframes(c, index, check)
        except _Unreliable:
            if index.source == 'decord':
                raise
            frames = decode_exact(path, index, check)  # PyAV's own index: the exact decoder finds its way
    except _Unreliable as e:
        if index.source == 'decord':  # decord's own index cannot be checked this way: PyAV indexes the file, then
            _PYAV_INDEX.add(index.key)  # the check is done again on that index (no verdict yet)
            _INDEX_CACHE.pop(index.key, None)
            raise IndexReplaced(str(e)) from None
        return f'its frame times do not name the stream\'s frames ({e})'
    except FramesNotDecodable as e:
        return f'its check frames {check} do not decode ({e})'
    _REFERENCE[index.key] = dict(zip(check, frames))
    return ''


def read_frames(path: str, index: StreamIndex, wanted: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    """The frames ``wanted`` (display-order indices, repeats allowed): decord where it is installed and verified for
    this file, else :func:`decode_exact`.

    Returns:
        ``(indices, frames)``: the sorted distinct wanted indices ``(U,)`` and their uint8 RGB frames
        ``(U, H, W, 3)``.

    Raises:
        FramesNotDecodable: a wanted frame does not decode.
        VideoReadError: the file cannot be opened.
    """
    want = sorted(set(int(i) for i in wanted))
    decord = _decord()
    if decord is not None:
        if not index.cut and index.timestamps_ok:
            frames = _decord_read(decord, path, index, want)
            if frames is not None:
                return np.asarray(want, dtype=np.int64), frames
        elif index.key not in _VERDICTS:
            _VERDICTS[index.key] = 'inexact: ' + (index.cut or index.timestamp_problem)
            _save_disk(index)
    return np.asarray(want, dtype=np.int64), decode_exact(path, index, want)
