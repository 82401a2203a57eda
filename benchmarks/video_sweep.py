"""Video position-encoding sweep: 3D PEs trained at 8 frames of 32 px on a diagnostic task (ranking, the default:
clips that only the order or the time of tubelet-aligned events separates; steps: a shape stepping one way per
block), evaluated zero-shot over frames (at the training size) and over frame sizes (at the training frame count);
writes docs/results/video.md (steps: video_steps.md), its CSV and figures.

    python benchmarks/video_sweep.py            # from the repository root; several hours on 2 busy CPU cores
    python benchmarks/video_sweep.py --report-only   # the page from the runs finished so far (marked partial)
    python benchmarks/video_sweep.py --task steps    # the harder steps task (docs/results/video_steps.md)

``--task steps`` runs the same steps on the harder task (``zoo make-videos --task steps``: one shape jumps one step
per tubelet-aligned block, left / right / up / down) with the same recipe trained for 40 epochs (10,240 updates, the
budget ``../shared/notes/video-learning.md`` measured for the fastest PE) and reports it for the PEs that learn the
ranking task fastest plus NoPE (``--only`` for others), into ``data/video-steps``, ``runs/video-steps`` and
``docs/results/video_steps*``; it is reported, not a gate.

Steps (each a plain ``zoo`` command, logged to ``runs/video/<run>.log``):

1. ``zoo make-videos --task ranking --output data/video-ranking --num-per-class 1024 --val-per-class 256 --frames 32
   --size 32 --seed 0 --blocks 4`` unless that set is already there (``meta.json`` records the arguments);
2. for every ``configs/video_<pe>.yaml`` whose model builds (the files differ only in ``model``):
   ``zoo train --config configs/video_<pe>.yaml --seed S --output runs/video/<pe>_s<S>`` (clips rendered in memory,
   ``--sched hold_cosine``), seed 0 for all and seed 1 as well for the ``--noise-pes``; the noise PEs and NoPE run
   first, so the acceptance checks are possible early;
3. for every run: ``zoo eval-frames`` over ``--frames`` at the training size and over ``--sizes`` at the training
   frame count (``--cross``: the full grid), on the set's MP4 validation files (decoded frames cached in
   ``runs/video/frame-cache``, so every model sees the same clips);
4. merge the rows into ``docs/results/video_results.csv`` and write the page: the acceptance checks (NoPE near the
   50 % a model without positions can reach, every other PE >= 90 % at the training clip, else "did not learn at
   this budget" with its training curve and left out of the ranking), and per cell off the training clip which
   differences hold beyond twice the largest seed spread of that cell.

Finished runs are skipped and interrupted ones resumed when the script is started again with the same command.
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

from zoo.runs.options import DefaultsOnceHelpFormatter  # no '(default: None)' after own texts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar10_sweep import (_cpu, _torch_version, archive_run, finished_run, log,  # noqa: E402
                           restore_run, restored, run_logged)  # the shared sweep helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_ARGS = dict(task='ranking', num_per_class=1024, val_per_class=256, frames=32, size=32, seed=0, blocks=4)
#: Per ``--task``: the set's arguments, default paths (data, runs, archive, page name), extra ``zoo train`` flags,
#: the PEs run (``None``: every config) and the PEs given a second seed.
TASK_SETUPS = {
    'ranking': dict(data_args=DATA_ARGS, data='data/video-ranking', out='runs/video', page='video',
                    archive='docs/results/video_runs', train_args='', only=None,
                    noise_pes=['rope3d', 'sincos', 'rope_mixed']),
    'steps': dict(data_args=dict(DATA_ARGS, task='steps'), data='data/video-steps', out='runs/video-steps',
                  page='video_steps', archive='docs/results/video_steps_runs', train_args='--epochs 40',
                  only=['nope', 'rope3d', 'rope_mixed', 'gta', 'liere'], noise_pes=['rope3d', 'rope_mixed']),
}
# acceptance (issue 19): a learned PE reaches LEARNED % at the training clip; NoPE stays within NOPE_MARGIN points of
# the 50 % a model without positions can reach on the ranking task (it tells the pairs apart, not the order / time)
LEARNED, NOPE_LEVEL, NOPE_MARGIN = 90., 50., 5.
CSV_FIELDS = ['label', 'pe', 'train_frames', 'train_size', 'frames', 'size', 'top1', 'chance']


def make_data(path: str, env: dict, data_args: dict = DATA_ARGS) -> None:
    """Write the synthetic set (``zoo make-videos`` with ``data_args``) unless ``path/meta.json`` records the same
    arguments."""
    meta = os.path.join(path, 'meta.json')
    if os.path.isfile(meta):
        try:
            with open(meta) as f:
                m = json.load(f)
            have = dict(task=m.get('task', 'basic'), num_per_class=m['num_per_class']['train'],
                        val_per_class=m['num_per_class']['val'], frames=m['num_frames'], size=m['size'],
                        seed=m['seed'], blocks=m.get('blocks'))
        except (ValueError, KeyError, TypeError) as e:
            raise SystemExit(f'{path} holds another kind of data set ({meta} is not a zoo make-videos record: '
                             f'{type(e).__name__}: {e}); pass another --data') from None
        if have == data_args:
            log(f'data: {path} already present')
            return
        raise SystemExit(f'{path} holds another synthetic set ({have}); remove it or pass another --data')
    cmd = [sys.executable, '-m', 'zoo.cli', 'make-videos', '--output', path]
    if os.path.isdir(path) and os.listdir(path):
        if not _cut_set(path):
            raise SystemExit(f'{path} is not empty and is not a synthetic set cut short (it holds '
                             f'{", ".join(sorted(os.listdir(path))[:5])}); pass an empty or new --data')
        cmd.append('--overwrite')  # a set cut short (no meta.json, written last): make it again
        log(f'data: {path} has no meta.json (a cut run); writing it again')
    for k, v in data_args.items():
        cmd += [f'--{k.replace("_", "-")}', str(v)]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if run_logged(cmd, path.rstrip('/') + '.log', env, 3600) != 0:
        raise SystemExit(f'zoo make-videos failed; see {path.rstrip("/")}.log')
    log(f'data: wrote {path}')


def _cut_set(path: str) -> bool:
    """Whether ``path`` holds only what an interrupted ``zoo make-videos`` of a diagnostic task leaves: ``train/``
    and ``val/`` whose folders are that task's classes (so another data set is never overwritten)."""
    from zoo.datasets.diagnostic_video import TASKS
    classes = {c for task in TASKS.values() for c in task}
    for entry in os.listdir(path):
        sub = os.path.join(path, entry)
        if entry not in ('train', 'val') or not os.path.isdir(sub):
            return False
        if not set(os.listdir(sub)) <= classes:
            return False
    return True


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
        m = timm.create_model(cfg['model'], img_size=cfg['img_size'], num_frames=cfg['num_frames'], num_classes=4,
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


def _eval_plan(args, tf: int, ts: int) -> Dict[str, tuple]:
    """``{eval dir name: (frames, sizes)}``: the frames sweep at the training size and the size sweep at the training
    frame count, or (``--cross``) the full grid."""
    if args.cross:
        return {'eval': (args.frames, args.sizes)}
    return {'eval_frames': (args.frames, [ts]), 'eval_sizes': ([tf], args.sizes)}


def fingerprint_parts(run: dict, args) -> dict:
    """What an archived run must share with ``run`` to stand for it: the recipe file's content, the seed, the data
    set's arguments, the extra training flags and the evaluation plan."""
    with open(os.path.join(ROOT, run['config'])) as f:
        recipe = f.read()
    return dict(recipe=recipe, config=run['config'], seed=run['seed'], data=args.data_args, train_args=args.train_args,
                eval=_eval_plan(args, run['train_frames'], run['train_size']))


def archive_files(run: dict, args) -> List[str]:
    """The small files of a finished run that the page needs (no checkpoints)."""
    files = ['metrics.csv', 'sweep_timing.json', 'release.json']
    if os.path.isfile(os.path.join(run['output'], 'train_classes.csv')):
        files.append('train_classes.csv')
    return files + [f'{name}/results.json' for name in _eval_plan(args, run['train_frames'], run['train_size'])]


def release_info(out: str) -> dict:
    """``{released_epoch, released_at, total_updates?}`` of the run's hold_cosine schedule, from ``release.json``
    (archived runs) or the last checkpoint; ``{}`` when neither is there."""
    path = os.path.join(out, 'release.json')
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)
    last = os.path.join(out, 'checkpoint-last.pth')
    if not os.path.isfile(last):
        return {}
    import torch
    ck = torch.load(last, map_location='cpu', weights_only=True)
    sched = ck.get('scheduler') or {}
    a = (ck.get('meta') or {}).get('args') or {}
    return dict(released_epoch=sched.get('released_epoch'), released_at=sched.get('released_at'),
                hold_release_by=a.get('hold_release_by'), epochs=a.get('epochs'))


def job(run: dict, args, env: dict) -> dict:
    """Train one run (or resume / skip it, or restore it from the committed archive), then sweep it over frames and
    sizes, and archive its result files."""
    out, log_path = run['output'], run['output'] + '.log'
    t0 = time.time()
    last = os.path.join(out, 'checkpoint-last.pth')
    zoo = [sys.executable, '-m', 'zoo.cli']
    parts = fingerprint_parts(run, args)
    if restore_run(out, args.archive, parts):
        metrics, seconds = restored(run, args.archive)
        return dict(run, status='ok', seconds=seconds, val_top1=float(metrics['val_top1'].iloc[-1]),
                    ran=False)
    done = finished_run(out)
    ran = False
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
    for name, (frames, sizes) in _eval_plan(args, run['train_frames'], run['train_size']).items():
        eval_dir = os.path.join(out, name)
        if os.path.isfile(os.path.join(eval_dir, 'results.json')) and done:
            continue
        ran = True
        cmd = [*zoo, 'eval-frames', '--run', out, '--label', run['label'], '--data-dir', args.data,
               '--frames', *map(str, frames), '--sizes', *map(str, sizes), '--batch-size', '32',
               '--workers', '0', '--threads', str(args.threads), '--frame-cache', args.frame_cache,
               '--output', eval_dir, '--overwrite', '--no-progress']
        if run_logged(cmd, log_path, env, args.run_timeout) != 0:
            log(f'FAILED evaluating {run["name"]} (see {log_path})')
            return dict(run, status='eval failed', seconds=time.time() - t0)
    timing_path = os.path.join(out, 'sweep_timing.json')
    if os.path.isfile(timing_path) and not ran:
        with open(timing_path) as f:
            timing = json.load(f)
    else:
        timing = dict(train_s=train_s, total_s=time.time() - t0)
        with open(timing_path, 'w') as f:
            json.dump(timing, f)
    release = release_info(out)  # before the file exists: release_info prefers release.json
    with open(os.path.join(out, 'release.json'), 'w') as f:
        json.dump(release, f)
    archive_run(out, args.archive, parts, archive_files(run, args))
    metrics = pd.read_csv(os.path.join(out, 'metrics.csv'))
    log(f'done {run["name"]}: val top-1 {metrics["val_top1"].iloc[-1]:.2f} ({timing["total_s"] / 60:.1f} min)')
    return dict(run, status='ok', seconds=timing['total_s'], val_top1=float(metrics['val_top1'].iloc[-1]), ran=ran)


def collect(run: dict, args) -> Optional[dict]:
    """The finished evaluation rows, results metadata and training curve of ``run``, or ``None``."""
    rows, models, protocol = [], [], None
    for name in _eval_plan(args, run['train_frames'], run['train_size']):
        path = os.path.join(run['output'], name, 'results.json')
        if not os.path.isfile(path):
            return None
        with open(path) as f:
            res = json.load(f)
        if not (res.get('status') or {}).get('complete'):  # eval-frames writes the set after every cell
            return None
        rows += res['results']
        models = models or res['models']
        protocol = protocol or res['protocol']
    seen, unique = set(), []
    for r in rows:  # the training clip is in both sweeps
        key = (r['frames'], r['size'])
        if key not in seen:
            seen.add(key)
            unique.append(r)
    curve = pd.read_csv(os.path.join(run['output'], 'metrics.csv'))
    return dict(rows=unique, models=models, protocol=protocol, curve=curve)


def result_rows(done: List[dict], chance: float) -> pd.DataFrame:
    """The rows of ``video_results.csv`` (:data:`CSV_FIELDS`), one per (run, frames, size)."""
    out = []
    for r in done:
        for row in r['rows']:
            out.append(dict(label=r['label'], pe=r['pe'], train_frames=row['train_frames'],
                            train_size=row['train_size'], frames=row['frames'], size=row['size'],
                            top1=round(float(row['top1']), 2), chance=round(chance, 2)))
    return pd.DataFrame(out, columns=CSV_FIELDS)


def acceptance(done: List[dict], df: pd.DataFrame, tf: int, ts: int, task: str = 'ranking') -> Dict[str, dict]:
    """Per run label: ``top1`` at the training clip, ``learned`` (>= :data:`LEARNED`; NoPE: the expected failure,
    within :data:`NOPE_MARGIN` of :data:`NOPE_LEVEL` on the ranking task, at most that far above it on the steps task,
    where a model without positions may not even tell the axes apart) and ``ok`` (the run meets what its PE must
    show)."""
    at = df[(df['frames'] == tf) & (df['size'] == ts)].set_index('label')['top1']
    out = {}
    for r in done:
        v = float(at.get(r['label'], float('nan')))
        if r['pe'] == 'nope':
            ok = abs(v - NOPE_LEVEL) <= NOPE_MARGIN if task == 'ranking' else v <= NOPE_LEVEL + NOPE_MARGIN
            out[r['label']] = dict(top1=v, learned=False, ok=ok)
        else:
            out[r['label']] = dict(top1=v, learned=v >= LEARNED, ok=v >= LEARNED)
    return out


def noise_lines(df: pd.DataFrame, done: List[dict], ranked: List[str], tf: int, ts: int) -> List[str]:
    """Seed spread per cell (the largest |seed 0 - seed 1| of any PE there with both seeds among ``done``: the sweep
    passes the learned runs, so a seed that never left the plateau does not pass for noise) and, per cell off the
    training clip, the differences between ranked (learned, seed-0) models that exceed twice that spread."""
    lines = ['## What holds beyond seed noise', '']
    pairs: Dict[str, Dict[int, str]] = {}
    for r in done:
        pairs.setdefault(r['pe'], {})[r['seed']] = r['label']
    pairs = {pe: s for pe, s in pairs.items() if 0 in s and 1 in s}
    if not pairs:
        return lines + ['No PE has learned with both seeds yet, so the seed noise is not measured and no difference '
                        'is claimed.', '']
    top1 = {(r['label'], int(r['frames']), int(r['size'])): float(r['top1']) for _, r in df.iterrows()}
    cells = sorted({(t, s) for _, t, s in top1}, key=lambda c: (c[1] != ts, c))
    spread = {}
    for c in cells:
        d = [abs(top1[(p[0], *c)] - top1[(p[1], *c)]) for p in pairs.values()
             if (p[0], *c) in top1 and (p[1], *c) in top1]
        spread[c] = max(d) if d else float('nan')
    lines += [f'Seeds 0 and 1 of {", ".join(f"`{p}`" for p in sorted(pairs))}, the PEs whose two seeds both learned '
              '(same data and recipe; initialisation, data order and frame offsets differ; a seed that did not learn '
              'is a failure to learn, not seed noise, and is listed under Acceptance). The bar of a cell is twice the '
              'largest |seed 0 - seed 1| of any '
              'PE in that cell; a difference between two ranked models (seed 0) counts only above it.', '',
              '| cell | seed spread (points) | bar | differences beyond the bar |', '|---|---|---|---|']
    seed0 = [lab for lab in ranked]
    for c in cells:
        where = f'{c[0]} frames x {c[1]} px' + (' (training clip)' if c == (tf, ts) else '')
        bar = 2 * spread[c]
        held = []
        vals = sorted(((top1[(lab, *c)], lab) for lab in seed0 if (lab, *c) in top1), reverse=True)
        for i, (va, a) in enumerate(vals):
            for vb, b in vals[i + 1:]:
                if va - vb > bar:
                    held.append(f'{a} > {b} ({va - vb:+.1f})')
        txt = '; '.join(held[:8]) + (f'; and {len(held) - 8} more pairs' if len(held) > 8 else '') if held else \
            ('none' if len(vals) > 1 else 'fewer than two ranked models')
        lines.append(f'| {where} | {spread[c]:.1f} | {bar:.1f} | {txt} |')
    return lines + ['']


def curves_plot(done: List[dict], path: str, chance: float) -> None:
    """Training curves (train top-1 per epoch, solid; validation top-1, dashed) of every finished run."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    colors = plt.get_cmap('tab20').colors
    for i, r in enumerate(done):
        c, cur = colors[i % len(colors)], r['curve']
        if 'train_top1' in cur:
            ax.plot(cur['epoch'], cur['train_top1'], color=c, lw=1.4, label=f'{r["label"]} train')
        ax.plot(cur['epoch'], cur['val_top1'], color=c, lw=1.0, ls='--')
    ax.axhline(chance, color='grey', lw=0.8, ls=':')
    ax.axhline(NOPE_LEVEL, color='grey', lw=0.8, ls='-.')
    ax.set_ylim(0, 100)
    ax.set_xlabel('epoch (256 updates each)')
    ax.set_ylabel('top-1 (%)')
    ax.set_title(f'Training curves: train top-1 (solid), val top-1 (dashed); chance {chance:.0f} % (dotted), '
                 f'no-position level {NOPE_LEVEL:.0f} % (dash-dot)', fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1.0), borderaxespad=0.)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_docs(runs: List[dict], skipped: Dict[str, str], args, configs: Dict[str, dict],
               wall_s: Optional[float]) -> None:
    """Write ``<page>.md``, ``<page>_results.csv``, ``<page>.png`` and ``<page>_curves.png`` (``video`` for the
    ranking task, ``video_steps`` for the steps task) from the runs whose evaluations finished; the page says
    **partial** and lists the others when any is missing."""
    from zoo.sweep.report import pivot_markdown, plot_frames_scaling
    recipe = next(iter(configs.values()))
    tf, ts = int(recipe['num_frames']), int(recipe['img_size'])
    done, missing = [], []
    for r in runs:
        got = collect(r, args)
        (done if got is not None else missing).append(dict(r, **got) if got is not None else r)
    os.makedirs(args.docs, exist_ok=True)
    page, data_args, steps = args.page, args.data_args, args.task == 'steps'
    md_path, csv_path = os.path.join(args.docs, f'{page}.md'), os.path.join(args.docs, f'{page}_results.csv')
    png, curves = os.path.join(args.docs, f'{page}.png'), os.path.join(args.docs, f'{page}_curves.png')
    mk = recipe.get('model_kwargs') or {}
    recipe_txt = yaml.safe_dump({k: v for k, v in recipe.items() if k not in ('model', '_path')}, sort_keys=False,
                                default_flow_style=None).strip()
    num_classes = 4
    chance = 100. / num_classes
    partial = bool(missing)
    title = ('# Steps task: 3D position encodings on where and in which order a shape moves' if steps else
             '# Ranking task: 3D position encodings on the order and time of events')
    lines = [title + (' (partial)' if partial else ''), '']
    command = args.command
    log_file = f'{args.out}/sweep.log'
    if partial:
        lines += [f'**Partial.** {len(done)} of {len(runs)} runs had finished when this page was written; the sweep '
                  f'continues with the same command (`nohup nice {command} > {log_file} 2>&1 &`, finished '
                  'runs are skipped, interrupted ones resumed), and `' + command +
                  ' --report-only` rewrites this page from what has finished. '
                  'Missing: ' +
                  ', '.join(f'`{r["name"]}`' for r in missing) + '. Nothing below is a ranking of the missing '
                  'PEs.', '']
    if steps:
        lines += [
            f'The harder diagnostic task (issue 19: reported for the PEs that learn it, not a gate): the video '
            f'sweep\'s recipe at {tf} frames of {ts} px, trained for {_epochs_text(args.train_args)}, on the steps '
            'task (`zoo '
            f'make-videos --task steps`: {data_args["num_per_class"]} training and {data_args["val_per_class"]} '
            f'validation clips per class, 4 classes). One shape jumps one step per tubelet-aligned block, '
            f'{data_args["blocks"]} positions along a line of 45-60 % of the frame, to the left (`step_left`), right, '
            'up or down; nothing moves inside a 2-frame tubelet, so the direction is not visible to the patch '
            'embedding. Each mirror pair (left / right, up / down) shows the same shape at the same places, only in '
            'the opposite order: a model without positions sees the same bag of tokens for both and can at best '
            f'tell the axes apart: {NOPE_LEVEL:.0f} % (chance {chance:.0f} %). ' +
            (f'The PEs run: {", ".join(args.only)} (`--only`). ' if args.only_given else
             'The PEs run are the fastest learners of the ranking task (`docs/results/video.md`) and NoPE (`--only` '
             'runs others). ') + 'Evaluated zero-shot on '
            'the validation files over clip lengths at the training size and over frame sizes at the training frame '
            'count, as the ranking task.', '']
    else:
        lines += [
        f'Every 3D position encoding that builds in this checkout, trained with one recipe at {tf} frames of {ts} px '
        f'on the ranking task (`zoo make-videos --task ranking`: {data_args["num_per_class"]} training and '
        f'{data_args["val_per_class"]} validation clips per class, 4 classes). In every clip a red and a blue square '
        'are each shown for exactly one tubelet-aligned block (red first: `flash_red_blue`, blue first: '
        '`flash_blue_red`), or one square is shown in the first block (`flash_early`) or the last (`flash_late`). '
        'Nothing moves inside a 2-frame tubelet and both colours are on screen for the same time, so the classes of '
        'each pair differ only in *when*: a model without positions sees the same bag of tokens for both and can '
        f'at best tell the pairs apart: {NOPE_LEVEL:.0f} % (chance {chance:.0f} %). Evaluated zero-shot on the '
        f'validation files over clip lengths (more frames = denser sampling of the same {data_args["frames"]}-frame '
        'clip, uniform segment midpoints) at the training size, and over frame sizes at the training frame count.',
        '']
    running = [r for r in missing if os.path.isfile(os.path.join(r['output'], 'metrics.csv'))]
    if running:
        lines += ['Runs still training or being evaluated (`metrics.csv` so far; not results):', '',
                  '| run | epochs done | train top-1 per epoch (%) | val top-1 per epoch (%) |', '|---|---|---|---|']
        for r in running:
            cur = pd.read_csv(os.path.join(r['output'], 'metrics.csv'))
            tr = ' '.join(f'{v:.0f}' for v in cur['train_top1']) if 'train_top1' in cur else 'n/a'
            lines.append(f'| {r["label"]} | {len(cur)} | {tr} | {" ".join(f"{v:.0f}" for v in cur["val_top1"])} |')
        lines.append('')
    df = result_rows(done, chance)
    if done or not os.path.isfile(csv_path):
        df.to_csv(csv_path, index=False)  # the rows of the finished runs (a header only before the first)
    if not done:
        lines += [f'No run has finished its evaluation yet, so there are no results; see the logs in `{args.out}/`.',
                  '']
    else:
        acc = acceptance(done, df, tf, ts, args.task)
        learned = [r for r in done if acc[r['label']]['learned']]
        # ranked: seed 0 of every PE whose finished runs all learned
        failed_pes = {r['pe'] for r in done if not acc[r['label']]['learned']}
        ranked = [r['label'] for r in learned if r['seed'] == 0 and r['pe'] not in failed_pes]
        not_learned = [r for r in done if r['pe'] != 'nope' and not acc[r['label']]['learned']]
        nope = [r for r in done if r['pe'] == 'nope']
        lines += ['## Acceptance', '']
        if nope:
            lines += ['- NoPE at the training clip: ' + ', '.join(
                f'{r["label"]} {acc[r["label"]]["top1"]:.1f} %' for r in nope) +
                (f' (must be at most {NOPE_LEVEL + NOPE_MARGIN:.0f} %, the no-position level plus '
                 f'{NOPE_MARGIN:.0f} points: ' if steps else
                 f' (must be within {NOPE_MARGIN:.0f} points of {NOPE_LEVEL:.0f} %: ') +
                ('met' if all(acc[r['label']]['ok'] for r in nope) else '**not met**') + ').']
            for r in nope:
                path = os.path.join(r['output'], 'train_classes.csv')
                if os.path.isfile(path):
                    per = pd.read_csv(path)
                    per = per[per['epoch'] == per['epoch'].max()]
                    lines += ['  Its training top-1 per class in the last epoch: ' + ', '.join(
                        f'`{c}` {v:.1f} %' for c, v in zip(per['outcome'], per['top1'])) +
                        (' (50 % = guessing within a mirror pair: at best it tells the axes apart, never the '
                         'direction).' if steps else
                         ' (50 % = guessing within a pair: it tells the pairs apart, never the order or the time).')]
        else:
            lines += ['- NoPE: not finished yet, so the check that the task needs positions is still open.']
        lines += [f'- Learned (>= {LEARNED:.0f} % at the training clip; ranked below, seed 0): ' +
                  (', '.join(f'{r["label"]} {acc[r["label"]]["top1"]:.1f} %' for r in learned) or 'none yet') + '.']
        lines += ['- **Did not learn at this budget** (below {:.0f} % at the training clip; shown, not ranked): '
                  .format(LEARNED) + (', '.join(f'{r["label"]} {acc[r["label"]]["top1"]:.1f} %'
                                                 for r in not_learned) or 'none') + '.']
        pairs = {}
        for r in done:
            pairs.setdefault(r['pe'], set()).add(r['seed'])
        two = sorted(pe for pe, seeds in pairs.items() if {0, 1} <= seeds)
        lines += [f'- Two seeds finished: {", ".join(f"`{p}`" for p in two) or "none yet"} (the issue asks for at '
                  'least two PEs).', '']
        lines += ['Training curves of every finished run (train top-1 from the training forward passes, '
                  '`metrics.csv`; per-class curves in each run\'s `train_classes.csv`):', '',
                  f'![training curves]({page}_curves.png)', '',
                  '| run | train top-1 per epoch (%) | LR decay started after epoch |', '|---|---|---|']
        for r in done:
            cur = r['curve']
            tr = ' '.join(f'{v:.0f}' for v in cur['train_top1']) if 'train_top1' in cur else 'n/a'
            info = release_info(r['output'])
            rel = info.get('released_epoch')
            by = info.get('hold_release_by')
            if rel is None and by is not None:
                rel = f'{by * info["epochs"]:g} (the cap `hold_release_by` {by}: `hold_until` not reached before)'
            lines.append(f'| {r["label"]} | {tr} | {rel if rel is not None else "never (held to the end)"} |')
        lines.append('')
        curves_plot(done, curves, chance)
        show = df.assign(label=[lab if acc[lab]['learned'] else f'{lab} (control: no positions)' if pe == 'nope'
                                else f'{lab} (not learned)' for lab, pe in zip(df['label'], df['pe'])])
        order = [lab for lab in ranked] + [lab for lab in dict.fromkeys(df['label']) if lab not in ranked]
        show = show.set_index(df['label']).loc[[lab for lab in order if lab in set(df['label'])]].reset_index(drop=True)
        lines += [f'## Top-1 (%) against frames, at the training size ({ts} px)', '',
                  pivot_markdown(show[show['size'] == ts], 'label', 'frames', 'top1', 'frames'), '',
                  f'## Top-1 (%) against frame size, at the training frame count ({tf} frames)', '',
                  pivot_markdown(show[show['frames'] == tf], 'label', 'size', 'top1', 'px'), '',
                  'Ranked (learned) models first, seed 0 and seed 1 rows as labelled; bold: best per column over all '
                  'rows shown. Chance is 25 %, a model without positions can reach 50 %. Below the training frame '
                  f'count ({tf}) one 2-frame tubelet spans two blocks, so ' +
                  ('it sees the shape at two places and the motion becomes local' if steps else
                   'both flashes can fall into one tubelet') +
                  f': part of the {"change" if steps else "loss"} there is the task, not the encoding; at other '
                  'sizes the '
                  + ('shape' if steps else 'squares') + ' and the patch grid are resized together.', '',
                  f'![top-1 against frames and size]({page}.png)', '']
        plot_frames_scaling(show, png, f'{"Steps" if steps else "Ranking"} task '
                                       f'({int(data_args["val_per_class"]) * num_classes} val clips, 4 classes): '
                                       'zero-shot top-1')
        lines += noise_lines(df, learned, ranked, tf, ts)  # seed noise from PEs with both seeds learned
    lines += ['## Recipe', '',
              'One recipe for every PE; `configs/video_<pe>.yaml` differ only in `model`. A tiny video ViT '
              f'(tubelets of 2 frames x {mk.get("patch_size")} x {mk.get("patch_size")} px, width '
              f'{mk.get("embed_dim")}, {mk.get("depth")} blocks, {mk.get("num_heads")} heads), mean pooling, no '
              'class token. The LR stays at its peak until an epoch\'s training top-1 reaches `hold_until`, then '
              'decays (`--sched hold_cosine`); training and validation clips during training are rendered in memory '
              '(`--in-memory-clips`), the zero-shot evaluation reads the MP4 files.' +
              (f' Training adds `{args.train_args}` to the shared file below' + (
                  ' (the steps classes need ~10k updates, `../shared/notes/video-learning.md`)' if steps else '') +
               '; `--data-dir` gives the task\'s set.' if args.train_args else ''), '',
              '```yaml', recipe_txt, '```', '',
              '## How it was made', '',
              '```bash', f'nohup nice {command} > {log_file} 2>&1 &', '```', '',
              'which writes the data set and then runs, per PE and seed,', '',
              '```bash',
              f'zoo make-videos --task {args.task} --output ' + args.data + ' ' + ' '.join(
                  f'--{k.replace("_", "-")} {v}' for k, v in data_args.items() if k != 'task'),
              f'zoo train --config configs/video_<pe>.yaml --seed <s> --output {args.out}/<pe>_s<s> --data-dir '
              f'{args.data} --threads {args.threads}' + (f' {args.train_args}' if args.train_args else '')]
    for name, (frames, sizes) in _eval_plan(args, tf, ts).items():
        lines.append(f'zoo eval-frames --run {args.out}/<pe>_s<s> --data-dir {args.data} --frames '
                     f'{" ".join(map(str, frames))} --sizes {" ".join(map(str, sizes))} --frame-cache '
                     f'{args.frame_cache} --output {args.out}/<pe>_s<s>/{name}')
    lines += ['```', '',
              f'Hardware: {_cpu()} ({os.cpu_count()} cores, shared with other jobs while this ran), PyTorch '
              f'{_torch_version()} on CPU, {args.jobs} runs at a time with {args.threads} thread(s) each.' +
              (f' Wall time of the sweep session that wrote this page: {wall_s / 60:.0f} min.' if wall_s else ''),
              '', '| run | status | minutes (training + evaluation, this session\'s part) |', '|---|---|---|']
    for r in runs:
        status = 'finished' if any(d['label'] == r['label'] for d in done) else r.get('status', 'not finished')
        mins = f'{r["seconds"] / 60:.1f}' if r.get('seconds') else ''
        if not mins:
            tp = os.path.join(r['output'], 'sweep_timing.json')
            if os.path.isfile(tp):
                with open(tp) as f:
                    mins = f'{json.load(f)["total_s"] / 60:.1f}'
        lines.append(f'| {r["label"]} | {status} | {mins} |')
    if skipped:
        lines += ['', '## Not included', '']
        lines += [f'- `{pe}`: does not build with the shared recipe in this checkout: {reason}'
                  for pe, reason in skipped.items()]
    if done:
        lines += ['', '## Protocol', '', f'- Rows: `{args.docs}/{page}_results.csv` (columns {", ".join(CSV_FIELDS)}), '
                  'exactly as this script writes them.',
                  f'- {done[0]["protocol"].get("sampling", "uniform")} frame sampling at evaluation; zero-shot: each '
                  'model is moved to every (frames, size) with `set_input_size`.']
    from zoo.datasets.files import write_text_atomic
    write_text_atomic(md_path, '\n'.join(lines) + '\n')
    log(f'wrote {md_path}' + (f', {csv_path}' if done else '') + (' (partial)' if partial else ''))


def plan_runs(configs: Dict[str, dict], ready: List[str], args) -> List[dict]:
    """Run order: seed 0 of the first noise PE, NoPE and the other noise PEs (the acceptance checks need them
    first), then the noise PEs' seed 1, then seed 0 of the others."""
    noise = [pe for pe in args.noise_pes if pe in ready]
    first = list(dict.fromkeys(noise[:1] + (['nope'] if 'nope' in ready else []) + noise[1:]))
    order = [(pe, 0) for pe in first] + [(pe, 1) for pe in args.noise_pes if pe in ready] + \
        [(pe, 0) for pe in ready if pe not in first]
    runs = []
    for pe, seed in order:
        two = pe in args.noise_pes
        label = f'{pe} (seed {seed})' if two else pe
        c = configs[pe]
        runs.append(dict(pe=pe, seed=seed, label=label, name=f'{pe}_s{seed}', config=c['_path'],
                         output=os.path.join(args.out, f'{pe}_s{seed}'), train_frames=int(c['num_frames']),
                         train_size=int(c['img_size'])))
    return runs


def _epochs_text(train_args: str) -> str:
    """``'N epochs'`` from the last ``--epochs N`` / ``--epochs=N`` of ``train_args`` (the one zoo train uses)."""
    words, epochs = shlex.split(train_args), None
    for i, w in enumerate(words):
        if w == '--epochs' and i + 1 < len(words):
            epochs = words[i + 1]
        elif w.startswith('--epochs='):
            epochs = w.split('=', 1)[1]
    if epochs is None:
        return 'the recipe\'s epochs'
    return f'{epochs} epoch' + ('' if epochs == '1' else 's')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=DefaultsOnceHelpFormatter)
    p.add_argument('--task', choices=sorted(TASK_SETUPS), default='ranking',
                   help='ranking: every PE, the ranked page (video.md); steps: the harder task for the PEs that learn '
                        'the ranking task fastest, 40 epochs (video_steps.md)')
    p.add_argument('--data', default=None, help='the task\'s set, written if missing (default: data/video-ranking, '
                                                'data/video-steps)')
    p.add_argument('--configs', default='configs/video_*.yaml')
    p.add_argument('--out', default=None, help='run dirs and logs (default: runs/video, runs/video-steps)')
    p.add_argument('--docs', default='docs/results', help='where <page>.md (video.md, video_steps.md), '
                                                          '<page>_results.csv and the figures go')
    p.add_argument('--archive', default=None,
                   help='(default: docs/results/video_runs, docs/results/video_steps_runs) committed copies of every '
                        'finished run\'s result files (no checkpoints), with a fingerprint '
                        'of recipe, seed, data and evaluation; a run whose archive matches is restored, not trained '
                        'again (runs/ is not kept from one machine to the next)')
    p.add_argument('--frames', type=int, nargs='+', default=[4, 8, 16, 32])
    p.add_argument('--sizes', type=int, nargs='+', default=[24, 32, 40, 48, 64])
    p.add_argument('--cross', action='store_true', help='evaluate the full frames x sizes grid (slower)')
    p.add_argument('--noise-pes', nargs='+', default=None,
                   help='PEs trained with a second seed (default, ranking: rope3d sincos rope_mixed, the last because '
                        'sincos did not learn at that budget; steps: rope3d rope_mixed)')
    p.add_argument('--only', nargs='+', default=None,
                   help='restrict to these PEs (default: every config for ranking; nope rope3d rope_mixed gta liere '
                        'for steps)')
    p.add_argument('--jobs', type=int, default=2, help='runs at a time')
    p.add_argument('--threads', type=int, default=1, help='torch threads per run')
    p.add_argument('--run-timeout', type=float, default=6 * 3600, help='seconds before one command is abandoned')
    p.add_argument('--train-args', default='', help='extra zoo train flags, after the task\'s own (steps: --epochs '
                                                    '40; smoke tests: "--epochs 1 --max-train-per-class 8")')
    p.add_argument('--report-only', action='store_true',
                   help='train and evaluate nothing: write the page from the runs finished so far')
    args = p.parse_args()
    # the page's command: this invocation without --report-only (the sweep that makes, or made, the runs)
    args.command = ' '.join(['python benchmarks/video_sweep.py'] +
                            [shlex.quote(a) for a in sys.argv[1:] if a != '--report-only'])
    setup = TASK_SETUPS[args.task]
    args.data = args.data or setup['data']
    args.out = args.out or setup['out']
    args.archive = args.archive or setup['archive']
    args.noise_pes = args.noise_pes if args.noise_pes is not None else setup['noise_pes']
    args.only_given = args.only is not None
    args.only = args.only if args.only is not None else setup['only']
    args.page, args.data_args = setup['page'], setup['data_args']
    args.train_args = ' '.join(a for a in (setup['train_args'], args.train_args) if a)  # the later --epochs wins
    os.chdir(ROOT)
    t0 = time.time()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY='PASSIVE', PYTHONUNBUFFERED='1')
    args.frame_cache = os.path.join(args.out, 'frame-cache')
    configs = load_configs(args.configs)
    if args.only:
        unknown = [pe for pe in args.only if pe not in configs]
        if unknown:
            raise SystemExit(f'--only {" ".join(unknown)}: no configs/video_<pe>.yaml for {", ".join(unknown)}; the '
                             f'PEs are {", ".join(configs)}')
        configs = {pe: c for pe, c in configs.items() if pe in args.only}
    if args.report_only:
        runs = plan_runs(configs, list(configs), args)
        for r in runs:  # runs finished on another machine come from the committed archive
            restore_run(r['output'], args.archive, fingerprint_parts(r, args))
        write_docs(runs, {}, args, configs, None)
        return
    make_data(args.data, env, args.data_args)
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
            runs = plan_runs(configs, ready, args)
            for pe in ready:
                del pending[pe]
            log(f'{len(runs)} runs ({", ".join(r["name"] for r in runs)}), {args.jobs} at a time')
            results += list(pool.map(lambda r: job(r, args, env), runs))
            write_docs(results, skipped, args, configs, time.time() - t0)  # a page after every batch of runs
    write_docs(results, skipped, args, configs, time.time() - t0)
    log(f'sweep finished in {(time.time() - t0) / 60:.1f} min')


if __name__ == '__main__':
    main()
