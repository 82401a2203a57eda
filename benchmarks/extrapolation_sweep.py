"""CIFAR-10: every RoPE-family encoding x every training-free extrapolation strategy at 1x, 1.5x and 2x the training
size, two seeds each, plus the training-time position options (p-RoPE, randomized positions) on ``rope_mixed`` and
``alibi``; writes ``docs/results/extrapolation.md`` (+ ``extrapolation.png``, ``extrapolation_results.csv``).

    python benchmarks/extrapolation_sweep.py            # from the repository root
    python benchmarks/extrapolation_sweep.py --dry-run /tmp/xdry   # every row's model trained 1 tiny epoch on a
                                                        # synthetic folder and evaluated: checks the plan, no numbers

Steps (each a plain ``zoo`` command, logged to ``runs/cifar10/<run>.log`` / ``runs/cifar10/extrapolation.log``):

1. extract ``../shared/data/cifar10-jpg.tar.gz`` to ``data/cifar10`` unless present (as ``cifar10_sweep.py``);
2. for every row of :data:`PLAN` and seed 0, 1: ``zoo train --config ... --seed S --output runs/cifar10/<row>_s<S>``
   unless finished. The plain RoPE rows are the run dirs of ``cifar10_sweep.py`` (its checkpoints are reused;
   strategies are evaluation-time only, so one checkpoint serves all); the option rows (p-RoPE, randomized positions)
   change training, so each is its own run: the same recipe with ``--model-kwargs ... pe_kwargs.<option>=...``
   (``alibi`` rows: the recipe with ``--model pe_vit_tiny_patch16_alibi_224``; ALiBi takes only the strategy
   ``none``, its other strategy rows are recorded as not applicable);
3. for every run whose encoding takes LongRoPE: ``zoo search-longrope --run R --data-dir data/cifar10 --split train
   --scale 2 --val-size 256 --output R/longrope.json`` unless present (factors searched at 64 px on a validation
   split carved from the training images; the test images are never seen);
4. one ``zoo eval-resolution --run ... (every run) --sizes 32 48 64 --extrapolation none pi ntk yarn mspoe`` sweep
   into ``runs/cifar10/extrapolation/``, and per LongRoPE run one ``zoo eval-resolution --run R ... --extrapolation
   longrope=R/longrope.json`` into ``runs/cifar10/extrapolation/longrope/<run>/`` (each run has its own factors), whose
   rows the page merges as strategy ``longrope``;
5. the docs page: per encoding, strategy and size the top-1 of each seed and their mean, the seed spread, and which
   strategy wins beyond seed noise (rule in the page).

``--docs-only`` rewrites the page from ``runs/cifar10/extrapolation/results.json`` without training or evaluating.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import yaml

import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar10_sweep import ROOT, _cpu, _torch_version, extract, finished_run, log  # noqa: E402

PES = ('rope_axial', 'rope_mixed', 'rope_mixed_ape')
STRATEGIES = ('none', 'pi', 'ntk', 'yarn', 'mspoe', 'longrope')
#: Strategies evaluated in the one shared eval-resolution sweep; ``longrope`` has a factors file per run (step 3).
SHARED_STRATEGIES = ('none', 'pi', 'ntk', 'yarn', 'mspoe')
#: Rows whose encoding takes LongRoPE (rotary ladders; ALiBi has none).
LONGROPE_ROWS = ('rope_axial', 'rope_mixed', 'rope_mixed_ape', 'rope_mixed_prope75', 'rope_mixed_randpos')

#: Rows of the table: ``{row: (config pe, model or None = the config's, pe_kwargs)}``; a row is a run directory name
#: (``<row>_s<seed>``). p-RoPE has no ALiBi row: it zeroes rotary frequencies, and ALiBi has none.
PLAN: Dict[str, Tuple[str, Optional[str], dict]] = {
    'rope_axial': ('rope_axial', None, {}),
    'rope_mixed': ('rope_mixed', None, {}),
    'rope_mixed_ape': ('rope_mixed_ape', None, {}),
    'rope_mixed_prope75': ('rope_mixed', None, dict(p_rope=0.75)),
    'rope_mixed_randpos': ('rope_mixed', None, dict(random_positions='subset')),
    'alibi': ('ape', 'pe_vit_tiny_patch16_alibi_224', {}),
    'alibi_randpos': ('ape', 'pe_vit_tiny_patch16_alibi_224', dict(random_positions='subset')),
}
#: What each option row adds, for the page.
OPTION_NOTES = {
    'rope_mixed_prope75': 'p-RoPE, `p_rope=0.75` (the lowest-frequency quarter of each ladder not rotated; '
                          'Barbero et al., arXiv:2410.06205)',
    'rope_mixed_randpos': "randomized positions, `random_positions='subset'` (sorted random subsets of a 2x longer "
                          'axis in training; Ruoss et al., arXiv:2305.16843)',
    'alibi': 'ALiBi distance biases (arXiv:2108.12409); the training-free strategies do not apply (`none` only)',
    'alibi_randpos': "ALiBi with randomized positions, `random_positions='subset'`",
}
#: The row each training-time option row is compared with (same encoding and recipe, without the option).
OPTION_BASE = {'rope_mixed_prope75': 'rope_mixed', 'rope_mixed_randpos': 'rope_mixed', 'alibi_randpos': 'alibi'}


def _train_command(args, row: str, seed: int, out: str) -> List[str]:
    """``zoo train`` for one row and seed: the row's recipe, its model and encoding options."""
    pe, model, pe_kwargs = PLAN[row]
    config = f'configs/cifar10_{pe}.yaml'
    cmd = [sys.executable, '-m', 'zoo.cli', 'train', '--config', config, '--seed', str(seed), '--output', out,
           '--data-dir', args.data, '--threads', str(args.threads), '--no-progress']
    if model:
        cmd += ['--model', model]
    kwargs = dict(args.model_overrides)
    if pe_kwargs or kwargs:  # flags replace the config's model_kwargs whole: pass them all
        with open(os.path.join(ROOT, config)) as f:
            base = dict(yaml.safe_load(f).get('model_kwargs') or {})
        base.update(kwargs)
        cmd += ['--model-kwargs'] + [f'{k}={v}' for k, v in base.items()] + \
            [f'pe_kwargs.{k}={v}' for k, v in pe_kwargs.items()]
    return cmd + list(args.train_extra)


def train(args, env) -> List[str]:
    runs = []
    for row in args.pes:
        for seed in args.seeds:
            out = os.path.join(args.out, f'{row}_s{seed}')
            if not finished_run(out):
                cmd = _train_command(args, row, seed, out) + (
                    ['--resume'] if os.path.isfile(os.path.join(out, 'checkpoint-last.pth'))
                    else ['--overwrite'] if os.path.isdir(out) else [])
                log(f'train {row} seed {seed}')
                with open(out + '.log', 'a') as f:
                    if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode:
                        raise SystemExit(f'training {out} failed; see {out}.log')
            runs.append(out)
    return runs


def _longrope_runs(runs: List[str]) -> List[str]:
    return [r for r in runs if os.path.basename(r).rsplit('_s', 1)[0] in LONGROPE_ROWS]


def search(args, runs: List[str], env) -> None:
    """``zoo search-longrope`` for every LongRoPE run without its factors file (``<run>/longrope.json``)."""
    for r in _longrope_runs(runs):
        out = os.path.join(r, 'longrope.json')
        lost = os.path.join(r, 'longrope.baseline-wins.txt')
        if os.path.isfile(out) or os.path.isfile(lost):
            continue
        cmd = [sys.executable, '-m', 'zoo.cli', 'search-longrope', '--run', r, '--data-dir', args.data, '--split',
               'train', '--scale', str(max(args.sizes) / 32), '--val-size', str(args.search_val), '--output', out,
               '--threads', str(args.threads), *args.search_extra]
        log('search: ' + ' '.join(cmd[3:]))
        with open(os.path.join(args.out, 'extrapolation.log'), 'a') as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode
        if rc == 1:  # a baseline (none / PI / NTK / YaRN) wins beyond 2 SE: no factors file, no longrope rows
            with open(lost, 'w') as f:
                f.write('zoo search-longrope: a baseline wins (see extrapolation.log); no factors written\n')
            log(f'search: a baseline wins for {r}; its longrope rows are left out')
        elif rc:
            raise SystemExit(f'search-longrope for {r} failed; see {args.out}/extrapolation.log')


def _eval_command(args, runs: List[str], strategies, output: str) -> List[str]:
    cmd = [sys.executable, '-m', 'zoo.cli', 'eval-resolution']
    for r in runs:  # label '<row> seed <s>': the table's row and seed (several rows share an encoding)
        row, seed = os.path.basename(r).rsplit('_s', 1)
        cmd += ['--run', r, '--label', f'{row} seed {seed}']
    return cmd + ['--data-dir', args.data, '--split', 'test', '--sizes', *map(str, args.sizes), '--max-per-class',
                  str(args.eval_per_class), '--extrapolation', *strategies, '--batch-size', str(args.eval_batch),
                  '--workers', '1', '--threads', str(args.threads), '--output', output, '--overwrite', '--no-progress']


def evaluate(args, runs: List[str], env) -> None:
    cmds = [_eval_command(args, runs, SHARED_STRATEGIES, args.eval_dir)]
    cmds += [_eval_command(args, [r], [f'longrope={os.path.join(r, "longrope.json")}'],
                           os.path.join(args.eval_dir, 'longrope', os.path.basename(r))) for r in _longrope_runs(runs)
             if os.path.isfile(os.path.join(r, 'longrope.json'))]  # runs where a baseline won have no factors
    for cmd in cmds:
        log('evaluate: ' + ' '.join(cmd[3:]))
        with open(os.path.join(args.out, 'extrapolation.log'), 'a') as f:
            if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT).returncode:
                raise SystemExit(f'evaluation failed; see {args.out}/extrapolation.log')


def load_rows(eval_dir: str) -> pd.DataFrame:
    """The shared sweep's rows plus each LongRoPE run's (strategy ``longrope=FILE`` written as ``longrope``)."""
    frames = []
    paths = [os.path.join(eval_dir, 'results.json')]
    lr = os.path.join(eval_dir, 'longrope')
    if os.path.isdir(lr):
        paths += [os.path.join(lr, d, 'results.json') for d in sorted(os.listdir(lr))]
    for path in paths:
        if os.path.isfile(path):
            with open(path) as f:
                frames.append(pd.DataFrame(json.load(f)['results']))
    df = pd.concat(frames, ignore_index=True)
    df['extrapolation'] = df['extrapolation'].astype(str).str.replace(r'^longrope=.*$', 'longrope', regex=True)
    return df


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (row of the plan, strategy, size): top-1 of each seed, mean, spread (max - min over seeds). The
    ``pe`` column of the result is the plan's row (``<row> seed <s>`` labels), not the bare encoding."""
    df = df.assign(seed=df['base_label'].str.extract(r'seed (\d+)', expand=False).fillna('0').astype(int),
                   pe=df['base_label'].str.replace(r' seed \d+$', '', regex=True))
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
            if len(order) < 2:
                lines.append(f'- `{pe}` at {size} px: only `{order.index[0]}` applies ({order.iloc[0]:.2f}); compare '
                             'it with the other rows at this size.')
                continue
            best, second = order.index[0], order.index[1]
            if not _noise_measured(part):
                lines.append(f'- `{pe}` at {size} px: best `{best}` ({order.iloc[0]:.2f}); the seed noise is not '
                             'measured (fewer than two seeds), so no winner is claimed.')
                continue
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
            if best != 'none':
                text += (f'; {best} vs none: {vs_none:+.2f} points ' +
                         ('(beyond noise)' if vs_none > none_noise else '(within noise)'))
            lines.append(f'- `{pe}` at {size} px ({scale:g}x): {text}.')
    return lines


def _noise_measured(cells: pd.DataFrame) -> bool:
    """Whether every cell (rows of :func:`summarise`) has two or more seeds and a spread: the 2x-spread rule applies."""
    return bool((cells['n'] >= 2).all() and cells['spread'].notna().all())


def option_lines(summary: pd.DataFrame) -> List[str]:
    """Per training-time option row (:data:`OPTION_BASE`) and size: the option row against its base row under
    ``none`` and under the option row's best strategy at that size; a difference counts beyond twice the larger seed
    spread of the two cells (the page's rule)."""
    lines = []
    for row, base in OPTION_BASE.items():
        mine, theirs = summary[summary['pe'] == row], summary[summary['pe'] == base]
        if not len(mine) or not len(theirs):
            continue
        for size in sorted(set(mine['size'])):
            here = mine[mine['size'] == size].set_index('extrapolation')
            there = theirs[theirs['size'] == size].set_index('extrapolation')
            best = here['mean'].idxmax()
            for strategy in dict.fromkeys(['none', best]):
                if strategy not in there.index:
                    continue
                a, b = here.loc[strategy], there.loc[strategy]
                diff = a['mean'] - b['mean']
                if not _noise_measured(pd.DataFrame([a, b])):
                    bar, verdict = float('nan'), 'seed noise not measured (fewer than two seeds)'
                else:
                    bar = 2 * max(a['spread'], b['spread'])
                    verdict = ('**better** beyond noise' if diff > bar else '**worse** beyond noise' if -diff > bar
                               else 'within noise')
                lines.append(f'| `{row}` vs `{base}` | {strategy} | {size} | {a["mean"]:.2f} | {b["mean"]:.2f} | '
                             f'{diff:+.2f} | {"n/a" if pd.isna(bar) else f"{bar:.2f}"} | {verdict} |')
    if not lines:
        return []
    return ['## Training-time options against their base row', '',
            'Each option row against the same encoding trained without the option (same recipe and seeds), under '
            '`none` and under the option row\'s best strategy at that size; bar = twice the larger seed spread of '
            'the two cells.', '',
            '| rows | strategy | px | option mean | base mean | difference | bar | verdict |',
            '|---|---|---|---|---|---|---|---|'] + lines


def ramp_shares(args):
    """Per encoding: the share of rotary frequency components that YaRN's ramp keeps even partly (``r >= alpha``,
    ``r = L |theta| / 2 pi`` over the training extent L), read from the seed-0 checkpoint, and the temperature."""
    import math
    from zoo.runs.models import load_model
    lines, below = [], True
    for pe in args.pes:
        path = os.path.join(args.out, f'{pe}_s{args.seeds[0]}', 'checkpoint-last.pth')
        if not os.path.isfile(path):  # a row not trained here (yet): nothing to read
            continue
        model, _ = load_model(dict(model=None, checkpoint=path))
        ext = model.pe.extrapolation
        if ext is None:  # no rotary frequencies (alibi rows)
            continue
        freqs = model.pe.bands if hasattr(model.pe, 'bands') else model.pe.masked_freqs().detach()
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
    """Write the page, its CSV and figure from the evaluation rows of the ``--pes`` rows only (results of other rows
    left in ``--eval-dir`` by an earlier run are not shown). Everything is computed before the first file is
    written, so a failure leaves the three files as they were."""
    df = load_rows(args.eval_dir)
    df = df[~df['error'].apply(lambda e: isinstance(e, str) and bool(e))]
    if 'not_applicable' in df:
        df = df[~df['not_applicable'].apply(lambda e: isinstance(e, str) and bool(e))]
    df = df[df['base_label'].str.replace(r' seed \d+$', '', regex=True).isin(args.pes)]
    if not len(df):
        raise SystemExit(f'extrapolation_sweep: no evaluation rows of {", ".join(args.pes)} in {args.eval_dir}; run '
                         'without --docs-only first')
    summary = summarise(df)
    n = int(df['n'].max())
    seeds = sorted({c for c in summary.columns if c.startswith('seed ')})
    held = list(dict.fromkeys(summary['pe']))
    missing = [row for row in PLAN if row not in held]
    command = 'python benchmarks/extrapolation_sweep.py' + (f' --pes {" ".join(args.pes)}' if missing else '') + (
        f' --eval-per-class {args.eval_per_class}' if args.eval_per_class != 500 else '')
    lines = ['# CIFAR-10: extrapolation strategies for RoPE at 1x, 1.5x and 2x the training size'
             + (' (partial)' if missing else ''), '']
    if missing:
        lines += [f'**Partial.** This page holds the rows `{"`, `".join(held)}` (`{command}`); the rows '
                  f'`{"`, `".join(missing)}` of the plan are not in it yet. `python benchmarks/extrapolation_sweep.py` '
                  'runs the whole plan (finished training runs and factor searches are reused).', '']
    lines += [
             f'The RoPE-family encodings of the CIFAR-10 recipe (`configs/cifar10_<pe>.yaml`: 8 px patches, a 4 x 4 '
             f'grid at the 32 px training size, 2 epochs), {len(seeds)} seeds each, evaluated zero-shot at '
             f'{", ".join(f"{s} px" for s in args.sizes)} under each training-free strategy of '
             '`zoo.encodings.extrapolation`: `none` (integer positions extrapolate, the default), `pi` (position '
             'interpolation, arXiv:2306.15595), `ntk` (NTK-aware base scaling), `yarn` (NTK-by-parts ramp with '
             'alpha = 1, beta = 32, and attention temperature 0.1 ln(s) + 1, arXiv:2309.00071), `mspoe` (Ms-PoE per '
             'head and axis, ratios 1.2-1.8, arXiv:2403.04797; it also changes the 32 px grid), `longrope` (LongRoPE '
             'factors per frequency and axis searched by `zoo search-longrope` at 64 px on training images, '
             'arXiv:2402.13753; each run its own factors). Factors per axis = '
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
    options = [f'- `{row}`: {OPTION_NOTES[row]}.' for row in args.pes if row in OPTION_BASE]
    lines += ['', 'Bold: best mean per encoding and size above the training size. At 32 px (the training grid) every '
              'strategy but `mspoe` is the identity, so those rows agree exactly (a check of the implementation).',
              '']
    lines += (['Rows with training-time position options (each its own training run, same recipe and seeds; the '
               'strategies are applied on top at evaluation):', ''] + options + [''] if options else [])
    if 'alibi' in args.pes:
        lines += [f'- `alibi`: {OPTION_NOTES["alibi"]}.', '']
    lines += [
              '![top-1 per strategy](extrapolation.png)', '',
              '## Which strategy wins', '',
              'Rule: seed spread = |seed 0 - seed 1| of one (encoding, strategy, size). The best mean wins beyond '
              'noise when it exceeds the runner-up by more than twice the larger seed spread of the two (the rule of '
              '[cifar10.md](cifar10.md); two seeds are a thin estimate of noise, so borderline cases are ties).', '']
    lines += verdicts(summary)
    compared = option_lines(summary)
    lines += [''] + compared if compared else []
    shares, below = ramp_shares(args)
    ramp = ('On this training grid every rotary frequency component turns less than alpha = 1 times over the '
            'training extent (list below), so YaRN\'s ramp interpolates every pair exactly like `pi`: here `yarn` is '
            '`pi` plus the attention temperature, and the `pi` / `yarn` difference isolates the temperature.'
            if below else 'Some frequency components turn more than alpha times over the training extent (list '
            'below): for them YaRN keeps (part of) the original frequency, unlike `pi`.')
    lines += ['', '## Reading', '', ramp + ' NTK keeps the highest frequency of each ladder and extrapolates it to '
              'positions it never saw in training; its rows staying close to `none` are consistent with those '
              'components being what fails on the larger grid. The checkpoints are the run directories `runs/cifar10/'
              '<row>_s<seed>` shared with the CIFAR-10 sweep: the runs of [cifar10.md](cifar10.md) where that sweep '
              'trained them on the same machine, else trained for this page with the `zoo train` command below '
              '(checkpoints are not committed; CPU training is not bit-reproducible across code versions, so a '
              'retrained run\'s 32 px numbers can differ from cifar10.md\'s).', ''] + shares
    lines += ['', '## How it was made', '', '```bash', command, '```', '',
              'which trains (or reuses) `runs/cifar10/<pe>_s<seed>` with `zoo train --config '
              'configs/cifar10_<pe>.yaml --seed <seed>` and then runs', '', '```bash',
              'zoo eval-resolution ' + ' '.join(f'--run runs/cifar10/{pe}_s{s}' for pe in args.pes
                                               for s in args.seeds) +
              f' --data-dir {args.data} --split test --sizes {" ".join(map(str, args.sizes))} --max-per-class '
              f'{args.eval_per_class} --extrapolation none pi ntk yarn mspoe --output {args.eval_dir}', '```', '',
              'and, per LongRoPE run R, `zoo search-longrope --run R --data-dir ' + args.data + ' --split train '
              f'--scale {max(args.sizes) / 32:g} --val-size {args.search_val} --output R/longrope.json` and the same '
              'eval-resolution with `--run R --extrapolation longrope=R/longrope.json`.', '',
              f'Rows: `extrapolation_results.csv`; full report (heatmap, top-5): `{args.eval_dir}/report.md` after a '
              'run. Redraw the figure (one panel per row): the command above with `--docs-only`. Hardware: '
              f'{_cpu()} ({os.cpu_count()} cores, shared with other jobs), PyTorch {_torch_version()} on CPU; '
              f'this step took {wall_s / 60:.0f} '
              'min.', '']
    os.makedirs(args.docs, exist_ok=True)
    from zoo.sweep.report.plots import plot_strategies  # one panel per row of the plan, not per encoding
    plot_strategies(df.assign(pe=df['base_label'].str.replace(r' seed \d+$', '', regex=True)),
                    os.path.join(args.docs, 'extrapolation.png'),
                    f'Extrapolation strategies: zero-shot top-1 on CIFAR-10 test ({n} images), one panel per row')
    df.to_csv(os.path.join(args.docs, 'extrapolation_results.csv'), index=False)
    with open(os.path.join(args.docs, 'extrapolation.md'), 'w') as f:
        f.write('\n'.join(lines))
    log(f'wrote {args.docs}/extrapolation.md')


def dry_run_settings(args) -> None:
    """Point every path of ``args`` into ``args.dry_run``, write a synthetic folder there, and shrink the work."""
    import numpy as np
    from PIL import Image
    root = os.path.abspath(args.dry_run)
    args.data, args.out = os.path.join(root, 'data'), os.path.join(root, 'runs')
    args.eval_dir, args.docs = os.path.join(root, 'runs', 'extrapolation'), os.path.join(root, 'docs')
    args.seeds, args.sizes, args.eval_per_class, args.eval_batch = args.seeds[:1], [32, 48], 2, 8
    args.model_overrides = dict(depth=1)
    args.search_val, args.search_extra = 8, ['--population', '2', '--mutations', '1', '--crossovers', '1',
                                             '--parents', '1', '--iterations', '1']
    args.train_extra = ['--epochs', '1', '--batch-size', '8', '--max-train-per-class', '4', '--max-val-per-class',
                        '2', '--workers', '0']
    rng = np.random.default_rng(0)
    for split in ('train', 'test'):
        for c in range(10):
            folder = os.path.join(args.data, split, f'class{c}')
            os.makedirs(folder, exist_ok=True)
            for i in range(4):
                Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(
                    os.path.join(folder, f'{i}.jpg'))
    os.makedirs(args.out, exist_ok=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--tarball', default=os.path.join(os.path.dirname(ROOT), 'shared', 'data', 'cifar10-jpg.tar.gz'),
                   help='CIFAR-10 as JPEG folders, extracted to --data unless that is already there')
    p.add_argument('--data', default='data/cifar10', help='the extracted image folders (train/, test/)')
    p.add_argument('--out', default='runs/cifar10', help='run dirs (shared with cifar10_sweep.py)')
    p.add_argument('--eval-dir', default='runs/cifar10/extrapolation',
                   help='where the evaluation sweeps write their results (the page is made from them)')
    p.add_argument('--docs', default='docs/results', help='where extrapolation.md, its CSV and figure are written '
                                                          '(overwritten)')
    p.add_argument('--pes', nargs='+', default=list(PLAN), choices=list(PLAN), metavar='ROW',
                   help=f'rows of the plan: {", ".join(PLAN)}')
    p.add_argument('--seeds', type=int, nargs='+', default=[0, 1], help='training seeds of every row')
    p.add_argument('--sizes', type=int, nargs='+', default=[32, 48, 64],
                   help='evaluation sizes in px (training: 32; LongRoPE factors are searched at the largest)')
    p.add_argument('--eval-per-class', type=int, default=500, help='test images per class at every size')
    p.add_argument('--threads', type=int, default=2,
                   help='torch threads of every command (resuming a training run needs the same value)')
    p.add_argument('--docs-only', action='store_true', help='only rewrite the page from the saved results')
    p.add_argument('--dry-run', metavar='DIR', help='check the plan: every row trained one tiny epoch (depth 1) on a '
                   'synthetic 10-class folder under DIR and evaluated at 32 and 48 px, one seed; the page goes to DIR')
    args = p.parse_args()
    os.chdir(ROOT)
    args.model_overrides, args.train_extra, args.eval_batch = {}, [], 250
    args.search_val, args.search_extra = 256, []
    if args.dry_run:
        dry_run_settings(args)
    t0 = time.time()
    if not args.docs_only:
        if not args.dry_run:
            extract(args.tarball, args.data)
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONUNBUFFERED='1')
        runs = train(args, env)
        t0 = time.time()
        search(args, runs, env)
        evaluate(args, runs, env)
    timing = os.path.join(args.eval_dir, 'sweep_seconds.txt')
    if not args.docs_only:
        with open(timing, 'w') as f:
            f.write(f'{time.time() - t0:.0f}\n')
    wall = float(open(timing).read()) if os.path.isfile(timing) else 0.0
    write_docs(args, wall)


if __name__ == '__main__':
    main()
