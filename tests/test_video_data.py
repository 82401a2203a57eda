"""Video reading (decord), the video-folder dataset, the frame cache and the synthetic video generators."""
import json
import logging
import os

import numpy as np
import pytest
import torch

from zoo.datasets import video as video_mod
from zoo.datasets._synth import write_mp4
from zoo.datasets.video import FrameCache, FrameSampling, VideoReadError, frames_to_clip, probe_video, read_video
from zoo.datasets.video_folder import BadVideo, SafeVideoFolder, collate_video_skip_bad, count_bad


def _pattern(n, size=32):
    """Frame t: all pixels = 8 * t in the green channel (so a frame's index can be read back from its pixels)."""
    f = np.zeros((n, size, size, 3), dtype=np.uint8)
    f[..., 1] = (np.arange(n) * 8).astype(np.uint8)[:, None, None]
    f[..., 0] = 60
    return f


def _noise(n, size=32, seed=0):
    return np.random.default_rng(seed).integers(0, 255, (n, size, size, 3), dtype=np.uint8)


def make_truncated(path, n=12):
    """A faststart MP4 whose last ~200 bytes are cut: decord opens it, reports n frames, the last ones fail."""
    write_mp4(path, _noise(n), fps=8, faststart=True)
    data = open(path, 'rb').read()
    with open(path, 'wb') as f:
        f.write(data[:-200])


@pytest.fixture(scope='module')
def clip(tmp_path_factory):
    p = str(tmp_path_factory.mktemp('v') / 'pattern.mp4')
    write_mp4(p, _pattern(24), fps=8, crf=0)
    return p


# ---- sampling rules -------------------------------------------------------------------------------------------

def test_uniform_is_mvbench_midpoints():
    # MVBench get_index: seg = (99 - 0) / 8, idx = int(seg / 2 + round(seg * k))
    assert FrameSampling('uniform', 8).indices(100, 10).tolist() == [6, 18, 31, 43, 56, 68, 80, 93]
    # window [2 s, 5 s] at 10 fps: frames 20..50, seg = 7.5
    assert FrameSampling('uniform', 4).indices(100, 10, start=2, end=5).tolist() == [23, 31, 38, 45]


def test_stride_fps_and_random_rules():
    assert FrameSampling('stride', 4, stride=3).indices(100, 10).tolist() == [45, 48, 51, 54]  # centred
    assert FrameSampling('stride', 4, stride=3).indices(5, 10).tolist() == [0, 3, 4, 4]  # clamped to the end
    assert FrameSampling('fps', None, fps=1).indices(100, 10).tolist() == [5, 15, 25, 35, 45, 55, 65, 75, 85, 95]
    assert FrameSampling('fps', 4, fps=1).indices(100, 10).tolist() == [12, 37, 62, 87]  # capped: spread uniformly
    s = FrameSampling('uniform', 4, random=True)
    a = s.indices(100, 10, generator=np.random.default_rng(3))
    assert a.tolist() == s.indices(100, 10, generator=np.random.default_rng(3)).tolist()
    assert all(25 * k <= i < 25 * (k + 1) for k, i in enumerate(a))  # one frame inside each segment
    draws = {tuple(s.indices(100, 10, generator=np.random.default_rng(k))) for k in range(5)}
    assert len(draws) > 1
    r = FrameSampling('stride', 4, stride=2, random=True).indices(40, 10, start=1, end=2,
                                                                   generator=np.random.default_rng(0))
    assert 10 <= r[0] and r[-1] <= 20 and np.all(np.diff(r) == 2)


@pytest.mark.parametrize('kwargs', [dict(mode='bogus'), dict(num_frames=0), dict(mode='fps', fps=None),
                                    dict(mode='fps', fps=-1.0), dict(mode='stride', stride=0)])
def test_bad_sampling_is_a_value_error(kwargs):
    with pytest.raises(ValueError):
        FrameSampling(**kwargs)


def test_window_outside_video_is_bad_window(clip):
    with pytest.raises(VideoReadError) as e:
        read_video(clip, FrameSampling('uniform', 4), start=100, end=200)
    assert e.value.reason == 'bad_window'


# ---- reading ---------------------------------------------------------------------------------------------------

@pytest.fixture(params=['decord', 'pyav'])
def backend(request, monkeypatch):
    """Each reader: decord (where it is installed) and the PyAV fallback used where decord has no wheel."""
    monkeypatch.setenv('ZOO_VIDEO_BACKEND', request.param)
    assert video_mod.video_backend() == request.param, 'decord is a core dependency on x86-64 Linux'
    return request.param


def test_read_returns_frames_indices_timestamps(clip, backend):
    c = read_video(clip, FrameSampling('uniform', 4))
    assert c.frames.dtype == torch.uint8 and c.frames.shape == (4, 32, 32, 3)
    assert c.indices.tolist() == FrameSampling('uniform', 4).indices(24, 8).tolist()
    assert torch.allclose(c.timestamps, c.indices.double() / 8)  # 8 fps file
    green = c.frames[..., 1].float().mean((1, 2))
    assert torch.allclose(green, c.indices.float() * 8, atol=3)  # the frames really are those indices
    w = read_video(clip, FrameSampling('uniform', 4), start=1.0, end=2.0, size=(16, 24))
    assert w.frames.shape == (4, 16, 24, 3) and 8 <= int(w.indices.min()) and int(w.indices.max()) <= 16
    assert float(w.timestamps.min()) >= 1.0 and float(w.timestamps.max()) <= 2.0
    x = frames_to_clip(read_video(clip, FrameSampling('uniform', 3), size=16).frames, (0.5,) * 3, (0.25,) * 3)
    assert x.shape == (3, 3, 16, 16) and x.dtype == torch.float32
    assert torch.allclose(x[0], torch.full_like(x[0], (60 / 255 - 0.5) / 0.25), atol=0.1)
    info = probe_video(clip)
    assert (info.num_frames, info.fps, info.height, info.width) == (24, 8.0, 32, 32)


def test_bad_files_raise_one_error_type(tmp_path, backend):
    with pytest.raises(VideoReadError) as e:
        read_video(str(tmp_path / 'nope.mp4'), FrameSampling())
    assert e.value.reason == 'missing'
    junk = tmp_path / 'junk.mp4'
    junk.write_bytes(np.random.default_rng(0).bytes(4000))
    with pytest.raises(VideoReadError) as e:
        read_video(str(junk), FrameSampling())
    assert e.value.reason == 'undecodable' and 'junk.mp4' in str(e.value)
    cut = str(tmp_path / 'cut.mp4')
    make_truncated(cut)
    with pytest.raises(VideoReadError) as e:
        read_video(cut, FrameSampling('stride', 12))  # reaches the last frames, which do not decode
    assert e.value.reason == 'truncated'
    c = read_video(cut, FrameSampling('stride', 12), on_truncated='clamp')
    assert c.num_frames == 12 and c.decodable_frames is not None and 0 < c.decodable_frames < 12
    assert int(c.indices.max()) < c.decodable_frames and c.frames.shape[0] == 12
    with pytest.raises(VideoReadError) as e:
        probe_video(cut)
    assert e.value.reason == 'truncated'


def test_zero_frame_video(tmp_path, monkeypatch):
    """A container with a video stream but no packet is ``zero_frames`` (a fake container: FFmpeg writes none)."""
    import av

    class Stream:
        average_rate = guessed_rate = base_rate = 25
        time_base, frames, height, width = None, 0, 32, 32
        codec_context = type('C', (), {'name': 'h264'})

    class Empty:
        streams = type('S', (), {'video': [Stream()]})
        format = type('F', (), {'name': 'mp4'})

        def demux(self, stream):
            return iter(())

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False
    p = tmp_path / 'empty.mp4'
    p.write_bytes(b'\0')
    monkeypatch.setattr(av, 'open', lambda path, *a, **kw: Empty())
    with pytest.raises(VideoReadError) as e:
        read_video(str(p), FrameSampling())
    assert e.value.reason == 'zero_frames'


def test_cache_decodes_once(clip, tmp_path, monkeypatch):
    opened = []
    real = video_mod._decode
    monkeypatch.setattr(video_mod, '_decode', lambda p, *a: opened.append(p) or real(p, *a))
    cache = FrameCache(str(tmp_path / 'cache'))
    s = FrameSampling('uniform', 6)
    a = read_video(clip, s, size=16, cache=cache)
    for _ in range(3):
        b = read_video(clip, s, size=16, cache=cache)
    assert len(opened) == 1 and cache.hits == 3
    assert torch.equal(a.frames, b.frames) and torch.equal(a.indices, b.indices)
    assert torch.equal(a.timestamps, b.timestamps)
    read_video(clip, s, size=24, cache=cache)                       # another size: decoded
    read_video(clip, FrameSampling('uniform', 5), size=16, cache=cache)  # another sampling: decoded
    read_video(clip, s, size=16, start=0.5, cache=cache)             # another window: decoded
    assert len(opened) == 4
    read_video(clip, FrameSampling('uniform', 6, random=True), size=16, cache=cache)
    read_video(clip, FrameSampling('uniform', 6, random=True), size=16, cache=cache)
    assert len(opened) == 6  # random sampling is never cached
    st = os.stat(clip)
    os.utime(clip, ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))  # file changed: decoded again
    read_video(clip, s, size=16, cache=cache)
    assert len(opened) == 7
    for f in (tmp_path / 'cache').rglob('*.npz'):  # damaged entries are misses, not crashes
        f.write_bytes(b'garbage')
    c = read_video(clip, s, size=16, cache=cache)
    assert len(opened) == 8 and torch.equal(c.frames, a.frames)


def _rss_mb():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    pytest.skip('no /proc/self/status')


def test_memory_stays_flat_over_many_reads(clip):
    s = FrameSampling('uniform', 8)
    for _ in range(20):
        read_video(clip, s, size=16)
    before = _rss_mb()
    for _ in range(200):
        read_video(clip, s, size=16)
    assert _rss_mb() - before < 15, 'RSS grew by more than 15 MB over 200 reads'


# ---- video folder ----------------------------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path):
    root = tmp_path / 'data'
    for cls, k in (('b_cls', 2), ('a_cls', 1)):
        (root / 'train' / cls).mkdir(parents=True)
        for i in range(k):
            write_mp4(str(root / 'train' / cls / f'v{i}.mp4'), _pattern(16), fps=8)
    (root / 'train' / 'a_cls' / 'junk.mp4').write_bytes(b'not a video' * 100)
    make_truncated(str(root / 'train' / 'a_cls' / 'cut.mp4'))
    (root / 'train' / 'a_cls' / 'notes.txt').write_text('ignored: not a video extension')
    outside = tmp_path / 'outside'
    outside.mkdir()
    write_mp4(str(outside / 'o.mp4'), _pattern(16), fps=8)
    os.symlink(outside / 'o.mp4', root / 'train' / 'b_cls' / 'link.mp4')
    os.symlink(outside, root / 'train' / 'c_escape')
    return root


def test_video_folder_counts_bad_and_refuses_escapes(folder):
    ds = SafeVideoFolder(str(folder / 'train'), sampling=FrameSampling('uniform', 4), size=16,
                         mean=(0.5,) * 3, std=(0.5,) * 3, data_root=str(folder), return_info=True)
    assert ds.classes == ['a_cls', 'b_cls']
    assert len(ds.outside) == 2 and any(p.endswith('link.mp4') for p in ds.outside)
    names = [os.path.basename(p) for p, _ in ds.samples]
    assert names == ['cut.mp4', 'junk.mp4', 'v0.mp4', 'v0.mp4', 'v1.mp4']
    items = [ds[i] for i in range(len(ds))]
    bad = [x for x in items if isinstance(x, BadVideo)]
    assert count_bad(bad) == {'truncated': 1, 'undecodable': 1} == dict(ds.bad_counts)
    clips, targets, bad_b, info = collate_video_skip_bad(items)
    assert clips.shape == (3, 3, 4, 16, 16) and clips.dtype == torch.float32 and targets.tolist() == [0, 1, 1]
    assert len(bad_b) == 2 and info['frame_indices'].shape == (3, 4) and info['timestamps'].shape == (3, 4)
    assert info['frame_indices'][0].tolist() == FrameSampling('uniform', 4).indices(16, 8).tolist()
    assert float(clips.min()) >= -1.0 and float(clips.max()) <= 1.0
    assert collate_video_skip_bad(bad)[0].numel() == 0


def test_video_folder_random_sampling_is_seeded(folder):
    ds = SafeVideoFolder(str(folder / 'train'), sampling=FrameSampling('uniform', 4, random=True), size=16, seed=1,
                         data_root=str(folder), return_info=True)
    i = next(k for k, (p, _) in enumerate(ds.samples) if p.endswith('v1.mp4'))
    a = ds[i][2]['frame_indices']
    assert torch.equal(a, ds[i][2]['frame_indices'])
    epochs = set()
    for e in range(6):
        ds.set_epoch(e)
        epochs.add(tuple(ds[i][2]['frame_indices'].tolist()))
    assert len(epochs) > 1


def test_video_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        SafeVideoFolder(str(tmp_path / 'missing'))
    (tmp_path / 'empty' / 'cls').mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match='no videos'):
        SafeVideoFolder(str(tmp_path / 'empty'))


# ---- synthetic sets --------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def clips_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp('clips')
    write_mp4(str(d / 'real.mp4'), _noise(40, 64, seed=5), fps=10)
    return str(d)


def test_make_videos_deterministic_and_readable(tmp_path):
    # generated backgrounds: backgrounds decoded by decord from a real clip were seen to differ between runs in one
    # process now and then (suspected decord seek inaccuracy), an open issue
    from zoo.datasets.synthetic_video import CLASSES, make_videos
    kw = dict(num_per_class=2, val_per_class=1, num_frames=8, size=32, seed=3, clips_dir=None, progress=False)
    make_videos(str(tmp_path / 'a'), **kw)
    make_videos(str(tmp_path / 'b'), **kw)
    make_videos(str(tmp_path / 'c'), **dict(kw, seed=4))
    files = sorted(p.relative_to(tmp_path / 'a') for p in (tmp_path / 'a').rglob('*.mp4'))
    assert len(files) == len(CLASSES) * 3
    def frames(run, f):
        return read_video(str(tmp_path / run / f), FrameSampling('stride', 8)).frames.float()
    # decoded frames, not file bytes: identical runs were seen to differ by a few grey levels on some clips (open
    # issue: x264 or decord nondeterminism); another seed differs by > 20 on every clip
    same = [float((frames('a', f) - frames('b', f)).abs().mean()) for f in files]
    other = [float((frames('a', f) - frames('c', f)).abs().mean()) for f in files]
    assert max(same) < 8.0 and min(other) > 15.0, (same, other)
    ds = SafeVideoFolder(str(tmp_path / 'a' / 'train'), sampling=FrameSampling('uniform', 8), size=32)
    assert ds.classes == sorted(CLASSES) and len(ds) == 2 * len(CLASSES)
    x, y = ds[0]
    assert x.shape == (3, 8, 32, 32)
    meta = json.loads((tmp_path / 'a' / 'meta.json').read_text())
    assert meta['num_per_class'] == {'train': 2, 'val': 1} and meta['num_background_segments'] > 0


def test_make_videos_uses_real_clip_backgrounds(tmp_path, clips_dir):
    from zoo.datasets.synthetic_video import make_videos
    meta = make_videos(str(tmp_path / 'r'), num_per_class=1, val_per_class=0, num_frames=8, size=32,
                       clips_dir=clips_dir, classes=('speed_slow',), progress=False)
    assert meta['num_background_segments'] == 6  # per_clip segments of the one clip


def test_make_videos_motion_is_in_the_pixels(tmp_path, clips_dir):
    """The shape of motion_right moves right: its mask centroid grows with time."""
    from zoo.datasets.synthetic_video import render_clip
    rng = np.random.default_rng(0)
    bg = np.zeros((8, 32, 32, 3), dtype=np.uint8)
    frames = render_clip('motion_right', 8, 32, bg, rng)
    xs = [np.nonzero(f.any(-1))[1].mean() for f in frames]
    assert all(b > a for a, b in zip(xs, xs[1:]))


def test_make_videos_without_clips_warns(tmp_path, caplog):
    from zoo.datasets.synthetic_video import make_videos
    with caplog.at_level(logging.WARNING, logger='zoo.datasets'):
        make_videos(str(tmp_path / 'o'), num_per_class=1, val_per_class=0, num_frames=4, size=16,
                    clips_dir=str(tmp_path / 'none'), classes=('speed_fast',), progress=False)
    assert 'generated backgrounds' in caplog.text
    assert len(list((tmp_path / 'o').rglob('*.mp4'))) == 1


@pytest.mark.parametrize('kwargs', [dict(num_per_class=0), dict(size=33), dict(num_frames=2),
                                    dict(classes=('nope',))])
def test_make_videos_bad_arguments(tmp_path, kwargs):
    from zoo.datasets.synthetic_video import make_videos
    with pytest.raises(ValueError):
        make_videos(str(tmp_path), **kwargs)


def test_make_videoqa_niah_and_tasks(tmp_path, clips_dir):
    from zoo.datasets.synthetic_videoqa import make_videoqa
    from zoo.datasets.videoqa import load_benchmark
    kw = dict(num_per_task=2, num_frames=12, size=32, seed=1, clips_dir=clips_dir, niah_lengths=(8, 16),
              niah_depths=(0.0, 0.5, 1.0), niah_per_cell=1, progress=False)
    make_videoqa(str(tmp_path / 'a'), **kw)
    make_videoqa(str(tmp_path / 'b'), **kw)
    for f in (tmp_path / 'a').rglob('*.mp4'):  # decoded frames agree (x264 bytes can differ run to run)
        a, b = (read_video(str(p), FrameSampling('stride', 8)).frames.float()
                for p in (f, tmp_path / 'b' / f.relative_to(tmp_path / 'a')))
        assert float((a - b).abs().mean()) < 8.0
    assert (tmp_path / 'a' / 'json' / 'vniah.json').read_text() == (tmp_path / 'b' / 'json' / 'vniah.json').read_text()
    records, report = load_benchmark('mvbench', str(tmp_path / 'a'), probe=True)
    assert report.summary()['skipped'] == {} and len(records) == 4 * 2 + 6
    niah = [r for r in records if r.task == 'vniah']
    assert sorted((r.extra['length'], r.extra['depth']) for r in niah) == \
        [(8, 0.0), (8, 0.5), (8, 1.0), (16, 0.0), (16, 0.5), (16, 1.0)]
    for r in niah:
        c = read_video(r.video, FrameSampling('stride', r.extra['length']))
        assert c.frames.shape[0] == r.extra['length']
        # the needle frame: mostly its plain light-grey background
        light = ((c.frames.float() - 235).abs().amax(-1) < 20).float().mean((1, 2)) > 0.5
        assert light[r.extra['needle_start']] and int(light.sum()) == 1
        assert r.options[r.answer] in ('red', 'green', 'blue', 'yellow', 'circle', 'square', 'triangle', 'diamond')
    for r in records:
        assert 0 <= r.answer < len(r.options)


def test_cli_make_videos_and_videoqa(tmp_path, clips_dir, capsys):
    from zoo.cli import main
    assert main(['make-videos', '--output', str(tmp_path / 'v'), '--size', '33']) == 2
    assert 'even number' in capsys.readouterr().err
    assert main(['make-videoqa', '--output', str(tmp_path / 'q'), '--niah-depths', '2']) == 2
    assert main(['make-videos', '--output', str(tmp_path / 'v'), '--num-per-class', '1', '--val-per-class', '0',
                 '--frames', '4', '--size', '16', '--clips-dir', clips_dir]) == 0
    assert len(list((tmp_path / 'v' / 'train').rglob('*.mp4'))) == 8
    assert main(['make-videoqa', '--output', str(tmp_path / 'q'), '--num-per-task', '1', '--frames', '12',
                 '--size', '16', '--tasks', 'counting', 'vniah', '--niah-lengths', '4', '--niah-depths', '0.5',
                 '--niah-per-cell', '1', '--clips-dir', clips_dir]) == 0
    assert sorted(p.name for p in (tmp_path / 'q' / 'json').iterdir()) == ['counting.json', 'vniah.json']


# ---- counts that miss nothing, classes that are classes (issue 20, item 5), symlinks (item 6) --------------------

def _two_class_videos(root, per_class=3, size=16):
    for cls in ('a_cls', 'b_cls'):
        (root / cls).mkdir(parents=True)
        for i in range(per_class):
            write_mp4(str(root / cls / f'v{i}.mp4'), _pattern(8, size), fps=8)


@pytest.mark.parametrize('batch_size', [2, 3, 4])
def test_drop_last_still_counts_every_unreadable_file(tmp_path, batch_size):
    """Regression: with drop_last, a zero-byte clip that falls in the left-over part of an epoch was never read, so
    "unreadable train" under-counted. Now it is counted every epoch whatever the batch size, and no partial batch
    trains."""
    from torch.utils.data import RandomSampler
    from zoo.datasets.splits import make_loader
    root = tmp_path / 'train'
    _two_class_videos(root)
    (root / 'b_cls' / 'zz_empty.mp4').write_bytes(b'')  # sorts last: the tail of a sequential epoch
    ds = SafeVideoFolder(str(root), sampling=FrameSampling('uniform', 4), size=16)
    assert len(ds) == 7
    for loader in (make_loader(ds, batch_size, 0, False, drop_last=True, collate_fn=collate_video_skip_bad),
                   make_loader(ds, batch_size, 0, False, sampler=RandomSampler(ds, generator=torch.Generator()
                                                                               .manual_seed(3)),
                               drop_last=True, collate_fn=collate_video_skip_bad)):
        assert len(loader) == 7 // batch_size
        for _ in range(3):  # epochs
            bad = trained = 0
            for clips, targets, bad_b, _ in loader:
                bad += len(bad_b)
                trained += len(targets)
            assert bad == 1
            assert trained in (7 // batch_size * batch_size, 7 // batch_size * batch_size - 1)


def test_drop_last_tail_of_image_folders(tmp_path):
    from PIL import Image
    from zoo.datasets import SafeImageFolder
    from zoo.datasets.splits import make_loader
    for cls in ('a', 'b'):
        (tmp_path / cls).mkdir()
        for i in range(2):
            Image.new('RGB', (8, 8), (10 * i, 0, 0)).save(tmp_path / cls / f'{i}.png')
    (tmp_path / 'b' / 'z_broken.png').write_bytes(b'not a png')
    import torchvision.transforms as T
    ds = SafeImageFolder(str(tmp_path), transform=T.ToTensor())
    images, targets, bad = next(iter(make_loader(ds, 4, 0, False, drop_last=True)))
    assert images.shape[0] == 4 and len(bad) == 1 and bad[0].path.endswith('z_broken.png')


def test_files_that_are_not_videos_are_listed_once_per_split(tmp_path, caplog):
    """Regression: a .txt file in a class folder was skipped without a word."""
    root = tmp_path / 'val'
    _two_class_videos(root, per_class=1)
    (root / 'a_cls' / 'notes.txt').write_text('x')
    (root / 'b_cls' / 'frames.jpg').write_bytes(b'x')
    (root / 'b_cls' / '.DS_Store').write_bytes(b'x')
    with caplog.at_level(logging.WARNING, logger='zoo.datasets'):
        ds = SafeVideoFolder(str(root))
    assert ds.other_files == ['a_cls/notes.txt', 'b_cls/frames.jpg']
    lines = [r.getMessage() for r in caplog.records if 'not videos' in r.getMessage()]
    assert len(lines) == 1 and 'notes.txt' in lines[0] and 'frames.jpg' in lines[0] and '.mp4' in lines[0]


def test_hidden_folders_are_never_classes(tmp_path):
    """Regression: a hidden folder inside a split (notebook checkpoints, thumbnail caches) was taken as a class and
    aborted the run (it holds no video / image of its own), or added its copies as samples."""
    from PIL import Image
    from zoo.datasets import SafeImageFolder
    from zoo.datasets.splits import open_folder
    root = tmp_path / 'train'
    _two_class_videos(root, per_class=1)
    (root / '.ipynb_checkpoints').mkdir()
    (root / '.thumbnails').mkdir()
    write_mp4(str(root / '.thumbnails' / 't.mp4'), _pattern(8), fps=8)
    (root / 'a_cls' / '.ipynb_checkpoints').mkdir()
    write_mp4(str(root / 'a_cls' / '.ipynb_checkpoints' / 'v0-checkpoint.mp4'), _pattern(8), fps=8)
    ds = SafeVideoFolder(str(root))
    assert ds.classes == ['a_cls', 'b_cls'] and len(ds) == 2
    images = tmp_path / 'images'
    for cls in ('cat', 'dog'):
        (images / cls).mkdir(parents=True)
        Image.new('RGB', (8, 8)).save(images / cls / '0.png')
    (images / '.ipynb_checkpoints').mkdir()
    assert open_folder(str(images), str(images)).classes == ['cat', 'dog']
    assert SafeImageFolder(str(images)).classes == ['cat', 'dog']


def test_one_class_is_an_error_naming_the_fix(tmp_path):
    """Regression: a one-class dataset trained to a meaningless 100 % without a warning."""
    root = tmp_path / 'train'
    (root / 'only').mkdir(parents=True)
    write_mp4(str(root / 'only' / 'v.mp4'), _pattern(8), fps=8)
    with pytest.raises(ValueError) as e:
        SafeVideoFolder(str(root))
    assert "one class only ('only')" in str(e.value) and 'add a folder per class' in str(e.value)


def test_a_data_dir_that_is_a_file_says_so(tmp_path):
    from zoo.datasets.folder import evaluation_root, find_split
    f = tmp_path / 'data.mp4'
    f.write_bytes(b'x')
    for call in (lambda: find_split(str(f), ['train'], 'training', 'video'), lambda: evaluation_root(str(f)),
                 lambda: SafeVideoFolder(str(f))):
        with pytest.raises(NotADirectoryError, match='is a file, not a folder'):
            call()
    with pytest.raises(FileNotFoundError) as e:
        find_split(str(tmp_path), ['train'], 'training', 'video')
    assert '<class>/<video>' in str(e.value) and 'image' not in str(e.value).lower()


def test_symlinks_are_followed_into_allowed_roots_only(tmp_path, caplog):
    """Regression (item 6): symlinked folders were skipped with a message naming neither the link nor a fix. Links
    into the data root are followed; links elsewhere only into an --allow-root folder; the message names the link,
    its target and the option."""
    data = tmp_path / 'data'
    _two_class_videos(data / 'val', per_class=1)
    inside = data / 'pool' / 'c_cls'
    inside.mkdir(parents=True)
    write_mp4(str(inside / 'p.mp4'), _pattern(8), fps=8)
    os.symlink(inside, data / 'val' / 'c_cls')  # a link inside the data root: followed
    store = tmp_path / 'store'
    (store / 'd_cls').mkdir(parents=True)
    write_mp4(str(store / 'd_cls' / 's.mp4'), _pattern(8), fps=8)
    os.symlink(store / 'd_cls', data / 'val' / 'd_cls')
    with caplog.at_level(logging.WARNING, logger='zoo.datasets'):
        ds = SafeVideoFolder(str(data / 'val'), data_root=str(data))
    assert ds.classes == ['a_cls', 'b_cls', 'c_cls'] and len(ds) == 3
    msg = ' '.join(r.getMessage() for r in caplog.records)
    assert f'{data}/val/d_cls -> {store}/d_cls' in msg and f'--allow-root {store}/d_cls' in msg
    ds = SafeVideoFolder(str(data / 'val'), data_root=str(data), allow_roots=[str(store)])
    assert ds.classes == ['a_cls', 'b_cls', 'c_cls', 'd_cls'] and not ds.outside


def test_zoo_train_counts_an_empty_clip_in_every_epoch(tmp_path):
    """The training loop end to end: with drop_last (7 clips, batch 4), the zero-byte clip is counted as unreadable
    in every epoch's metrics, wherever the shuffled order puts it (it used to be missed whenever it fell in the
    dropped tail)."""
    import csv
    from zoo.cli import main
    data = tmp_path / 'data'
    _two_class_videos(data / 'train', per_class=3, size=32)
    _two_class_videos(data / 'val', per_class=1, size=32)
    (data / 'train' / 'b_cls' / 'empty.mp4').write_bytes(b'')
    out = tmp_path / 'run'
    assert main(['train', '--model', 'pe_video_vit_tiny_patch16_rope3d_224', '--data-dir', str(data), '--num-frames',
                 '4', '--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=1', 'num_heads=2',
                 '--epochs', '4', '-b', '4', '-j', '0', '--no-progress', '--output', str(out), '--threads', '1']) == 0
    with open(out / 'metrics.csv') as f:
        rows = list(csv.DictReader(f))
    assert [int(r['train_unreadable']) for r in rows] == [1, 1, 1, 1]


def _image_classes(root, classes, per_class=2):
    from PIL import Image
    for c, cls in enumerate(classes):
        (root / cls).mkdir(parents=True)
        for i in range(per_class):
            Image.new('RGB', (16, 16), (200 if c == 0 else 20, 200 if c == 1 else 20, 200 if c == 2 else 20 + i)) \
                .save(root / cls / f'{i}.png')


def test_train_and_eval_resolution_take_allow_root(tmp_path, capsys, caplog):
    """Regression (item 6): ``--allow-root`` existed on eval-frames / eval-video only; ``zoo train`` and ``zoo
    eval-resolution`` skipped every class folder symlinked out of --data-dir with no way to admit it."""
    import csv
    from zoo.cli import main
    data, store = tmp_path / 'data', tmp_path / 'store'
    for split in ('train', 'val'):
        _image_classes(data / split, ('a_cls', 'b_cls'))
        _image_classes(store / split, ('c_cls',))
        os.symlink(store / split / 'c_cls', data / split / 'c_cls')
    tiny = ['--model', 'pe_vit_tiny_patch16_ape_224', '--data-dir', str(data), '--img-size', '16', '--model-kwargs',
            'patch_size=8', 'embed_dim=16', 'depth=1', 'num_heads=2', '--epochs', '1', '--warmup-epochs', '0', '-b',
            '2', '-j', '0', '--no-progress', '--threads', '1']
    with caplog.at_level(logging.WARNING, logger='zoo.datasets'):
        assert main(['train', *tiny, '--output', str(tmp_path / 'no')]) == 0
    assert f'{data}/train/c_cls -> {store}/train/c_cls' in caplog.text and '--allow-root' in caplog.text
    run = tmp_path / 'yes'
    assert main(['train', *tiny, '--output', str(run), '--allow-root', str(store)]) == 0
    with open(run / 'train_classes.csv') as f:
        assert {r['outcome'] for r in csv.DictReader(f)} == {'a_cls', 'b_cls', 'c_cls'}
    ev = ['eval-resolution', '--run', str(run), '--data-dir', str(data), '--sizes', '16', '--threads', '1']
    assert main([*ev, '--output', str(tmp_path / 'ev-no')]) != 0  # the run has 3 classes, the folder 2 without it
    err = capsys.readouterr().err
    assert "lacks ['c_cls']" in err and '--allow-root' in err and '\n' not in err.strip()
    assert main([*ev, '--output', str(tmp_path / 'ev'), '--allow-root', str(store)]) == 0
    rows = json.loads((tmp_path / 'ev' / 'results.json').read_text())
    assert [r['n'] for r in rows['results']] == [6]


def test_the_test_session_writes_no_cache_to_the_home_directory():
    """Regression: tests wrote video indexes to ~/.cache/zoo/video-index (and matplotlib its font cache to ~/.cache):
    tests/conftest.py points every cache at a folder of the session."""
    import matplotlib
    from zoo.datasets.video_streams import index_cache_dir
    home = os.path.realpath(os.path.expanduser('~')) + os.sep
    for path in (index_cache_dir(), os.environ['XDG_CACHE_HOME'], os.environ['MPLCONFIGDIR'],
                 matplotlib.get_cachedir()):
        assert not os.path.realpath(path).startswith(home), path


@pytest.mark.parametrize('world,batch_size', [(2, 2), (3, 2), (2, 8)])
def test_distributed_shares_still_count_every_unreadable_file(tmp_path, world, batch_size):
    """Regression: a DistributedSampler(drop_last=True), as zoo train uses with several processes, leaves a few
    samples out of every share (so that the shares are equal); an unreadable file there was never read nor counted.
    Now the processes' counts add up to every file once, every epoch, and all processes run as many batches."""
    from torch.utils.data import DistributedSampler
    from zoo.datasets.splits import make_loader
    root = tmp_path / 'train'
    _two_class_videos(root, per_class=3)
    (root / 'b_cls' / 'zz_empty.mp4').write_bytes(b'')
    ds = SafeVideoFolder(str(root), sampling=FrameSampling('uniform', 2), size=16)
    assert len(ds) == 7
    drop_last = len(ds) // world > batch_size  # as zoo.train.loop chooses
    empty = next(i for i, (p, _) in enumerate(ds.samples) if p.endswith('zz_empty.mp4'))
    left_out = 0
    for epoch in range(12):
        bad, read, steps, shares = 0, 0, set(), set()
        for rank in range(world):
            sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=1, drop_last=True)
            sampler.set_epoch(epoch)
            shares.update(sampler)
            loader = make_loader(ds, batch_size, 0, False, sampler=sampler, drop_last=drop_last,
                                 collate_fn=collate_video_skip_bad)
            steps.add(len(loader))
            n = 0
            for clips, targets, bad_b, _ in loader:
                bad += len(bad_b)
                read += len(targets) + len(bad_b)
                n += 1
            assert n == len(loader)
        assert bad == 1, (epoch, world, batch_size)
        assert len(steps) == 1
        left_out += empty not in shares
    assert left_out  # the sampler left the empty file out of every share in some epochs (it is counted there too)
