"""What a video file holds and how its frames are decoded exactly: the stream index (PyAV, no decoding), true
timestamps, the exact PyAV decoder, and decord's fast reads, verified once per file.

Why: decord's seeking is known to return frames other than the ones asked for in some codec / container
combinations (decord issues #54, #195, #325, #365: HEVC with open GOPs near keyframes, MPEG-4 Part 2 in AVI, H.264 in
MPEG-TS, and more), while it reports the requested indices; it reports a sentinel of about -3.7e17 s as the time of
frames without timestamps; and it loops forever on some files whose header over-reports the frame count (#373).

What this module does about it:

* :func:`stream_index` demuxes the video stream once (packets only, no decoding; a few ms for a 10 s clip) and keeps,
  per file: the number of frames (packets with data), the header's count, whether the file was cut short, the
  presentation timestamps in display order, the keyframes and the codec. Frame ``i`` is the ``i``-th frame in
  presentation order.
* Timestamps are checked (present, strictly increasing, a span that agrees with the frame rate within a factor of
  10); unusable ones are replaced by ``index / fps``, logged once per file and counted in :data:`COUNTS`.
* :func:`decode_exact` decodes with PyAV: it seeks to the keyframe before each needed range and identifies every
  decoded frame by its timestamp (exact by construction), or, in a file without usable timestamps, decodes in order
  from the start (the ``i``-th decoded frame is frame ``i``).
* :func:`read_frames` uses decord where it is installed (``ZOO_VIDEO_BACKEND=pyav`` turns it off), but trusts it
  with a file only after a check, done once per file (real path, size, mtime) and remembered for the process: the
  frame count and every frame time decord reports must equal the index's, and the frames decord returns at a
  keyframe and the two frames after it (read in the same batch as the request, so they cost decord nothing) must
  equal the exact decoder's. A file that fails the check is read with :func:`decode_exact` from then on, with one
  warning naming the file and the reason. decord's own log lines (C++, written to file descriptor 2) are caught and
  logged at debug level instead of leaking into the output.

Both backends give the same frames for the same request; the check costs one PyAV seek and about three decoded
frames per file (see ``docs/video_input.md`` for the measured overhead).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
import tempfile
import threading
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

_logger = logging.getLogger('zoo.datasets')

__all__ = ['VideoReadError', 'StreamIndex', 'stream_index', 'decode_exact', 'read_frames', 'count_decodable',
           'known_decodable', 'index_cache_dir',
           'video_backend', 'verdict', 'COUNTS', 'FramesNotDecodable']

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
_REFERENCE: Dict[Tuple, object] = {}  # file -> {check frame: exact pixels}, or why there are none
_STDERR_LOCK = threading.Lock()


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

    @property
    def timestamps_ok(self) -> bool:
        """True when ``times`` are the stream's own presentation times."""
        return not self.timestamp_problem

    @property
    def duration(self) -> float:
        """Seconds from the first frame to the end of the last (one average frame period after its start)."""
        return float(self.times[-1]) + 1.0 / self.fps


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


def _build_index(path: str, key: Tuple, reference: bool) -> StreamIndex:
    """Demux the first video stream; with ``reference``, also decode the check frames of decord's verification
    (:func:`_check_frames`) in the same container and keep them in ``_REFERENCE``."""
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
            times = (arr - arr[0]).astype(np.float64) * float(time_base)
            keyframes = np.unique(np.searchsorted(arr, np.asarray(pts, dtype=np.int64)[np.asarray(keys, bool)]))
        else:
            times = np.arange(n, dtype=np.float64) / fps
            keyframes = np.zeros(0, dtype=np.int64)
        index = StreamIndex(path=path, codec=stream.codec_context.name, container=container.format.name,
                            height=int(stream.height or 0), width=int(stream.width or 0), num_frames=n,
                            header_frames=header, cut=cut, fps=float(fps), times=times, pts=arr,
                            time_base=time_base, keyframes=keyframes.astype(np.int64), timestamp_problem=problem,
                            key=key)
        if reference and not cut and arr is not None:
            check = _check_frames(index)
            try:
                _REFERENCE[key] = dict(zip(check, _decode_by_pts(container, index, check)))
            except (_Unreliable, FramesNotDecodable) as e:
                _REFERENCE[key] = f'its check frames {check} do not decode after a seek ({e})'
            while len(_REFERENCE) > 64:  # files indexed but not read yet: their check is redone at their read
                _REFERENCE.pop(next(iter(_REFERENCE)))
    return index


# ---- the index cache on disk -------------------------------------------------------------------------------------
#: Bump when the stored fields change.
_DISK_VERSION = 1


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
            index = StreamIndex(path=meta['path'], codec=meta['codec'], container=meta['container'],
                                height=meta['height'], width=meta['width'], num_frames=meta['num_frames'],
                                header_frames=meta['header_frames'], cut=meta['cut'], fps=meta['fps'],
                                times=z['times'].copy(), pts=z['pts'].copy() if meta['has_pts'] else None,
                                time_base=Fraction(*meta['time_base']), keyframes=z['keyframes'].copy(),
                                timestamp_problem=meta['timestamp_problem'], key=key)
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
                timestamp_problem=index.timestamp_problem, has_pts=index.pts is not None,
                verdict=_VERDICTS.get(index.key), decord=_decord_version_or_none(),
                no_seek=index.key in _NO_SEEK)

    def write(tmp: str) -> None:
        with open(tmp, 'wb') as fh:
            np.savez_compressed(fh, times=index.times, keyframes=index.keyframes,
                                pts=index.pts if index.pts is not None else np.zeros(0, np.int64),
                                meta=np.array(json.dumps(meta)))
    try:
        from .files import write_atomic
        os.makedirs(os.path.dirname(f), exist_ok=True)
        write_atomic(f, write)
    except Exception as e:  # a read-only home, a full disk: the cache is an optimisation only
        _logger.debug('video index cache %s not written (%s)', f, _one_line(e))


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
        use_decord = _decord() is not None
        index = _build_index(path, key, reference=key not in _VERDICTS and use_decord)
        if not use_decord or key in _VERDICTS:
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
    return frame.to_ndarray(format='rgb24')


def _decode_in_order(path: str, index: StreamIndex, wanted: List[int]) -> np.ndarray:
    """Decode from the start: a frame is identified by its timestamp where the index has them, else the ``i``-th
    decoded frame is frame ``i``. Returns the frames of the sorted distinct ``wanted``, stacked."""
    pos_of = {i: k for k, i in enumerate(wanted)}
    last = wanted[-1]
    at = {int(p): i for i, p in enumerate(index.pts)} if index.pts is not None else None
    out: Optional[np.ndarray] = None
    done = np.zeros(len(wanted), dtype=bool)
    count = 0
    with _open_container(path) as container:
        stream = container.streams.video[0]
        try:
            for pos, frame in enumerate(container.decode(stream)):
                count = pos + 1
                i = pos if at is None else at.get(-1 if frame.pts is None else int(frame.pts), -1)
                k = pos_of.get(i)
                if k is not None:
                    rgb = _to_rgb(frame)
                    if out is None:
                        out = np.empty((len(wanted),) + rgb.shape, dtype=np.uint8)
                    out[k] = rgb
                    done[k] = True
                if i >= last or done.all():
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
    at = {int(p): i for i, p in enumerate(index.pts)}
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
                if frame.pts is None or int(frame.pts) not in at:
                    raise _Unreliable(f'a decoded frame has a timestamp ({frame.pts}) the index does not hold')
                i = at[int(frame.pts)]
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


def _check_frames(index: StreamIndex) -> List[int]:
    """The keyframe nearest the middle of the file (the first, in a file with one) and the two frames after it: a
    seek there shows whether decord lands on the right frame, and starting at a keyframe costs both decoders about
    three frames."""
    n, kf = index.num_frames, index.keyframes
    later = [int(k) for k in kf if k > 0]
    start = min(later, key=lambda k: abs(k - n // 2)) if later else 0
    return sorted({min(n - 1, start + d) for d in range(3)})


def _same_pixels(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal frames (decord's and PyAV's FFmpeg builds may round the colour conversion differently: mean absolute
    difference below 1 grey level)."""
    return a.shape == b.shape and float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean()) < 1.0


def verdict(path: str) -> Optional[str]:
    """What this process found decord to be for ``path``: ``'exact'``, ``'inexact: <reason>'``, or ``None`` when
    the file was not checked yet (or decord is not used)."""
    try:
        return _VERDICTS.get(_file_key(path))
    except OSError:
        return None


def _set_verdict(index: StreamIndex, reason: str) -> None:
    _REFERENCE.pop(index.key, None)
    _VERDICTS[index.key] = f'inexact: {reason}' if reason else 'exact'
    _save_disk(index)
    _tell(index)


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
    """decord's frames of the sorted distinct ``wanted``, checked on the first read of the file (frame count,
    frame times, and the check frames against the exact decoder's); ``None`` when the file must be read exactly."""
    state = _VERDICTS.get(index.key)
    if state is not None and state != 'exact':
        _tell(index)
        return None
    ref = _REFERENCE.get(index.key) if state is None else None
    if state is None and ref is None:  # indexed before decord was in use: decode the reference now
        check = _check_frames(index)
        try:
            ref = dict(zip(check, decode_exact(path, index, check)))
        except FramesNotDecodable as e:
            ref = f'its check frames {check} do not decode ({e})'
    reason = ref if isinstance(ref, str) else ''
    if reason:
        _set_verdict(index, reason)
        return None
    check = sorted(ref) if ref else []
    want = sorted(set(wanted) | set(check)) if check else wanted
    try:
        with _native_stderr_to_log():
            vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
            if state is None:
                reason = _decord_check(vr, index)
            if not reason:
                arr = vr.get_batch(want).asnumpy()
            del vr
    except Exception as e:  # decord cannot read these frames (cut data, odd widths ...): the exact path decides
        _logger.debug('%s: decord failed (%s); reading with PyAV', path, _one_line(e))
        return None
    if not reason and ref:
        pos = {i: k for k, i in enumerate(want)}
        diff = [i for i in check if not _same_pixels(arr[pos[i]], ref[i])]
        if diff:
            reason = f'its frame {diff[0]} is another frame than the one decoded in order'
    if state is None or reason:
        _set_verdict(index, reason)
    if reason:
        return None
    if check:
        pos = {i: k for k, i in enumerate(want)}
        arr = arr[[pos[i] for i in wanted]]
    return arr


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
