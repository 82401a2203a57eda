"""Video-LLM main job: the tiny video-LLM trained with every multimodal RoPE scheme at 8 frames on the synthetic
video-QA set, evaluated at 8, 16, 32 and 64 frames and on V-NIAH; writes docs/results/video_qa_* files.

    python benchmarks/vlm_sweep.py            # from the repository root; about 40 minutes on 2 busy CPU cores

Steps (each a plain ``zoo`` command, logged to ``runs/vlm/<name>.log``):

1. ``zoo make-videoqa --output data/vqa-train --num-per-task 60 --frames 32 --size 32 --seed 0 --niah-lengths 16 32
   --niah-per-cell 4 --needle-span 2`` and ``zoo make-videoqa --output data/vqa-eval --num-per-task 25 --frames 32
   --size 32 --seed 1 --niah-lengths 32 64 128 --niah-per-cell 4 --needle-span 2`` unless present (the evaluation
   set has other clips, other seeds and longer V-NIAH haystacks than the training set);
2. for every scheme: ``zoo train-vlm --config configs/vlm_<scheme>.yaml --seed S --output runs/vlm/<scheme>_s<S>``,
   seed 0 for all and seed 1 as well for the ``--noise-schemes`` (run-to-run noise);
3. one ``zoo eval-video --benchmark mvbench --data-root data/vqa-eval --run runs/vlm/... --frames 8 16 32 64
   --frame-cache runs/vlm/frame-cache --output runs/vlm/eval`` over every run;
4. copies ``results.csv``, ``report.md`` and the plots to ``docs/results/video_qa_*``.

Finished runs are skipped (and interrupted ones resumed) when the script is started again.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from typing import List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar10_sweep import log, run_logged  # noqa: E402  (shared sweep helpers)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMES = ('rope1d', 'mrope', 'mrope_interleave', 'vrope', 'v2pe', 'videorope', 'hope')
DATA = {
    'data/vqa-train': ['--num-per-task', '60', '--frames', '32', '--size', '32', '--seed', '0', '--niah-lengths', '16',
                       '32', '--niah-per-cell', '4', '--needle-span', '2'],
    'data/vqa-eval': ['--num-per-task', '25', '--frames', '32', '--size', '32', '--seed', '1', '--niah-lengths', '32',
                      '64', '128', '--niah-per-cell', '4', '--needle-span', '2'],
}


def _done(out: str) -> bool:
    last = os.path.join(out, 'checkpoint-last.pth')
    if not os.path.isfile(last):
        return False
    import torch
    ck = torch.load(last, map_location='cpu', weights_only=True)
    return ck['epoch'] >= ck['meta']['args']['epochs']


def main(argv: List[str] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--schemes', nargs='+', default=list(SCHEMES))
    p.add_argument('--noise-schemes', nargs='*', default=['mrope', 'videorope'], help='also trained with seed 1')
    p.add_argument('--frames', type=int, nargs='+', default=[8, 16, 32, 64])
    p.add_argument('--out', default='runs/vlm')
    p.add_argument('--docs', default='docs/results')
    p.add_argument('--skip-train', action='store_true', help='evaluate the finished runs only')
    args = p.parse_args(argv)
    os.chdir(ROOT)
    env = dict(os.environ, PYTHONUNBUFFERED='1')
    zoo = [sys.executable, '-m', 'zoo.cli']
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    for path, flags in DATA.items():
        if os.path.isfile(os.path.join(path, 'meta.json')):
            log(f'data: {path} already present')
            continue
        if run_logged([*zoo, 'make-videoqa', '--output', path, *flags], os.path.join(args.out, 'make-data.log'), env,
                      1800) != 0:
            raise SystemExit(f'zoo make-videoqa failed; see {args.out}/make-data.log')
    runs = [(s, 0) for s in args.schemes] + [(s, 1) for s in args.noise_schemes if s in args.schemes]
    finished = []
    for scheme, seed in runs:
        out = os.path.join(args.out, f'{scheme}_s{seed}')
        if not args.skip_train and not _done(out):
            cmd = [*zoo, 'train-vlm', '--config', f'configs/vlm_{scheme}.yaml', '--seed', str(seed), '--output', out,
                   '--no-progress']
            if os.path.isfile(os.path.join(out, 'checkpoint-last.pth')):
                cmd.append('--resume')
            t = time.time()
            rc = run_logged(cmd, out + '.log', env, 3600)
            log(f'train {scheme} seed {seed}: exit {rc} in {time.time() - t:.0f} s')
        if _done(out):
            finished.append(out)
        else:
            log(f'{out} did not finish; left out of the evaluation (see {out}.log)')
    if not finished:
        raise SystemExit('no finished run to evaluate')
    cmd = [*zoo, 'eval-video', '--benchmark', 'mvbench', '--data-root', 'data/vqa-eval', '--frames',
           *map(str, args.frames), '--frame-cache', os.path.join(args.out, 'frame-cache'), '--output',
           os.path.join(args.out, 'eval'), '--overwrite', '--no-progress', '--threads', '2']
    for out in finished:
        cmd += ['--run', out]
    t = time.time()
    rc = run_logged(cmd, os.path.join(args.out, 'eval.log'), env, 7200)
    log(f'eval-video: exit {rc} in {time.time() - t:.0f} s')
    if rc not in (0, 1):
        raise SystemExit(f'zoo eval-video failed; see {args.out}/eval.log')
    os.makedirs(args.docs, exist_ok=True)
    ev = os.path.join(args.out, 'eval')
    for name in sorted(os.listdir(ev)):
        if name.endswith(('.csv', '.png', '.md')):
            shutil.copyfile(os.path.join(ev, name), os.path.join(args.docs, 'video_qa_' + name))
    log(f'done in {time.time() - t0:.0f} s; copied {ev}/ results to {args.docs}/video_qa_*')
    return 0


if __name__ == '__main__':
    sys.exit(main())
