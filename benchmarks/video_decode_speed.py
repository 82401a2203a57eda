"""What zoo's frame-accurate video reading costs over decord alone (issue 20: at most 10 % on ordinary H.264 MP4s).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/video_decode_speed.py               # the real clips and two x264 MP4s
    OMP_NUM_THREADS=1 python benchmarks/video_decode_speed.py --frames 8 --rounds 9 --json out.json

Protocol: process CPU time (``time.process_time``: all threads of the process, so the number of decoder threads does
not flatter either side) of one read of ``T`` uniformly sampled frames (MVBench's rule) at native size, per file and
``T``. "decord alone" is what a loader on decord does: ``decord.VideoReader(path, num_threads=1)``, ``get_batch`` of
the indices, their frame times. zoo is :func:`zoo.datasets.video.read_video` (the default decord backend) in three
states: ``first`` (nothing known: no index on disk, nothing in the process; the file's index is made, decord's
frames are checked against PyAV's and the verdict is written to the index cache), ``new process`` (the index and the
verdict come from the disk cache: what DataLoader workers and later sweeps pay) and ``later`` (everything in the
process). Each round times decord alone and the three zoo states one after the other on the same file, so background
load hits all alike; the table gives per-file medians over ``--rounds`` rounds and the total of those medians, with
the ratio to decord alone. The index cache lives in a temporary folder (``ZOO_VIDEO_INDEX_CACHE``), removed at the
end.

Files: every clip in ``--clips-dir`` (default ``../shared/data/videos``: three CC-BY H.264 MP4s) and, unless
``--no-synthetic``, two MP4s written with x264's defaults through PyAV (``zoo.datasets._synth.write_mp4``: 320x240
and 640x360, 300 frames at 30 fps, B-frames, a keyframe every 250 frames).
"""
from __future__ import annotations

import os

os.environ.setdefault('OMP_NUM_THREADS', '1')

import argparse  # noqa: E402
import gc  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Callable, Dict, List  # noqa: E402

import numpy as np  # noqa: E402

CASES = ('decord alone', 'zoo first', 'zoo new process', 'zoo later')


def synthetic(folder: str) -> List[str]:
    """Two x264-default MP4s (320x240 and 640x360, 300 frames, 30 fps) of moving gradients."""
    from zoo.datasets._synth import write_mp4
    out = []
    for name, (h, w) in (('x264-240p.mp4', (240, 320)), ('x264-360p.mp4', (360, 640))):
        y, x = np.mgrid[0:h, 0:w]
        frames = np.stack([np.stack([(x + 3 * t) % 256, (y + 2 * t) % 256, ((x + y) // 2 + t) % 256], -1)
                           for t in range(300)]).astype(np.uint8)
        path = os.path.join(folder, name)
        write_mp4(path, frames, fps=30, crf=23)
        out.append(path)
    return out


def cpu_ms(fn: Callable[[], object]) -> float:
    gc.collect()
    t0 = time.process_time()
    fn()
    return (time.process_time() - t0) * 1000


def measure(path: str, num_frames: int, rounds: int, stat: Callable = statistics.median) -> Dict[str, float]:
    """``stat`` (median) of the process CPU milliseconds of each case in :data:`CASES` for one file and frame count."""
    import decord
    from zoo.datasets import video_streams
    from zoo.datasets.video import FrameSampling, read_video
    sampling = FrameSampling('uniform', num_frames)

    def decord_alone():
        vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        idx = sampling.indices(len(vr), vr.get_avg_fps()).tolist()
        vr.get_batch(idx).asnumpy()
        vr.get_frame_timestamp(idx)

    def zoo_read():
        clip = read_video(path, sampling)
        assert len(clip.indices) == num_frames

    times: Dict[str, List[float]] = {c: [] for c in CASES}
    zoo_read()  # warm-up: libraries loaded, the file in the page cache
    decord_alone()
    for _ in range(rounds):
        times['decord alone'].append(cpu_ms(decord_alone))
        video_streams.forget(disk=True)
        times['zoo first'].append(cpu_ms(zoo_read))
        assert video_streams.verdict(path) is not None
        video_streams.forget()
        times['zoo new process'].append(cpu_ms(zoo_read))
        times['zoo later'].append(cpu_ms(zoo_read))
    return {c: stat(v) for c, v in times.items()}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--clips-dir', default=os.path.join('..', 'shared', 'data', 'videos'))
    p.add_argument('--no-synthetic', action='store_true', help='only the clips of --clips-dir')
    p.add_argument('--frames', type=int, nargs='+', default=[8, 16], help='frames per read (uniform sampling)')
    p.add_argument('--rounds', type=int, default=7)
    p.add_argument('--stat', choices=['median', 'min'], default='median',
                   help='per file, the median or the least of the rounds (min: what the work costs without the '
                        'background load of a shared machine)')
    p.add_argument('--json', default=None, help='also write the numbers of the table here')
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix='zoo-video-speed-')
    os.environ['ZOO_VIDEO_INDEX_CACHE'] = os.path.join(work, 'index')
    os.environ.pop('ZOO_VIDEO_BACKEND', None)
    import torch
    torch.set_num_threads(1)
    from zoo.datasets.video import video_backend
    if video_backend() != 'decord':
        raise SystemExit('decord is not installed here: nothing to compare with')
    try:
        files = sorted(glob.glob(os.path.join(args.clips_dir, '*.mp4')))
        if not args.no_synthetic:
            files += synthetic(work)
        if not files:
            raise SystemExit(f'no .mp4 in {args.clips_dir} and --no-synthetic given')
        stat = min if args.stat == 'min' else statistics.median
        rows = [dict(file=os.path.basename(f), frames=t, **measure(f, t, args.rounds, stat))
                for t in args.frames for f in files]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = '| file | frames | ' + ' | '.join(f'{c} (ms)' for c in CASES) + ' |'
    print(head)
    print('|' + '---|' * (len(CASES) + 2))

    def cells(r: Dict) -> str:
        base = r['decord alone']
        return f'{base:.1f} | ' + ' | '.join(f'{r[c]:.1f} ({(r[c] / base - 1) * 100:+.0f} %)' for c in CASES[1:])
    for r in rows:
        print(f"| {r['file']} | {r['frames']} | {cells(r)} |")
    total = {c: sum(r[c] for r in rows) for c in CASES}
    print(f'| all | | {cells(total)} |')
    if args.json:
        with open(args.json, 'w') as fh:
            json.dump(dict(rows=rows, total=total, rounds=args.rounds, stat=args.stat), fh, indent=1)


if __name__ == '__main__':
    main()
