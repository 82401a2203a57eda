"""Frame-accurate decoding and true timestamps on files synthesised with PyAV, in the codec / container combinations
where decord is known to go wrong (issue 20, items 1-3).

Every frame carries its own index in 16 x 16 px black / white blocks, so a test reads back from the pixels which frame
it got. Regressions (each fails on the code before issue 20): decord's seeks returned other frames than the requested
indices for x265 (MP4 and Matroska, B-frames and open GOPs), MPEG-4 Part 2 in AVI and H.264 in MPEG-TS; frame times of
an AVI without usable timestamps were decord's sentinel (about -3.7e17 s) or other frames' times; a raw H.264 stream
(no timestamps) was undecodable; seconds were converted with the average rate, so a window on a variable-frame-rate
clip returned frames past its end; ``on_truncated='clamp'`` failed on a cut MP4 that decord cannot open; decord's C++
log lines reached stderr.

Not reproduced here: decord's rare non-deterministic wrong frames on some HMDB51 AVIs (decord#195, about 1 read in
100 of one file) need those files; the once-per-file check cannot catch a fault that shows only now and then.
"""
import logging
import os
from fractions import Fraction

import numpy as np
import pytest
import torch

from zoo.datasets import video_streams
from zoo.datasets.video import FrameSampling, VideoReadError, probe_video, read_video

N = 120  # frames per synthetic clip


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch, tmp_path):
    """Each test starts with no verdict in memory or on disk."""
    monkeypatch.setenv('ZOO_VIDEO_INDEX_CACHE', str(tmp_path / 'index-cache'))
    video_streams.forget()


def pattern(n, seed=0):
    """uint8 (n, 64, 64, 3): noise (so the codec has motion to code) and frame t's index in 12 binary blocks."""
    f = np.random.default_rng(seed).integers(0, 60, (n, 64, 64, 3), dtype=np.uint8)
    for t in range(n):
        for b in range(12):
            r, c = divmod(b, 4)
            if (t >> b) & 1:
                f[t, r * 16:(r + 1) * 16, c * 16:(c + 1) * 16] = 230
    return f


def frame_ids(frames):
    """The index each frame carries in its blocks."""
    x = np.asarray(frames).astype(np.float32).mean(-1)
    return [sum(1 << b for b in range(12) if f[(b // 4) * 16 + 4:(b // 4) * 16 + 12,
                                             (b % 4) * 16 + 4:(b % 4) * 16 + 12].mean() > 140) for f in x]


def encode(path, codec, fmt=None, fps=25, options=None, pts=None, time_base=None, n=N):
    """Write ``pattern(n)`` with PyAV; ``pts`` (in ``time_base``) gives variable frame rates."""
    import av
    frames = pattern(n)
    with av.open(str(path), 'w', format=fmt) as out:
        stream = out.add_stream(codec, rate=Fraction(fps), options=options or {})
        stream.width, stream.height, stream.pix_fmt = 64, 64, 'yuv420p'
        if time_base is not None:
            stream.codec_context.time_base = time_base
        for i, f in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(f, format='rgb24')
            if pts is not None:
                frame.pts, frame.time_base = pts[i], time_base
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return str(path)


#: first 60 frames at 10 fps, the next 60 at 30 fps (ms time base): 6 s + 2 s
VFR_PTS = [100 * i for i in range(60)] + [6000 + round(i * 1000 / 30) for i in range(60)]
VFR_TIMES = np.array(VFR_PTS) / 1000.0

CASES = {
    'h264-bframes.mp4': dict(codec='libx264', options={'bf': '3', 'g': '30'}),
    'hevc-bframes.mp4': dict(codec='libx265', options={'x265-params': 'bframes=4:keyint=30:log-level=error'}),
    'hevc-bframes.mkv': dict(codec='libx265', options={'x265-params': 'bframes=4:keyint=30:log-level=error'}),
    'mpeg4-part2.avi': dict(codec='mpeg4', options={'bf': '2', 'g': '30', 'qscale': '3'}),
    'vp9.webm': dict(codec='libvpx-vp9', options={'g': '30', 'crf': '30', 'b': '0'}),
    'h264.ts': dict(codec='libx264', fmt='mpegts', options={'bf': '3', 'g': '30'}),
    'vfr.mp4': dict(codec='libx264', options={'bf': '3', 'g': '30'}, fps=20, pts=VFR_PTS,
                    time_base=Fraction(1, 1000)),
    'no-timestamps.h264': dict(codec='libx264', fmt='h264', options={'bf': '3', 'g': '30'}),
}


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp('codecs')
    return {name: encode(d / name, n=300 if name.startswith(('hevc', 'mpeg4', 'h264.ts')) else N, **kw)
            for name, kw in CASES.items()}


@pytest.fixture(params=['decord', 'pyav'])
def backend(request, monkeypatch):
    monkeypatch.setenv('ZOO_VIDEO_BACKEND', request.param)
    return request.param


@pytest.mark.parametrize('name', list(CASES))
def test_frames_are_the_requested_ones(files, name, backend):
    """The pixels are those of the reported indices, for every codec / container and both backends."""
    path = files[name]
    n = probe_video(path).num_frames
    for sampling, gen in ((FrameSampling('uniform', 16), None), (FrameSampling('stride', 12, stride=5), None),
                          (FrameSampling('uniform', 8, random=True), np.random.default_rng(1))):
        clip = read_video(path, sampling, generator=gen)
        assert frame_ids(clip.frames.numpy()) == clip.indices.tolist(), (name, backend, clip.indices.tolist())
        assert int(clip.indices.max()) < n


def test_backends_give_the_same_frames(files, monkeypatch):
    for name, path in files.items():
        got = []
        for backend in ('decord', 'pyav'):
            monkeypatch.setenv('ZOO_VIDEO_BACKEND', backend)
            got.append(read_video(path, FrameSampling('uniform', 10), size=32))
        a, b = got
        assert torch.equal(a.indices, b.indices) and torch.equal(a.timestamps, b.timestamps), name
        assert torch.equal(a.frames, b.frames), name


def test_a_file_decord_reads_wrong_is_named_once(files, caplog, monkeypatch):
    monkeypatch.setenv('ZOO_VIDEO_BACKEND', 'decord')
    path = files['hevc-bframes.mp4']
    with caplog.at_level(logging.WARNING, logger='zoo.datasets'):
        for k in (8, 9, 10):
            read_video(path, FrameSampling('uniform', k))
    lines = [r.getMessage() for r in caplog.records if 'decord' in r.getMessage()]
    assert len(lines) == 1 and path in lines[0] and 'PyAV' in lines[0] and 'hevc' in lines[0]
    assert video_streams.verdict(path).startswith('inexact')
    assert video_streams.verdict(files['h264-bframes.mp4']) in (None, 'exact')
    read_video(files['h264-bframes.mp4'], FrameSampling('uniform', 8))
    assert video_streams.verdict(files['h264-bframes.mp4']) == 'exact'


def test_the_verdict_is_kept_on_disk(files, monkeypatch, tmp_path):
    """A new process (DataLoader workers are new processes every epoch) reuses the index and the verdict."""
    monkeypatch.setenv('ZOO_VIDEO_BACKEND', 'decord')
    path = files['hevc-bframes.mkv']
    read_video(path, FrameSampling('uniform', 8))
    video_streams._INDEX_CACHE.clear()
    video_streams._VERDICTS.clear()
    built = []
    monkeypatch.setattr(video_streams, '_build_index', lambda *a, **k: built.append(a) or None)
    clip = read_video(path, FrameSampling('uniform', 8))
    assert not built and video_streams.verdict(path).startswith('inexact')
    assert frame_ids(clip.frames.numpy()) == clip.indices.tolist()
    assert list((tmp_path / 'index-cache').rglob('*.npz'))


def test_timestamps_are_times(files, backend, caplog):
    """AVI without usable decord timestamps: the stream's times (decord gave about -3.7e17 s or other frames'
    times); a stream without timestamps: index / fps, with one warning and a count."""
    avi = read_video(files['mpeg4-part2.avi'], FrameSampling('stride', 8))
    assert torch.allclose(avi.timestamps, avi.indices.double() / 25, atol=1e-6) and avi.timestamps_ok
    before = video_streams.COUNTS['timestamps_replaced']
    with caplog.at_level(logging.WARNING, logger='zoo.datasets'):
        raw = read_video(files['no-timestamps.h264'], FrameSampling('uniform', 8))
        read_video(files['no-timestamps.h264'], FrameSampling('uniform', 6))
    assert not raw.timestamps_ok and torch.allclose(raw.timestamps, raw.indices.double() / raw.fps)
    assert video_streams.COUNTS['timestamps_replaced'] == before + 1
    assert sum('presentation timestamp' in r.getMessage() for r in caplog.records) == 1
    assert not probe_video(files['no-timestamps.h264']).timestamps_ok


def test_sentinel_timestamps_are_refused():
    """Timestamps that repeat, are missing or span far more (or less) time than the frame rate allows are replaced."""
    tb = Fraction(1, 1000)
    assert video_streams._check_timestamps([0, 40, 80], tb, 25.0)[1] == ''
    assert 'no presentation timestamp' in video_streams._check_timestamps([0, None, 80], tb, 25.0)[1]
    assert 'repeat' in video_streams._check_timestamps([0, 40, 40], tb, 25.0)[1]
    sentinel = -(2 ** 63) + 1  # AV_NOPTS_VALUE-like garbage next to real values
    assert 'span' in video_streams._check_timestamps([sentinel, 40, 80], tb, 25.0)[1]


def test_variable_frame_rate_windows_and_fps(files, backend):
    """Seconds map through the real timestamps: a [0, 1] s window ends at 1 s (the average rate put it at 1.7 s)."""
    path = files['vfr.mp4']
    clip = read_video(path, FrameSampling('uniform', 8), start=0.0, end=1.0)
    assert float(clip.timestamps.max()) <= 1.0 + 1e-9 and int(clip.indices.max()) <= 10
    assert frame_ids(clip.frames.numpy()) == clip.indices.tolist()
    assert np.allclose(clip.timestamps.numpy(), VFR_TIMES[clip.indices.numpy()])
    late = read_video(path, FrameSampling('uniform', 4), start=6.5, end=7.5)
    assert float(late.timestamps.min()) >= 6.5 - 1 / 60 and float(late.timestamps.max()) <= 7.5 + 1 / 60
    every = read_video(path, FrameSampling('fps', None, fps=2.0))  # one frame every 0.5 s over 8 s
    gaps = np.diff(every.timestamps.numpy())
    assert len(every.indices) == 16 and gaps.max() - gaps.min() <= 0.1 + 1e-9, gaps


def _cut(src, dst, fraction):
    data = open(src, 'rb').read()
    with open(dst, 'wb') as f:
        f.write(data[:int(len(data) * fraction)])
    return str(dst)


def test_clamp_reads_the_decodable_prefix_of_a_cut_download(tmp_path, backend):
    """A faststart MP4 cut in half: its header promises 300 frames, decord cannot open it, PyAV decodes ~140."""
    import av
    full = tmp_path / 'full.mp4'
    with av.open(str(full), 'w', format='mp4', options={'movflags': 'faststart'}) as out:
        stream = out.add_stream('libx264', rate=25, options={'bf': '3', 'g': '30'})
        stream.width, stream.height, stream.pix_fmt = 64, 64, 'yuv420p'
        for f in pattern(300):
            for packet in stream.encode(av.VideoFrame.from_ndarray(f, format='rgb24')):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    cut = _cut(full, tmp_path / 'cut.mp4', 0.5)
    with pytest.raises(VideoReadError) as e:
        read_video(cut, FrameSampling('uniform', 8))
    assert e.value.reason == 'truncated' and '300' in e.value.detail and 'clamp' in e.value.detail
    clip = read_video(cut, FrameSampling('uniform', 8), on_truncated='clamp')
    assert 100 < clip.decodable_frames < 160 and int(clip.indices.max()) < clip.decodable_frames
    assert frame_ids(clip.frames.numpy()) == clip.indices.tolist()
    every = read_video(cut, FrameSampling('stride', 1000), on_truncated='clamp')  # all frames that decode
    assert frame_ids(every.frames.numpy())[:clip.decodable_frames] == list(range(clip.decodable_frames))
    with pytest.raises(VideoReadError) as e:
        probe_video(cut)
    assert e.value.reason == 'truncated'


def test_a_file_cut_before_its_index_is_one_clear_error_without_native_log_lines(tmp_path, capfd, backend):
    """An MP4 cut before its moov atom: decord printed its C++ "ERROR opening" line to stderr."""
    src = encode(tmp_path / 'a.mp4', 'libx264', n=60)
    cut = _cut(src, tmp_path / 'cut.mp4', 0.5)
    with pytest.raises(VideoReadError) as e:
        read_video(cut, FrameSampling('uniform', 4))
    assert e.value.reason == 'undecodable' and 'moov' in e.value.detail and '\n' not in str(e.value)
    assert '.cc:' not in capfd.readouterr().err


def test_decord_lines_are_logged_not_printed(capfd, caplog):
    """What native code writes to fd 2 inside the guard goes to the log (decord's lines) or back to stderr."""
    with caplog.at_level(logging.DEBUG, logger='zoo.datasets'):
        with video_streams._native_stderr_to_log():
            os.write(2, b'[12:00:00] /github/workspace/src/video/video_reader.cc:83: ERROR opening: x.mp4\n')
            os.write(2, b'something else\n')
    err = capfd.readouterr().err
    assert '.cc:83' not in err and 'something else' in err
    assert any('ERROR opening' in r.getMessage() for r in caplog.records)


def test_repeated_frames_are_decoded_once(files, monkeypatch):
    """More frames than the clip holds repeat frames; each distinct frame is decoded and resized once."""
    from zoo.datasets import video as video_mod
    seen = []
    real = video_mod._decode
    monkeypatch.setattr(video_mod, '_decode', lambda p, index, wanted: seen.append(len(wanted)) or
                        real(p, index, wanted))
    clip = read_video(files['vp9.webm'], FrameSampling('uniform', 512), size=32)
    assert clip.frames.shape == (512, 32, 32, 3) and seen == [N]
    assert frame_ids(torch.nn.functional.interpolate(clip.frames.permute(0, 3, 1, 2).float(), size=64)
                     .permute(0, 2, 3, 1).numpy())[::64] == clip.indices.tolist()[::64]


def test_a_read_larger_than_memory_is_refused_before_decoding(files, monkeypatch):
    from zoo.datasets import video as video_mod
    monkeypatch.setattr(video_mod, 'available_memory', lambda: 10 * 2 ** 20)
    decoded = []
    monkeypatch.setattr(video_mod, '_decode', lambda *a: decoded.append(a))
    with pytest.raises(video_mod.VideoMemoryError) as e:
        read_video(files['vp9.webm'], FrameSampling('uniform', 100000))
    assert 'GiB' in str(e.value) and 'fewer frames' in str(e.value) and not decoded



@pytest.mark.parametrize('name', ['hevc-bframes.mp4', 'hevc-bframes.mkv'])
def test_decord_is_checked_at_several_keyframes(files, name, monkeypatch):
    """decord reads the x265 files right at some keyframes (the IDR ones) and wrong at the others: a check at one
    keyframe, the one the request happened to pass, trusted decord with the file when the request stayed near a good
    keyframe, and later requests got wrong frames. Now a first read inside the good first GOPs still finds it out."""
    monkeypatch.setenv('ZOO_VIDEO_BACKEND', 'decord')
    path = files[name]
    index = video_streams.stream_index(path)
    good = int(index.keyframes[1])  # decord lands right there (an IDR frame of x265's default GOP structure)
    clip = read_video(path, FrameSampling('uniform', 3), start=index.times[good], end=index.times[good + 3])
    assert frame_ids(clip.frames.numpy()) == clip.indices.tolist()
    assert video_streams.verdict(path).startswith('inexact')
    later = read_video(path, FrameSampling('uniform', 16))
    assert frame_ids(later.frames.numpy()) == later.indices.tolist()


def test_a_forked_worker_reads_a_file_its_parent_indexed(files, monkeypatch):
    """Regression: the parent keeps decord's reader of a file it just indexed for the read that follows; a DataLoader
    worker forked in between (eval-frames indexes its clips before the workers start) used that reader, whose decoder
    threads did not fork, and hung in a futex. The child now leaves it alone and reads the right frames."""
    import signal
    monkeypatch.setenv('ZOO_VIDEO_BACKEND', 'decord')
    path = files['h264-bframes.mp4']
    video_streams.stream_index(path)
    assert video_streams._HANDOFF  # what the child inherits
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only with the right frames, killed by the alarm if it hangs
        code = 1
        try:
            signal.alarm(30)
            clip = read_video(path, FrameSampling('uniform', 8))
            code = 0 if frame_ids(clip.frames.numpy()) == clip.indices.tolist() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f'child status {status} (14: hung)'
