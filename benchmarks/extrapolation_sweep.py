"""CIFAR-10: every RoPE-family encoding x every training-free extrapolation strategy at 1x, 1.5x and 2x the training
size, two seeds each; writes ``docs/results/extrapolation.md`` (+ ``extrapolation.png``, ``extrapolation_results.csv``).

    python benchmarks/extrapolation_sweep.py            # from the repository root

Steps (each a plain ``zoo`` command, logged to ``runs/cifar10/<run>.log`` / ``runs/cifar10/extrapolation.log``):

1. extract ``../shared/data/cifar10-jpg.tar.gz`` to ``data/cifar10`` unless present (as ``cifar10_sweep.py``);
2. for every RoPE-family config (``configs/cifar10_{rope_axial,rope_mixed,rope_mixed_ape}.yaml``) and seed 0, 1:
   ``zoo train --config ... --seed S --output runs/cifar10/<pe>_s<S>`` unless finished (the run dirs of
   ``cifar10_sweep.py``: its checkpoints are reused; strategies are evaluation-time only, so one checkpoint serves all);
3. one ``zoo eval-resolution --run ... (every run) --sizes 32 48 64 --extrapolation none pi ntk yarn`` sweep into
   ``runs/cifar10/extrapolation/``;
4. the docs page: per encoding, strategy and size the top-1 of each seed and their mean, the seed spread, and which
   strategy wins beyond seed noise (rule in the page).

``--docs-only`` rewrites the page from ``runs/cifar10/extrapolation/results.json`` without training or evaluating.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar10_sweep import ROOT, _cpu, _torch_version, extract, log  # noqa: E402

PES = ('rope_axial', 'rope_mixed', 'rope_mixed_ape')
STRATEGIES = ('none', 'pi', 'ntk', 'yarn')


def _finished(out: str) -> bool:
    last = os.path.join(out, 'checkpoint-last.pth')
    if not os.path.isfile(last):
        return False
    import torch
    ck = torch.load(last, map_location='cpu', weights_only=True)
    return ck['epoch'] >= ck['meta']['args']['epochs']


def train(args, env) -> List[str]:
    runs = []
    for pe in args.pes:
        for seed in args.seeds:
            out = os.path.join(args.out, f'{pe}_s{seed}')
            if not _finished(out):
                cmd = [sys.executable, '-m', 'zoo.cli', 'train', '--config', f'configs/cifar10_{pe}.yaml', '--seed',
                       str(seed), '--output', out, '--data-dir', args.data, '--threads', str(args.threads),
                       '--no-progress'] + (['--resume'] if os.path.isfile(os.path.join(out, 'checkpoint-last.pth'))
                                           else ['--overwrite'] if os.path.isdir(out) else [])
                log(f'train {pe} seed {seed}')
                with open(out + '.log', 'a') as f:
                    if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode:
                        raise SystemExit(f'training {out} failed; see {out}.log')
            runs.append(out)
    return runs


def evaluate(args, runs: List[str], env) -> None:
    cmd = [sys.executable, '-m', 'zoo.cli', 'eval-resolution']
    for r in runs:
        cmd += ['--run', r]
    cmd += ['--data-dir', args.data, '--split', 'test', '--sizes', *map(str, args.sizes), '--max-per-class',
            str(args.eval_per_class), '--extrapolation', *STRATEGIES, '--batch-size', '250', '--workers', '1',
            '--threads', str(args.threads), '--output', args.eval_dir, '--overwrite', '--no-progress']
    log('evaluate: ' + ' '.join(cmd[2:]))
    with open(os.path.join(args.out, 'extrapolation.log'), 'a') as f:
        if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode:
            raise SystemExit(f'evaluation failed; see {args.out}/extrapolation.log')


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (pe, strategy, size): top-1 of each seed, mean, spread (max - min over seeds)."""
    df = df.assign(seed=df['base_label'].str.extract(r'seed (\d+)', expand=False).fillna('0').astype(int))
    g = df.groupby(['pe', 'extrapolation', 'size', 'train_size'], sort=False)['top1']
    out = g.agg(mean='mean', spread=lambda v: float(v.max() - v.min()), n='count').reset_index()
    seeds = df.pivot_table(index=['pe', 'extrapolation', 'size'], columns='seed', values='top1', sort=False)
    seeds.columns = [f'seed {c}' for c in seeds.columns]
    return out.merge(seeds.reset_index(), on=['pe', 'extrapolation', 'size'])


def verdicts(summary: pd.DataFrame) -> List[str]:
    """Per encoding and size above the training size: the best strategy, and whether it is beyond seed noise."""
    lines = []
    for pe in dict.fromkeys(summary['pe']):
        for size in sorted(set(summary['size'])):
            part = summary[(summary['pe'] == pe) & (summary['size'] == size)].set_index('extrapolation')
            if (part['size'] == part['train_size']).all():
                continue
            order = part['mean'].sort_values(ascending=False)
            best, second = order.index[0], order.index[1]
            margin = order.iloc[0] - order.iloc[1]
            noise = 2 * max(part.loc[best, 'spread'], part.loc[second, 'spread'])
            scale = size / part['train_size'].iloc[0]
            vs_none = order.iloc[0] - part.loc['none', 'mean']
            if margin > noise:
                text = (f'**{best}** wins beyond noise ({order.iloc[0]:.2f}, +{margin:.2f} over {second}; noise '
                        f'threshold {noise:.2f})')
            else:
                tied = [s for s in order.index if order.iloc[0] - order[s] <= 2 * max(
                    part.loc[best, 'spread'], part.loc[s, 'spread'])]
                text = (f'no single winner beyond noise: {", ".join(tied)} within noise of each other (best '
                        f'{best} {order.iloc[0]:.2f}, +{margin:.2f} over {second}; threshold {noise:.2f})')
            none_noise = 2 * max(part.loc[best, 'spread'], part.loc['none', 'spread'])
            text += (f'; {best} vs none: {vs_none:+.2f} points ' +
                     ('(beyond noise)' if best != 'none' and vs_none > none_noise else '(within noise)'
                      if best != 'none' else ''))
            lines.append(f'- `{pe}` at {size} px ({scale:g}x): {text}.')
    return lines


def ramp_shares(args):
    """Per encoding: the share of rotary frequency components that YaRN's ramp keeps even partly (``r >= alpha``,
    ``r = L |theta| / 2 pi`` over the training extent L), read from the seed-0 checkpoint, and the temperature."""
    import math
    import torch
    from zoo.runs.models import load_model
    lines, below = [], True
    for pe in args.pes:
        path = os.path.join(args.out, f'{pe}_s{args.seeds[0]}', 'checkpoint-last.pth')
        model, _ = load_model(dict(model=None, checkpoint=path))
        ext = model.pe.extrapolation
        freqs = model.pe.bands if hasattr(model.pe, 'bands') else model.pe.freqs.detach()
        length = max(ext.train_grid)
        r = length * freqs.abs().float() / (2 * math.pi)
        below &= bool((r < ext.alpha).all())
        lines.append(f'- `{pe}`: training grid {"x".join(f"{g:g}" for g in ext.train_grid)}; largest r = '
                     f'{float(r.max()):.2f} turns, {100 * float((r >= ext.alpha).float().mean()):.1f} % of the '
                     f'frequency components at r >= alpha = {ext.alpha:g}.')
    sizes = [s for s in args.sizes if s > 32]
    temps = ', '.join(f'{s} px: sqrt(1/t) = {0.1 * math.log((s / 32) ** 2) + 1:.3f} (logits x '
                      f'{(0.1 * math.log((s / 32) ** 2) + 1) ** 2:.3f})' for s in sizes)
    return lines + [f'- YaRN temperature (s = token-count ratio, both axes scaled): {temps}.'], below


def write_docs(args, wall_s: float) -> None:
    with open(os.path.join(args.eval_dir, 'results.json')) as f:
        res = json.load(f)
    df = pd.DataFrame(res['results'])
    df = df[~df['error'].apply(lambda e: isinstance(e, str) and bool(e))]
    summary = summarise(df)
    os.makedirs(args.docs, exist_ok=True)
    shutil.copyfile(os.path.join(args.eval_dir, 'extrapolation.png'), os.path.join(args.docs, 'extrapolation.png'))
    df.to_csv(os.path.join(args.docs, 'extrapolation_results.csv'), index=False)
    n = int(df['n'].max())
    seeds = sorted({c for c in summary.columns if c.startswith('seed ')})
    lines = ['# CIFAR-10: extrapolation strategies for RoPE at 1x, 1.5x and 2x the training size', '',
             f'The RoPE-family encodings of the CIFAR-10 recipe (`configs/cifar10_<pe>.yaml`: 8 px patches, a 4 x 4 '
             f'grid at the 32 px training size, 2 epochs), {len(seeds)} seeds each, evaluated zero-shot at '
             f'{", ".join(f"{s} px" for s in args.sizes)} under each training-free strategy of '
             '`zoo.encodings.extrapolation`: `none` (integer positions extrapolate, the default), `pi` (position '
             'interpolation, arXiv:2306.15595), `ntk` (NTK-aware base scaling), `yarn` (NTK-by-parts ramp with '
             'alpha = 1, beta = 32, and attention temperature 0.1 ln(s) + 1, arXiv:2309.00071). Factors per axis = '
             'evaluated grid / training grid (here 6/4 and 8/4 on both axes). The checkpoints are the same for every '
             f'strategy. Top-1 (%) on {n} test images ({args.eval_per_class} per class).', '',
             '| encoding | strategy | ' + ' | '.join(f'{s} px mean ({", ".join(seeds)})' for s in args.sizes) + ' |',
             '|---|---|' + '---|' * len(args.sizes)]
    for pe in dict.fromkeys(summary['pe']):
        part = summary[summary['pe'] == pe]
        best = {s: part[part['size'] == s]['mean'].max() for s in args.sizes}
        for strategy in STRATEGIES:
            cells = []
            for s in args.sizes:
                r = part[(part['extrapolation'] == strategy) & (part['size'] == s)]
                if not len(r):
                    cells.append('n/a')
                    continue
                r = r.iloc[0]
                mean = f'{r["mean"]:.2f}'
                if round(r['mean'], 2) == round(best[s], 2) and s != r['train_size']:
                    mean = f'**{mean}**'
                cells.append(f'{mean} ({", ".join(f"{r[c]:.2f}" for c in seeds)})')
            lines.append(f'| {pe} | {strategy} | ' + ' | '.join(cells) + ' |')
    lines += ['', 'Bold: best mean per encoding and size above the training size. At 32 px (the training grid) every '
              'strategy is the identity, so its four rows agree exactly (a check of the implementation).', '',
              '![top-1 per strategy](extrapolation.png)', '',
              '## Which strategy wins', '',
              'Rule: seed spread = |seed 0 - seed 1| of one (encoding, strategy, size). The best mean wins beyond '
              'noise when it exceeds the runner-up by more than twice the larger seed spread of the two (the rule of '
              '[cifar10.md](cifar10.md); two seeds are a thin estimate of noise, so borderline cases are ties).', '']
    lines += verdicts(summary)
    shares, below = ramp_shares(args)
    ramp = ('On this training grid every rotary frequency component turns less than alpha = 1 times over the '
            'training extent (list below), so YaRN\'s ramp interpolates every pair exactly like `pi`: here `yarn` is '
            '`pi` plus the attention temperature, and the `pi` / `yarn` difference isolates the temperature.'
            if below else 'Some frequency components turn more than alpha times over the training extent (list '
            'below): for them YaRN keeps (part of) the original frequency, unlike `pi`.')
    lines += ['', '## Reading', '', ramp + ' NTK keeps the highest frequency of each ladder and extrapolates it to '
              'positions it never saw in training; its rows staying close to `none` are consistent with those '
              'components being what fails on the larger grid. The checkpoints were trained for this page with the '
              '`zoo train` command below (run directories are not committed), so their 32 px numbers are not those '
              'of the runs in [cifar10.md](cifar10.md) (same recipe and seeds; CPU training is not bit-reproducible '
              'across code versions).', ''] + shares
    lines += ['', '## How it was made', '', '```bash', 'python benchmarks/extrapolation_sweep.py', '```', '',
              'which trains (or reuses) `runs/cifar10/<pe>_s<seed>` with `zoo train --config '
              'configs/cifar10_<pe>.yaml --seed <seed>` and then runs', '', '```bash',
              'zoo eval-resolution ' + ' '.join(f'--run runs/cifar10/{pe}_s{s}' for pe in args.pes
                                               for s in args.seeds) +
              f' --data-dir {args.data} --split test --sizes {" ".join(map(str, args.sizes))} --max-per-class '
              f'{args.eval_per_class} --extrapolation none pi ntk yarn --output {args.eval_dir}', '```', '',
              f'Rows: `extrapolation_results.csv`; full report (heatmap, top-5): `{args.eval_dir}/report.md` after a '
              f'run. Redraw the figure: `python -m zoo.eval.report docs/results/extrapolation_results.csv --png '
              f'/tmp/scaling.png --strategies docs/results/extrapolation.png`. Hardware: {_cpu()} ({os.cpu_count()} '
              f'cores, shared with other jobs), PyTorch {_torch_version()} on CPU; this step took {wall_s / 60:.0f} '
              'min.', '']
    with open(os.path.join(args.docs, 'extrapolation.md'), 'w') as f:
        f.write('\n'.join(lines))
    log(f'wrote {args.docs}/extrapolation.md')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--tarball', default=os.path.join(os.path.dirname(ROOT), 'shared', 'data', 'cifar10-jpg.tar.gz'))
    p.add_argument('--data', default='data/cifar10')
    p.add_argument('--out', default='runs/cifar10', help='run dirs (shared with cifar10_sweep.py)')
    p.add_argument('--eval-dir', default='runs/cifar10/extrapolation')
    p.add_argument('--docs', default='docs/results')
    p.add_argument('--pes', nargs='+', default=list(PES))
    p.add_argument('--seeds', type=int, nargs='+', default=[0, 1])
    p.add_argument('--sizes', type=int, nargs='+', default=[32, 48, 64])
    p.add_argument('--eval-per-class', type=int, default=500)
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--docs-only', action='store_true', help='only rewrite the page from the saved results')
    args = p.parse_args()
    os.chdir(ROOT)
    t0 = time.time()
    if not args.docs_only:
        extract(args.tarball, args.data)
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONUNBUFFERED='1')
        runs = train(args, env)
        t0 = time.time()
        evaluate(args, runs, env)
    timing = os.path.join(args.eval_dir, 'sweep_seconds.txt')
    if not args.docs_only:
        with open(timing, 'w') as f:
            f.write(f'{time.time() - t0:.0f}\n')
    wall = float(open(timing).read()) if os.path.isfile(timing) else 0.0
    write_docs(args, wall)


if __name__ == '__main__':
    main()
