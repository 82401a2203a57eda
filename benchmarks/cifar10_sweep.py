"""CIFAR-10 position-encoding sweep: train every 2D PE with one recipe, evaluate across resolutions, write the docs.

    python benchmarks/cifar10_sweep.py            # from the repository root; ~1 h on 2 busy CPU cores

Steps (each one a plain ``zoo`` command, logged to ``runs/cifar10/<run>.log``):

1. extract ``../shared/data/cifar10-jpg.tar.gz`` (checked against its sha256) to ``data/cifar10`` unless present;
2. for every ``configs/cifar10_<pe>.yaml`` whose model builds (the files differ only in ``model``):
   ``zoo train --config configs/cifar10_<pe>.yaml --seed S --output runs/cifar10/<pe>_s<S>``, seed 0 for all and
   seed 1 as well for the ``--noise-pes`` (run-to-run noise);
3. for every run: ``zoo eval-resolution --run runs/cifar10/<pe>_s<S> --sizes 24 32 40 48 56 64 ...`` (0.75x-2x of
   the 32 px training size, multiples of the 8 px patch);
4. merge the per-run results into ``runs/cifar10/eval/`` (report.md, results.csv/json, scaling.png) and write
   ``docs/results/cifar10.md``, ``cifar10.png``, ``cifar10_heatmap.png`` and ``cifar10_results.csv``.

Jobs run ``--jobs`` at a time with ``--threads`` torch threads each (2 x 1 uses two cores without thread
oversubscription). Finished runs are skipped and interrupted ones resumed when the script is started again.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import subprocess
import shlex
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from glob import glob
from typing import Dict, List, Optional, Tuple

import pandas as pd
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARBALL_SHA256 = 'd34c68f61cca57aa9144c8f25bda427abb9921bd642d5857a2fc1a6b4416f965'


def log(msg: str) -> None:
    print(f'[{datetime.datetime.now():%H:%M:%S}] {msg}', flush=True)


def extract(tarball: str, dest: str) -> None:
    """Extract the CIFAR-10 JPEG tarball (``train/`` and ``test/`` at its top) to ``dest`` unless already there."""
    if os.path.isdir(os.path.join(dest, 'train')) and os.path.isdir(os.path.join(dest, 'test')):
        log(f'data: {dest} already present')
        return
    h = hashlib.sha256()
    with open(tarball, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    if h.hexdigest() != TARBALL_SHA256:
        raise SystemExit(f'{tarball}: sha256 {h.hexdigest()} differs from the documented {TARBALL_SHA256}')
    tmp = dest + '.partial'
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp, filter='data')
    os.makedirs(dest, exist_ok=True)
    for split in ('train', 'test'):
        os.replace(os.path.join(tmp, split), os.path.join(dest, split))
    shutil.rmtree(tmp)
    log(f'data: extracted {tarball} to {dest}')


def load_configs(pattern: str) -> Dict[str, dict]:
    """``{pe: config}`` for every config file; exits if they differ in anything but ``model``."""
    configs = {}
    for path in sorted(glob(pattern)):
        pe = os.path.basename(path)[len('cifar10_'):-len('.yaml')]
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
        m = timm.create_model(cfg['model'], img_size=cfg['img_size'], num_classes=10, **cfg['model_kwargs'])
        m(torch.zeros(2, 3, cfg['img_size'], cfg['img_size'])).sum().backward()
        out[cfg['model']] = None
    except Exception as e:
        out[cfg['model']] = f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""}'
print(json.dumps(out))
"""


def build_failures(configs: Dict[str, dict], strict: bool = False) -> Dict[str, Optional[str]]:
    """``{pe: None or reason}``: whether each config's model builds and runs a forward/backward now.

    Checked in a fresh process, so encodings that landed in the checkout while the sweep ran are seen. When that
    process itself dies, every PE gets its last error line, or, with ``strict``, a one-line ``SystemExit`` (a page
    must not call every PE unbuildable because the check crashed).
    """
    payload = json.dumps([dict(model=c['model'], img_size=c['img_size'], model_kwargs=c['model_kwargs'])
                          for c in configs.values()])
    proc = subprocess.run([sys.executable, '-c', _BUILD_CHECK, payload], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, OMP_NUM_THREADS='1'))
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ['build check crashed'])[-1]
        if strict:
            raise SystemExit(f'cifar10_sweep: the build check process died (exit {proc.returncode}: {reason}); '
                             'no page written; run it again or build the models by hand to see which one fails')
        return {pe: reason for pe in configs}
    by_model = json.loads(proc.stdout.strip().splitlines()[-1])
    return {pe: by_model[c['model']] for pe, c in configs.items()}


def run_logged(cmd: List[str], log_path: str, env: dict, timeout: float) -> int:
    """Run ``cmd`` with output appended to ``log_path``; returns the exit status (124 on timeout)."""
    with open(log_path, 'a') as f:
        f.write(f'$ {" ".join(cmd)}\n')
        f.flush()
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            f.write(f'timed out after {timeout:.0f} s\n')
            return 124


# --- results kept across machines ---------------------------------------------------------------------------------
# runs/ is not kept from one session's machine to the next, so a sweep that spans sessions copies the small result
# files of every finished run (never checkpoints) into a committed folder (docs/results/<sweep>_runs/<run>/) with a
# fingerprint of what made them; a later run of the same sweep on a fresh checkout restores them instead of training
# again, as long as the fingerprint (recipe file, seed, data and evaluation arguments) is the same.

def run_fingerprint(parts: dict) -> str:
    """SHA-256 (hex) of ``parts`` as canonical JSON: what must match for an archived run to count as this run."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _git_commit() -> str:
    try:
        return subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, cwd=ROOT,
                              timeout=30).stdout.strip() or 'unknown'
    except (OSError, subprocess.SubprocessError):
        return 'unknown'


def archive_run(out: str, archive: str, parts: dict, files: List[str]) -> None:
    """Copy ``files`` (paths relative to the run folder ``out``) to ``archive/<run>/`` with ``fingerprint.json``
    (``parts``, their hash, the commit and the date). Written to a temporary folder and renamed, so an archive is
    whole or absent. Raises ``FileNotFoundError`` naming a file the run lacks."""
    name = os.path.basename(os.path.normpath(out))
    dest = os.path.join(archive, name)
    tmp = dest + '.partial'
    shutil.rmtree(tmp, ignore_errors=True)
    for rel in files:
        src = os.path.join(out, rel)
        if not os.path.isfile(src):
            shutil.rmtree(tmp, ignore_errors=True)
            raise FileNotFoundError(f'cannot archive {out}: {rel} is missing')
        os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(tmp, rel))
    with open(os.path.join(tmp, 'fingerprint.json'), 'w') as f:
        json.dump(dict(fingerprint=run_fingerprint(parts), parts=parts, files=sorted(files), commit=_git_commit(),
                       sha256={rel: _sha256(os.path.join(tmp, rel)) for rel in files},
                       date=f'{datetime.datetime.now():%Y-%m-%d %H:%M}'), f, indent=1, sort_keys=True, default=str)
    old = dest + '.old'
    shutil.rmtree(old, ignore_errors=True)
    if os.path.isdir(dest):
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    return h.hexdigest()


def _bad_archive(path: str, problem: str) -> SystemExit:
    return SystemExit(f'{path}: {problem}; fix: restore the archive with `git checkout -- {os.path.dirname(path)}`, '
                      'or delete that folder to train the run again')


def archived_info(archive: str, name: str) -> Optional[dict]:
    """The ``fingerprint.json`` of ``archive/<name>`` or ``None`` when there is none.

    Raises:
        SystemExit: one line naming the file, when it is not a readable fingerprint (a cut or edited archive).
    """
    path = os.path.join(archive, name, 'fingerprint.json')
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad_archive(path, f'not a readable fingerprint ({type(e).__name__}: {e})') from None
    if not isinstance(info, dict) or not isinstance(info.get('files'), list) or 'fingerprint' not in info:
        raise _bad_archive(path, 'not a fingerprint file (no fingerprint / files)')
    return info


def _check_archived_file(path: str, digest: Optional[str]) -> None:
    """The archived file exists, is unchanged since archiving (its SHA-256) and, for JSON / CSV, parses with rows."""
    if not os.path.isfile(path):
        raise _bad_archive(path, 'listed in fingerprint.json but missing')
    if digest is not None and _sha256(path) != digest:
        raise _bad_archive(path, 'changed after the run was archived (its SHA-256 differs from fingerprint.json)')
    try:
        if path.endswith('.json'):
            with open(path) as f:
                json.load(f)
        elif path.endswith('.csv') and pd.read_csv(path).empty:
            raise ValueError('no rows')
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise _bad_archive(path, f'unreadable ({type(e).__name__}: {e})') from None


def restore_run(out: str, archive: str, parts: dict) -> bool:
    """Copy an archived run's files into ``out`` when its fingerprint matches ``parts``; returns whether it did.

    Every listed file is checked first (present, unchanged since archiving, parseable), then copied over whatever
    ``out`` holds: a stale local run folder never outranks the archive of the same run.

    Raises:
        SystemExit: one line naming the archive file that is missing, changed or unreadable.
    """
    name = os.path.basename(os.path.normpath(out))
    info = archived_info(archive, name)
    if info is None or info.get('fingerprint') != run_fingerprint(parts):
        return False
    digests = info.get('sha256') or {}
    for rel in info['files']:
        _check_archived_file(os.path.join(archive, name, rel), digests.get(rel))
    for rel in info['files']:
        dst = os.path.join(out, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.join(archive, name, rel), dst)
    return True


def restored(run: dict, archive: str) -> Tuple[pd.DataFrame, float]:
    """``(metrics, total seconds)`` of a run just restored from ``archive`` into ``run['output']``; logs where it came
    from (the commit and date it was trained at)."""
    out = run['output']
    metrics = pd.read_csv(os.path.join(out, 'metrics.csv'))
    with open(os.path.join(out, 'sweep_timing.json')) as f:
        seconds = float(json.load(f)['total_s'])
    info = archived_info(archive, run['name']) or {}
    log(f'restored {run["name"]} from {archive} (trained at {info.get("commit")}, {info.get("date")}): val top-1 '
        f'{metrics["val_top1"].iloc[-1]:.2f}')
    return metrics, seconds


def finished_run(out: str) -> bool:
    """Whether the run folder ``out`` holds a last checkpoint of its final epoch (the sweeps skip such runs)."""
    last = os.path.join(out, 'checkpoint-last.pth')
    if not os.path.isfile(last):
        return False
    import torch
    ck = torch.load(last, map_location='cpu', weights_only=True)
    return ck['epoch'] >= ck['meta']['args']['epochs']


def fingerprint_parts(run: dict, args) -> dict:
    """What an archived run must share with ``run`` to stand for it: the recipe file's content, the seed, the extra
    training flags and the evaluation plan."""
    with open(os.path.join(ROOT, run['config'])) as f:
        recipe = f.read()
    return dict(recipe=recipe, config=run['config'], seed=run['seed'], train_args=args.train_args,
                sizes=list(args.sizes), eval_per_class=args.eval_per_class)


def job(run: dict, args, env: dict) -> dict:
    """Train one run (or resume / skip it, or restore it from the committed archive ``--archive``), then evaluate it
    across sizes and archive its result files. Returns the run with its status."""
    out, log_path = run['output'], run['output'] + '.log'
    t0 = time.time()
    zoo = [sys.executable, '-m', 'zoo.cli']
    parts = fingerprint_parts(run, args)
    if restore_run(out, args.archive, parts):
        metrics, seconds = restored(run, args.archive)
        return dict(run, status='ok', seconds=seconds, val_top1=float(metrics['val_top1'].iloc[-1]),
                    epoch_s=float(_epoch_seconds(out, metrics).mean()))
    done = finished_run(out)
    if not done:
        cmd = [*zoo, 'train', '--config', run['config'], '--seed', str(run['seed']), '--output', out,
               '--data-dir', args.data, '--threads', str(args.threads), '--no-progress', *shlex.split(args.train_args)]
        if os.path.isfile(os.path.join(out, 'checkpoint-last.pth')):
            cmd.append('--resume')
        elif os.path.isdir(out):
            cmd.append('--overwrite')
        log(f'start {run["name"]}')
        rc = run_logged(cmd, log_path, env, args.run_timeout)
        if rc != 0:
            status = 'timed out' if rc == 124 else 'train failed'
            log(f'{status.upper()} {run["name"]} (see {log_path})')
            return dict(run, status=status, seconds=time.time() - t0)
    metrics = pd.read_csv(os.path.join(out, 'metrics.csv'))
    epoch_s = _epoch_seconds(out, metrics)
    train_s = time.time() - t0 if not done else float(epoch_s.sum())
    eval_dir = os.path.join(out, 'eval')
    if not os.path.isfile(os.path.join(eval_dir, 'results.json')) or not done:
        cmd = [*zoo, 'eval-resolution', '--run', out, '--label', run['label'], '--data-dir', args.data,
               '--split', 'test', '--sizes', *map(str, args.sizes), '--max-per-class', str(args.eval_per_class),
               '--batch-size', '250', '--workers', '1', '--threads', str(args.threads), '--output', eval_dir,
               '--overwrite', '--no-progress']
        if run_logged(cmd, log_path, env, args.run_timeout) != 0:
            log(f'FAILED evaluating {run["name"]} (see {log_path})')
            return dict(run, status='eval failed', seconds=time.time() - t0)
    timing_path = os.path.join(out, 'sweep_timing.json')
    if os.path.isfile(timing_path):
        with open(timing_path) as f:
            seconds = json.load(f)['total_s']
    else:
        seconds = train_s + (time.time() - t0 if done else time.time() - t0 - train_s)
        with open(timing_path, 'w') as f:
            json.dump(dict(train_s=train_s, total_s=seconds), f)
    files = ['metrics.csv', 'sweep_timing.json', 'eval/results.json'] + \
        [f for f in ('summary.csv', 'train_classes.csv') if os.path.isfile(os.path.join(out, f))]
    archive_run(out, args.archive, parts, files)
    log(f'done {run["name"]}: val top-1 {metrics["val_top1"].iloc[-1]:.2f} ({seconds / 60:.1f} min)')
    return dict(run, status='ok', seconds=seconds, val_top1=float(metrics['val_top1'].iloc[-1]),
                epoch_s=float(epoch_s.mean()))


def _epoch_seconds(out: str, metrics: pd.DataFrame) -> pd.Series:
    """Wall seconds per epoch: ``summary.csv`` (timm's format, appended per session: the last row of an epoch run
    twice counts), or the ``epoch_s`` column of runs made before wall times left ``metrics.csv``."""
    path = os.path.join(out, 'summary.csv')
    if 'epoch_s' in metrics:
        return metrics['epoch_s']
    summary = pd.read_csv(path).drop_duplicates('epoch', keep='last')
    return summary['train_seconds']


def noise_section(df: pd.DataFrame, runs: List[dict], sizes: List[int], train_size: int) -> List[str]:
    """Seed-to-seed spread per size, and which PE differences exceed twice that spread."""
    lines = ['## Run-to-run noise', '']
    pairs = {}
    for r in runs:
        if r['status'] == 'ok':
            pairs.setdefault(r['pe'], {})[r['seed']] = r['label']
    pairs = {pe: s for pe, s in pairs.items() if len(s) > 1}
    if not pairs:
        return lines + ['No PE finished with two seeds, so the noise could not be measured.', '']
    top1 = df.pivot_table(index='label', columns='size', values='top1')
    spread = {}
    for size in sizes:
        spread[size] = max(abs(top1.loc[s[0], size] - top1.loc[s[1], size]) for s in pairs.values())
    lines += [f'Seeds 0 and 1 of {", ".join(sorted(pairs))}: largest top-1 difference between the two seeds of one PE, '
              'per size (same data, same recipe; only initialisation, data order and augmentation differ):', '',
              '| | ' + ' | '.join(f'{s} px' for s in sizes) + ' |', '|---|' + '---|' * len(sizes),
              '| seed spread (points) | ' + ' | '.join(f'{spread[s]:.2f}' for s in sizes) + ' |', '']
    seed0 = {}
    for r in runs:
        if r['status'] == 'ok' and (r['seed'] == 0):
            seed0[r['pe']] = r['label']
    base = seed0.get('ape')
    if base is None:
        return lines
    verdict = []
    for size in (train_size, max(sizes)):
        above, below = [], []
        for pe, label in seed0.items():
            if pe == 'ape':
                continue
            d = top1.loc[label, size] - top1.loc[base, size]
            if abs(d) > 2 * spread[size]:
                (above if d > 0 else below).append(f'{pe} ({d:+.1f})')
        within = len(seed0) - 1 - len(above) - len(below)
        verdict.append(f'- At {size} px ({size / train_size:g}x the training size), against the APE baseline '
                       f'(twice the seed spread = {2 * spread[size]:.1f} points): better beyond noise: '
                       f'{", ".join(above) or "none"}; worse beyond noise: {", ".join(below) or "none"}; '
                       f'{within} PE(s) within noise.')
    return lines + ['A difference counts as real only if it exceeds twice the seed spread at that size (two seeds '
                    'are a thin estimate of noise; treat borderline cases as ties).', ''] + verdict + ['']


def training_section(ok: List[dict]) -> List[str]:
    """Train top-1 (from the training forward passes) and validation top-1 per epoch of every finished run."""
    lines = ['## Training', '', 'Every run learned the task at the training size if its train and test top-1 are '
             'far above the 10 % chance (per epoch, from each run\'s `metrics.csv`):', '',
             '| run | train top-1 per epoch (%) | test top-1 per epoch (%) |', '|---|---|---|']
    for r in ok:
        m = pd.read_csv(os.path.join(r['output'], 'metrics.csv'))
        tr = ' '.join(f'{v:.1f}' for v in m['train_top1']) if 'train_top1' in m else 'not recorded'
        lines.append(f'| {r["label"]} | {tr} | {" ".join(f"{v:.1f}" for v in m["val_top1"])} |')
    return lines + ['']


def write_docs(runs: List[dict], skipped: Dict[str, str], args, configs: Dict[str, dict], wall_s: Optional[float],
               planned: Optional[List[dict]] = None) -> None:
    """Write docs/results/cifar10.md and its figures from the finished ``runs``; ``planned`` runs missing from them
    make the page partial (marked in its title, with the missing runs named)."""
    from zoo.sweep.report import markdown_table, write_report
    ok = [r for r in runs if r['status'] == 'ok']
    names = {r['name'] for r in runs}
    missing = [r for r in (planned or []) if r['name'] not in names]
    rows, models, protocol = [], [], None
    for r in ok:
        with open(os.path.join(r['output'], 'eval', 'results.json')) as f:
            res = json.load(f)
        rows += res['results']
        models += res['models']
        protocol = protocol or res['protocol']
    os.makedirs(args.docs, exist_ok=True)
    md_path, png_path = os.path.join(args.docs, 'cifar10.md'), os.path.join(args.docs, 'cifar10.png')
    recipe = next(iter(configs.values()))
    recipe_txt = yaml.safe_dump({k: v for k, v in recipe.items() if k not in ('model', '_path')}, sort_keys=False,
                                default_flow_style=None).strip()
    lines = ['# CIFAR-10: position encodings under resolution change' + (' (partial)' if missing else ''), '']
    if missing:
        lines += [f'**Partial.** {len(ok)} of {len(planned)} runs had finished when this page was written; the sweep '
                  'continues with the same command (finished runs are restored from `docs/results/cifar10_runs/`, '
                  'interrupted ones resumed). Missing: ' + ', '.join(f'`{r["name"]}`' for r in missing) +
                  '. Nothing below ranks the missing PEs.', '']
    if not rows:
        lines += ['The sweep produced no result; see the logs in `runs/cifar10/`.', '']
    else:
        eval_dir = os.path.join(args.out, 'eval')
        os.makedirs(eval_dir, exist_ok=True)
        paths = write_report(rows, models, protocol, eval_dir)
        shutil.copyfile(paths['png'], png_path)
        shutil.copyfile(paths['heatmap'], os.path.join(args.docs, 'cifar10_heatmap.png'))
        shutil.copyfile(paths['csv'], os.path.join(args.docs, 'cifar10_results.csv'))
        df = pd.DataFrame(rows)
        train_size = int(recipe['img_size'])
        val = {r['label']: r['val_top1'] for r in ok}
        lines += [
            f'Every 2D position encoding that builds in this checkout, trained with one recipe on the full CIFAR-10 '
            f'training set (50,000 images) at {train_size} px, then evaluated zero-shot at {len(args.sizes)} sizes '
            f'from {min(args.sizes) / train_size:g}x to {max(args.sizes) / train_size:g}x the training size. '
            f'Top-1 (%) on the first {args.eval_per_class} test images of each class '
            f'({10 * args.eval_per_class} images); the last column is top-1 on the full 10,000-image test set at '
            'the training size, from training.', '',
            _with_val_column(markdown_table(df, 'top1'), val), '',
            'Bold: best per size. ◦: training size.', '',
            '![top-1 against resolution](cifar10.png)', '',
            '![top-1 heatmap, model x size](cifar10_heatmap.png)', '',
            'Rows: `cifar10_results.csv`. Redraw both figures from them without evaluating: `python -m '
            'zoo.eval.report docs/results/cifar10_results.csv --png docs/results/cifar10.png --heatmap '
            'docs/results/cifar10_heatmap.png`.', '']
        lines += training_section(ok)
        lines += noise_section(df, ok, list(args.sizes), train_size)
    lines += ['## Recipe', '',
              f'One recipe for every PE; `configs/cifar10_<pe>.yaml` differ only in `model`. CPU-sized: a ViT with '
              f'8 px patches (4 x 4 grid at 32 px), width 96, 4 blocks, 3 heads (about 0.47M parameters), 2 epochs.',
              '', '```yaml', recipe_txt, '```', '',
              '## How it was made', '',
              '```bash', 'python benchmarks/cifar10_sweep.py', '```', '',
              'which runs, per PE and seed,', '',
              '```bash',
              'zoo train --config configs/cifar10_<pe>.yaml --seed <s> --output runs/cifar10/<pe>_s<s> --threads '
              f'{args.threads}',
              f'zoo eval-resolution --run runs/cifar10/<pe>_s<s> --data-dir {args.data} --split test --sizes '
              f'{" ".join(map(str, args.sizes))} --max-per-class {args.eval_per_class} --output '
              'runs/cifar10/<pe>_s<s>/eval',
              '```', '',
              f'and merges the per-run results (`runs/cifar10/eval/`). Hardware: {_cpu()} ({os.cpu_count()} cores, '
              f'shared with other jobs while this ran), PyTorch {_torch_version()} on CPU, {args.jobs} runs at a time '
              f'with {args.threads} thread(s) each.' + (f' Wall time of the sweep session that wrote this page: '
                                                        f'{wall_s / 60:.0f} min.' if wall_s else '') +
              ' Per run (training + evaluation; runs restored from the archive give the time of the session that '
              'trained them):', '',
              '| run | status | minutes |', '|---|---|---|']
    lines += [f'| {r["label"]} | {r["status"]} | {r["seconds"] / 60:.1f} |' for r in runs]
    if skipped:
        lines += ['', '## Not included', '']
        lines += [f'- `{pe}`: does not build with the shared recipe in this checkout: {reason}'
                  for pe, reason in skipped.items()]
    if rows and protocol:
        lines += ['', '## Protocol', '']
        with open(os.path.join(args.out, 'eval', 'report.md')) as f:
            report = f.read()
        lines += [report.split('## Protocol', 1)[1].strip()]
    from zoo.datasets.files import write_text_atomic
    write_text_atomic(md_path, '\n'.join(lines) + '\n')
    log(f'wrote {md_path} and {png_path}' + (' (partial)' if missing else ''))


def _with_val_column(table: str, val: Dict[str, float]) -> str:
    out = []
    for i, line in enumerate(table.splitlines()):
        if i == 0:
            out.append(line + ' full test @ train size |')
        elif i == 1:
            out.append(line + '---|')
        else:
            label = line.split('|')[1].strip()
            out.append(line + f' {val.get(label, float("nan")):.2f} |')
    return '\n'.join(out)


def _cpu() -> str:
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown CPU'


def _torch_version() -> str:
    import torch
    return torch.__version__


def plan(pes: List[str], configs: Dict[str, dict], args) -> List[dict]:
    """The runs of ``pes``: the noise PEs first (seeds 0 and 1), then seed 0 of the others."""
    ordered = [pe for pe in args.noise_pes if pe in pes] + [pe for pe in pes if pe not in args.noise_pes]
    runs = []
    for pe in ordered:
        seeds = [0, 1] if pe in args.noise_pes else [0]
        for seed in seeds:
            label = f'{pe} (seed {seed})' if len(seeds) > 1 else pe
            runs.append(dict(pe=pe, seed=seed, label=label, name=f'{pe}_s{seed}',
                             config=configs[pe]['_path'], output=os.path.join(args.out, f'{pe}_s{seed}')))
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument('--tarball', default=os.path.join(os.path.dirname(ROOT), 'shared', 'data', 'cifar10-jpg.tar.gz'))
    p.add_argument('--data', default='data/cifar10', help='where the images are (extracted if missing)')
    p.add_argument('--configs', default='configs/cifar10_*.yaml')
    p.add_argument('--out', default='runs/cifar10', help='run dirs and logs')
    p.add_argument('--docs', default='docs/results', help='where cifar10.md and cifar10.png go')
    p.add_argument('--sizes', type=int, nargs='+', default=[24, 32, 40, 48, 56, 64])
    p.add_argument('--eval-per-class', type=int, default=500, help='test images per class for the size sweep')
    p.add_argument('--noise-pes', nargs='+',
                   default=['ape', 'rope_mixed', 'alibi', 'kerple_log', 'kerple_power', 'fire'],
                   help='PEs trained with a second seed (the distance biases: issue 21)')
    p.add_argument('--only', nargs='+', default=None, help='restrict to these PEs')
    p.add_argument('--jobs', type=int, default=2, help='runs at a time')
    p.add_argument('--threads', type=int, default=1, help='torch threads per run')
    p.add_argument('--run-timeout', type=float, default=1800, help='seconds before one training run is abandoned')
    p.add_argument('--train-args', default='', help='extra zoo train flags (smoke tests: "--epochs 1 '
                                                    '--max-train-per-class 20")')
    p.add_argument('--archive', default='docs/results/cifar10_runs',
                   help='committed copies of every finished run\'s result files (no checkpoints), with a fingerprint '
                        'of recipe, seed and evaluation; a run whose archive matches is restored, not trained again '
                        '(runs/ is not kept from one machine to the next)')
    p.add_argument('--report-only', action='store_true',
                   help='train and evaluate nothing: write the page from the archived runs (marked partial if any '
                        'is missing)')
    args = p.parse_args()
    os.chdir(ROOT)
    t0 = time.time()
    configs = load_configs(args.configs)
    if args.only:
        configs = {pe: c for pe, c in configs.items() if pe in args.only}
    if args.report_only:
        # every archived run whose fingerprint matches is restored, whether or not its PE builds now; only PEs
        # without any finished run are build-checked, so that an unbuildable one is listed as skipped, not missing
        planned = plan(list(configs), configs, args)
        finished = []
        for r in planned:
            if restore_run(r['output'], args.archive, fingerprint_parts(r, args)):
                metrics, seconds = restored(r, args.archive)
                finished.append(dict(r, status='ok', seconds=seconds, val_top1=float(metrics['val_top1'].iloc[-1])))
        have = {r['pe'] for r in finished}
        unrun = {pe: configs[pe] for pe in configs if pe not in have}
        failures = build_failures(unrun, strict=True) if unrun else {}
        skipped = {pe: reason for pe, reason in failures.items() if reason is not None}
        planned = [r for r in planned if r['pe'] not in skipped]
        write_docs(finished, skipped, args, configs, None, planned)
        return
    extract(args.tarball, args.data)
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY='PASSIVE', PYTHONUNBUFFERED='1')
    # PEs that do not build yet are checked again whenever the queue runs dry (other work may land meanwhile).
    pending, skipped, results = dict(configs), {}, []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        while pending:
            failures = build_failures(pending)
            ready = [pe for pe in pending if failures[pe] is None]
            skipped = {pe: failures[pe] for pe in pending if failures[pe] is not None}
            for pe, reason in skipped.items():
                log(f'not buildable now: {pe}: {reason}')
            if not ready:
                break
            runs = plan(ready, configs, args)
            for pe in ready:
                del pending[pe]
            log(f'{len(runs)} runs ({", ".join(r["name"] for r in runs)}), {args.jobs} at a time')
            planned = plan([pe for pe in configs if pe not in skipped], configs, args)  # unbuildable: skipped
            for res in pool.map(lambda r: job(r, args, env), runs):
                results.append(res)  # a page (partial until the last run) after every finished run, in plan order
                write_docs(results, skipped, args, configs, time.time() - t0, planned)
    write_docs(results, skipped, args, configs, time.time() - t0)
    log(f'sweep finished in {(time.time() - t0) / 60:.1f} min')


if __name__ == '__main__':
    main()
