"""Video position-encoding sweep: every 3D PE trained at 8 frames on the synthetic video set, evaluated zero-shot at
4, 8, 16 and 32 frames and 0.75x-2x the frame size; writes docs/results/video.md, video.png, video_heatmaps.png.

    python benchmarks/video_sweep.py            # from the repository root; about an hour on 2 busy CPU cores

Steps (each a plain ``zoo`` command, logged to ``runs/video/<run>.log``):

1. ``zoo make-videos --output data/synthetic-videos --num-per-class 96 --val-per-class 16 --frames 32 --size 32
   --seed 0`` unless that set is already there (``meta.json`` records the arguments);
2. for every ``configs/video_<pe>.yaml`` whose model builds (the files differ only in ``model``):
   ``zoo train --config configs/video_<pe>.yaml --seed S --output runs/video/<pe>_s<S>``, seed 0 for all and seed 1
   as well for the ``--noise-pes`` (run-to-run noise);
3. for every run: ``zoo eval-frames --run runs/video/<pe>_s<S> --frames 4 8 16 32 --sizes 24 32 40 48 64`` (decoded
   frames cached in ``runs/video/frame-cache``, so every model sees the same clips);
4. merge the per-run results into ``runs/video/eval/`` and write the docs.

Finished runs are skipped and interrupted ones resumed when the script is started again.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from glob import glob
from typing import Dict, List, Optional

import pandas as pd
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar10_sweep import _cpu, _torch_version, log, run_logged  # noqa: E402  (shared sweep helpers)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_ARGS = dict(num_per_class=96, val_per_class=16, frames=32, size=32, seed=0)


def make_data(path: str, env: dict) -> None:
    """Write the synthetic set unless ``path/meta.json`` records the same arguments."""
    meta = os.path.join(path, 'meta.json')
    if os.path.isfile(meta):
        with open(meta) as f:
            m = json.load(f)
        have = dict(num_per_class=m['num_per_class']['train'], val_per_class=m['num_per_class']['val'],
                    frames=m['num_frames'], size=m['size'], seed=m['seed'])
        if have == DATA_ARGS:
            log(f'data: {path} already present')
            return
        raise SystemExit(f'{path} holds another synthetic set ({have}); remove it or pass another --data')
    cmd = [sys.executable, '-m', 'zoo.cli', 'make-videos', '--output', path]
    for k, v in DATA_ARGS.items():
        cmd += [f'--{k.replace("_", "-")}', str(v)]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if run_logged(cmd, path.rstrip('/') + '.log', env, 3600) != 0:
        raise SystemExit(f'zoo make-videos failed; see {path.rstrip("/")}.log')
    log(f'data: wrote {path}')


def load_configs(pattern: str) -> Dict[str, dict]:
    """``{pe: config}`` for every config file; exits if they differ in anything but ``model``."""
    configs = {}
    for path in sorted(glob(pattern)):
        pe = os.path.basename(path)[len('video_'):-len('.yaml')]
        with open(path) as f:
            configs[pe] = dict(yaml.safe_load(f), _path=os.path.relpath(path, ROOT))
    recipes = {pe: {k: v for k, v in c.items() if k not in ('model', '_path')} for pe, c in configs.items()}
    first = next(iter(recipes.values()))
    differ = [pe for pe, r in recipes.items() if r != first]
    if differ:
        raise SystemExit(f'configs {differ} differ from the shared recipe in more than the model name')
    return configs


_BUILD_CHECK = """
import json, sys, timm, torch, zoo
out = {}
for cfg in json.loads(sys.argv[1]):
    try:
        m = timm.create_model(cfg['model'], img_size=cfg['img_size'], num_frames=cfg['num_frames'], num_classes=8,
                              **cfg['model_kwargs'])
        m(torch.zeros(2, 3, cfg['num_frames'], cfg['img_size'], cfg['img_size'])).sum().backward()
        out[cfg['model']] = None
    except Exception as e:
        out[cfg['model']] = f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""}'
print(json.dumps(out))
"""


def build_failures(configs: Dict[str, dict]) -> Dict[str, Optional[str]]:
    """``{pe: None or reason}``: whether each model builds and runs forward/backward now (fresh process)."""
    import subprocess
    payload = json.dumps([dict(model=c['model'], img_size=c['img_size'], num_frames=c['num_frames'],
                               model_kwargs=c['model_kwargs']) for c in configs.values()])
    proc = subprocess.run([sys.executable, '-c', _BUILD_CHECK, payload], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, OMP_NUM_THREADS='1'))
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ['build check crashed'])[-1]
        return {pe: reason for pe in configs}
    by_model = json.loads(proc.stdout.strip().splitlines()[-1])
    return {pe: by_model[c['model']] for pe, c in configs.items()}


def job(run: dict, args, env: dict) -> dict:
    """Train one run (or resume / skip it), then sweep it over frames and sizes."""
    out, log_path = run['output'], run['output'] + '.log'
    t0 = time.time()
    last = os.path.join(out, 'checkpoint-last.pth')
    zoo = [sys.executable, '-m', 'zoo.cli']
    done = False
    ran = False
    if os.path.isfile(last):
        import torch
        ck = torch.load(last, map_location='cpu', weights_only=True)
        done = ck['epoch'] >= ck['meta']['args']['epochs']
    if not done:
        ran = True
        cmd = [*zoo, 'train', '--config', run['config'], '--seed', str(run['seed']), '--output', out,
               '--data-dir', args.data, '--threads', str(args.threads), '--no-progress', *shlex.split(args.train_args)]
        if os.path.isfile(last):
            cmd.append('--resume')
        elif os.path.isdir(out):
            cmd.append('--overwrite')
        log(f'start {run["name"]}')
        rc = run_logged(cmd, log_path, env, args.run_timeout)
        if rc != 0:
            status = 'timed out' if rc == 124 else 'train failed'
            log(f'{status.upper()} {run["name"]} (see {log_path})')
            return dict(run, status=status, seconds=time.time() - t0)
    train_s = time.time() - t0
    eval_dir = os.path.join(out, 'eval')
    if not os.path.isfile(os.path.join(eval_dir, 'results.json')) or not done:
        ran = True
        cmd = [*zoo, 'eval-frames', '--run', out, '--label', run['label'], '--data-dir', args.data,
               '--frames', *map(str, args.frames), '--sizes', *map(str, args.sizes), '--batch-size', '32',
               '--workers', '1', '--threads', str(args.threads), '--frame-cache', args.frame_cache,
               '--output', eval_dir, '--overwrite', '--no-progress']
        if run_logged(cmd, log_path, env, args.run_timeout) != 0:
            log(f'FAILED evaluating {run["name"]} (see {log_path})')
            return dict(run, status='eval failed', seconds=time.time() - t0)
    timing_path = os.path.join(out, 'sweep_timing.json')
    if os.path.isfile(timing_path):
        with open(timing_path) as f:
            timing = json.load(f)
    else:
        timing = dict(train_s=train_s, total_s=time.time() - t0)
        with open(timing_path, 'w') as f:
            json.dump(timing, f)
    metrics = pd.read_csv(os.path.join(out, 'metrics.csv'))
    log(f'done {run["name"]}: val top-1 {metrics["val_top1"].iloc[-1]:.2f} ({timing["total_s"] / 60:.1f} min)')
    return dict(run, status='ok', seconds=timing['total_s'], val_top1=float(metrics['val_top1'].iloc[-1]), ran=ran)


def noise_section(df: pd.DataFrame, runs: List[dict]) -> List[str]:
    """Seed spread per (frames, size) cell, and which PE differences exceed twice the largest spread of their cell."""
    lines = ['## What holds beyond seed noise', '']
    pairs = {}
    for r in runs:
        if r['status'] == 'ok':
            pairs.setdefault(r['pe'], {})[r['seed']] = r['label']
    pairs = {pe: s for pe, s in pairs.items() if len(s) > 1}
    if not pairs:
        return lines + ['No PE finished with two seeds, so the noise could not be measured.', '']
    top1 = {(r['label'], int(r['frames']), int(r['size'])): r['top1'] for _, r in df.iterrows()}
    cells = sorted({(t, s) for _, t, s in top1})
    spread = {c: max(abs(top1[(p[0], *c)] - top1[(p[1], *c)]) for p in pairs.values()) for c in cells}
    tf, ts = int(df['train_frames'].iloc[0]), int(df['train_size'].iloc[0])
    frames = sorted(set(df['frames']))
    sizes = sorted(set(df['size']))
    lines += [f'Seeds 0 and 1 of {", ".join(sorted(pairs))}: the largest top-1 difference (points) between the two '
              'seeds of one PE, per cell (same data and recipe; initialisation, data order and frame offsets differ):',
              '', '| frames | ' + ' | '.join(f'{s} px' for s in sizes) + ' |', '|---|' + '---|' * len(sizes)]
    for t in frames:
        lines.append(f'| {t} | ' + ' | '.join(f'{spread[(t, s)]:.1f}' for s in sizes) + ' |')
    lines.append('')
    seed0 = {r['pe']: r['label'] for r in runs if r['status'] == 'ok' and r['seed'] == 0}
    base_pe = 'sincos' if 'sincos' in seed0 else next(iter(seed0))
    base = seed0[base_pe]
    # Two seeds of two PEs estimate the noise of one cell poorly (a cell can show 0.8 points by luck where its
    # neighbour shows 9): the threshold is twice the largest spread over all cells, one number for the whole grid.
    noise = max(spread.values())
    verdict = []
    fx, sx = f'{max(frames) / tf:g}x frames', f'{max(sizes) / ts:g}x size'
    for name, cell in (('the training clip', (tf, ts)), (fx, (max(frames), ts)), (sx, (tf, max(sizes))),
                       (f'{fx} and {sx}', (max(frames), max(sizes)))):
        if cell not in spread:
            continue
        above, below = [], []
        for pe, label in seed0.items():
            if pe == base_pe:
                continue
            d = top1[(label, *cell)] - top1[(base, *cell)]
            if abs(d) > 2 * noise:
                (above if d > 0 else below).append(f'{pe} ({d:+.1f})')
        within = len(seed0) - 1 - len(above) - len(below)
        verdict.append(f'- {name} ({cell[0]} frames x {cell[1]} px), against `{base_pe}` seed 0: better beyond noise: '
                       f'{", ".join(above) or "none"}; worse beyond noise: {", ".join(below) or "none"}; {within} '
                       f'PE(s) within noise.')
    accs = [v for v in top1.values() if v == v]
    best = max(accs) if accs else float('nan')
    lines += [f'A difference counts only if it exceeds twice the largest seed spread of the grid, '
              f'2 x {noise:.1f} = {2 * noise:.1f} points (per-cell spreads from two pairs of runs are too thin to '
              'trust one by one).', ''] + verdict + ['']
    separated = any('better beyond noise: none; worse beyond noise: none' not in v for v in verdict)
    ranges = {}
    for label in dict.fromkeys(k[0] for k in top1):
        vals = [v for k, v in top1.items() if k[0] == label and v == v]
        ranges[label] = max(vals) - min(vals)
    flat = [lab for lab, r in ranges.items() if r <= 2 * noise]
    lines += [f'**Bottom line.** Chance is 12.5 %; the best cell of any model reaches {best:.1f} %, and the two seeds '
              f'of one PE differ by up to {noise:.1f} points. ' +
              ('Some PEs differ from `sincos` beyond that noise (listed above). ' if separated else
               'No PE is better or worse than `sincos` beyond that noise in any of the cells above. ') +
              f'{len(flat)} of {len(ranges)} models vary by no more than twice the noise over the whole frames x size '
              'grid. At this CPU-sized recipe the models have barely started to learn the temporal classes, so the '
              'sweep shows the mechanics (every 3D PE trains, runs and adapts zero-shot from '
              f'{min(frames)} to {max(frames)} frames and from {min(sizes) / ts:g}x to {max(sizes) / ts:g}x the '
              'frame size) rather than a ranking; a ranking needs a recipe that learns the task (far more steps than '
              'two shared CPU cores give in an hour).', '']
    return lines


def heatmap_grid(df: pd.DataFrame, path: str) -> None:
    """One small frames x size heatmap per model, on a shared colour scale."""
    import math
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    labels = list(dict.fromkeys(df['label']))
    cols = 5
    rows = math.ceil(len(labels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 2.5 * rows + 0.6), dpi=110, squeeze=False)
    im = None
    from zoo.sweep.report import color_range
    lo, hi = color_range(df['top1'].values)  # one scale for every model
    for ax, label in zip(axes.flat, labels):
        part = df[df['label'] == label]
        wide = part.pivot_table(index='frames', columns='size', values='top1', dropna=False).sort_index()
        im = ax.imshow(wide.values, cmap='viridis', vmin=lo, vmax=hi, aspect='auto')
        ax.set_xticks(range(len(wide.columns)), [str(c) for c in wide.columns], fontsize=7)
        ax.set_yticks(range(len(wide.index)), [str(r) for r in wide.index], fontsize=7)
        tf, ts = int(part['train_frames'].iloc[0]), int(part['train_size'].iloc[0])
        for i, t in enumerate(wide.index):
            for j, s in enumerate(wide.columns):
                v = wide.values[i, j]
                ax.text(j, i, ('--' if pd.isna(v) else f'{v:.0f}') + ('*' if (t, s) == (tf, ts) else ''),
                        ha='center', va='center', fontsize=7,
                        color='white' if pd.isna(v) or v < (lo + hi) / 2 else 'black')
        ax.set_title(label, fontsize=9)
        ax.set_xlabel('px', fontsize=7)
        ax.set_ylabel('frames', fontsize=7)
    for ax in list(axes.flat)[len(labels):]:
        ax.axis('off')
    fig.suptitle(f'Zero-shot top-1 (%) over frames (rows) x frame size (columns); * = training clip; colour scale '
                 f'{lo:.0f}-{hi:.0f} %', fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.93, 0.97))
    if im is not None:
        fig.colorbar(im, cax=fig.add_axes([0.945, 0.15, 0.012, 0.7]), label='top-1 (%)')
    fig.savefig(path)
    plt.close(fig)


def write_docs(runs: List[dict], skipped: Dict[str, str], args, configs: Dict[str, dict], wall_s: float) -> None:
    from zoo.sweep.report import pivot_markdown, plot_frames_scaling, write_frames_report
    ok = [r for r in runs if r['status'] == 'ok']
    rows, models, protocol = [], [], None
    for r in ok:
        with open(os.path.join(r['output'], 'eval', 'results.json')) as f:
            res = json.load(f)
        rows += res['results']
        models += res['models']
        protocol = protocol or res['protocol']
    os.makedirs(args.docs, exist_ok=True)
    md_path = os.path.join(args.docs, 'video.md')
    png, heat = os.path.join(args.docs, 'video.png'), os.path.join(args.docs, 'video_heatmaps.png')
    recipe = next(iter(configs.values()))
    mk = recipe.get('model_kwargs') or {}
    recipe_txt = yaml.safe_dump({k: v for k, v in recipe.items() if k not in ('model', '_path')}, sort_keys=False,
                                default_flow_style=None).strip()
    lines = ['# Synthetic videos: 3D position encodings under more frames and bigger frames', '']
    if not rows:
        lines += ['The sweep produced no result; see the logs in `runs/video/`.', '']
    else:
        eval_dir = os.path.join(args.out, 'eval')
        os.makedirs(eval_dir, exist_ok=True)
        write_frames_report(rows, models, protocol, eval_dir)
        df = pd.DataFrame(rows)
        plot_frames_scaling(df, png, f'Synthetic videos ({int(df["n"].max())} val clips, 8 classes): zero-shot top-1')
        heatmap_grid(df, heat)
        tf, ts = int(recipe['num_frames']), int(recipe['img_size'])
        val = {r['label']: r['val_top1'] for r in ok}
        n = int(df['n'].max())
        lines += [
            f'Every 3D position encoding that builds in this checkout, trained with one recipe at {tf} frames of '
            f'{ts} px on the synthetic video set (`zoo make-videos`: 8 classes that need time to tell apart: '
            f'direction of motion, order of appearance, speed; {DATA_ARGS["num_per_class"]} training clips per '
            f'class), then evaluated zero-shot on its {n} validation clips at {len(args.frames)} clip lengths and '
            f'{len(args.sizes)} frame sizes. More frames = denser sampling of the same {DATA_ARGS["frames"]}-frame '
            'clip (uniform segment midpoints), so a model sees the same motion over more tubelets. Chance is 12.5 %.',
            '',
            f'### Top-1 (%) against frames, at the training size ({ts} px)', '',
            pivot_markdown(df[df['size'] == ts], 'label', 'frames', 'top1', 'frames', {m['label']: tf for m in models}),
            '',
            f'### Top-1 (%) against frame size, at the training length ({tf} frames)', '',
            pivot_markdown(df[df['frames'] == tf], 'label', 'size', 'top1', 'px', {m['label']: ts for m in models}), '',
            'Bold: best per column. ◦: training value.', '',
            '![top-1 against frames and size](video.png)', '',
            '![frames x size heatmaps](video_heatmaps.png)', '',
            'Validation top-1 at the training clip, from training (last epoch): ' +
            ', '.join(f'{k} {v:.1f}' for k, v in val.items()) + '.', '']
        lines += noise_section(df, ok)
        lines += ['Per-model frames x size tables: `runs/video/eval/report.md` (rewritten by the command below).', '']
    lines += ['## Recipe', '',
              'One recipe for every PE; `configs/video_<pe>.yaml` differ only in `model`. A tiny video ViT '
              f'(tubelets of 2 frames x {mk.get("patch_size")} x {mk.get("patch_size")} px, width '
              f'{mk.get("embed_dim")}, {mk.get("depth")} blocks, {mk.get("num_heads")} heads), mean pooling, no '
              'class token.', '',
              '```yaml', recipe_txt, '```', '',
              '## How it was made', '',
              '```bash', 'python benchmarks/video_sweep.py', '```', '',
              'which writes the data set and then runs, per PE and seed,', '',
              '```bash',
              f'zoo train --config configs/video_<pe>.yaml --seed <s> --output runs/video/<pe>_s<s> --threads '
              f'{args.threads}',
              f'zoo eval-frames --run runs/video/<pe>_s<s> --data-dir {args.data} --frames '
              f'{" ".join(map(str, args.frames))} --sizes {" ".join(map(str, args.sizes))} --frame-cache '
              f'{args.frame_cache} --output runs/video/<pe>_s<s>/eval',
              '```', '',
              f'Hardware: {_cpu()} ({os.cpu_count()} cores, shared with other jobs while this ran), PyTorch '
              f'{_torch_version()} on CPU, {args.jobs} runs at a time with {args.threads} thread(s) each. Wall time of '
              f'the whole sweep: {wall_s / 60:.0f} min; per run (training + evaluation):', '',
              '| run | status | minutes |', '|---|---|---|']
    lines += [f'| {r["label"]} | {r["status"]} | {r["seconds"] / 60:.1f} |' for r in runs]
    if skipped:
        lines += ['', '## Not included', '']
        lines += [f'- `{pe}`: does not build with the shared recipe in this checkout: {reason}'
                  for pe, reason in skipped.items()]
    if rows:
        lines += ['', '## Protocol', '']
        with open(os.path.join(args.out, 'eval', 'report.md')) as f:
            lines += [f.read().split('## Protocol', 1)[1].strip()]
    with open(md_path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    log(f'wrote {md_path}, {png} and {heat}')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--data', default='data/synthetic-videos', help='the synthetic set (written if missing)')
    p.add_argument('--configs', default='configs/video_*.yaml')
    p.add_argument('--out', default='runs/video', help='run dirs and logs')
    p.add_argument('--docs', default='docs/results', help='where video.md and its figures go')
    p.add_argument('--frames', type=int, nargs='+', default=[4, 8, 16, 32])
    p.add_argument('--sizes', type=int, nargs='+', default=[24, 32, 40, 48, 64])
    p.add_argument('--noise-pes', nargs='+', default=['sincos', 'rope3d'], help='PEs trained with a second seed')
    p.add_argument('--only', nargs='+', default=None, help='restrict to these PEs')
    p.add_argument('--jobs', type=int, default=2, help='runs at a time')
    p.add_argument('--threads', type=int, default=1, help='torch threads per run')
    p.add_argument('--run-timeout', type=float, default=1800, help='seconds before one run is abandoned')
    p.add_argument('--train-args', default='', help='extra zoo train flags (smoke tests: "--epochs 1 '
                                                    '--max-train-per-class 8")')
    args = p.parse_args()
    os.chdir(ROOT)
    t0 = time.time()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY='PASSIVE', PYTHONUNBUFFERED='1')
    make_data(args.data, env)
    args.frame_cache = os.path.join(args.out, 'frame-cache')
    configs = load_configs(args.configs)
    if args.only:
        configs = {pe: c for pe, c in configs.items() if pe in args.only}
    os.makedirs(args.out, exist_ok=True)
    pending, skipped, results = dict(configs), {}, []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        while pending:  # PEs that do not build yet are checked again when the queue runs dry
            failures = build_failures(pending)
            ready = [pe for pe in pending if failures[pe] is None]
            skipped = {pe: failures[pe] for pe in pending if failures[pe] is not None}
            for pe, reason in skipped.items():
                log(f'not buildable now: {pe}: {reason}')
            if not ready:
                break
            ready = [pe for pe in args.noise_pes if pe in ready] + [pe for pe in ready if pe not in args.noise_pes]
            runs = []
            for pe in ready:
                seeds = [0, 1] if pe in args.noise_pes else [0]
                for seed in seeds:
                    label = f'{pe} (seed {seed})' if len(seeds) > 1 else pe
                    runs.append(dict(pe=pe, seed=seed, label=label, name=f'{pe}_s{seed}',
                                     config=configs[pe]['_path'], output=os.path.join(args.out, f'{pe}_s{seed}')))
                del pending[pe]
            log(f'{len(runs)} runs ({", ".join(r["name"] for r in runs)}), {args.jobs} at a time')
            results += list(pool.map(lambda r: job(r, args, env), runs))
    wall_path = os.path.join(args.out, 'sweep_wall.json')
    wall_s = time.time() - t0
    if any(r.get('ran', True) for r in results) or not os.path.isfile(wall_path):
        with open(wall_path, 'w') as f:
            json.dump(dict(wall_s=wall_s), f)
    else:  # nothing left to run: the docs keep the wall time of the session that made the results
        with open(wall_path) as f:
            wall_s = json.load(f)['wall_s']
    write_docs(results, skipped, args, configs, wall_s)
    log(f'sweep finished in {(time.time() - t0) / 60:.1f} min')


if __name__ == '__main__':
    main()
