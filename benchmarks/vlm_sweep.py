"""Video-LLM main job (issue 19): a sanity gate, then the tiny video-LLM trained with each multimodal RoPE scheme on a
temporal question it can learn, evaluated at the training frame count and off it; writes docs/results/video_qa*.

    nohup nice python benchmarks/vlm_sweep.py > runs/vlm/sweep.log 2>&1 &     # from the repository root; resumable

Steps (each a plain ``zoo`` command, logged to ``runs/vlm/<name>.log``):

1. data, unless present (a folder made with other options is refused with the fix): ``zoo make-videoqa --tasks
   object_colour`` (the gate, ``data/vqa-gate``), ``--tasks flash_position`` with seed 0 (training,
   ``data/vqa-diag-train``: 1024 questions) and seed 1 (evaluation, ``data/vqa-diag-eval``: 256 questions); 32 frames
   of 32 px in 4 blocks, one per temporal patch of the tower at 8 frames (see ``zoo/datasets/synthetic_videoqa.py``);
2. the sanity gate: ``zoo train-vlm --config configs/vlm_mrope.yaml`` on the colour question for 5 epochs (a cosine decay,
   ``GATE_SCHED``); the sweep stops with a message unless its validation accuracy and greedy exact match reach 95 %;
3. ``--jobs`` runs at a time (default 2), each ``zoo train-vlm --config configs/vlm_<scheme>.yaml --seed S --output
   runs/vlm/<scheme>_s<S>`` (resumed when a checkpoint is there, skipped when finished), then ``zoo eval-video
   --benchmark mvbench --data-root data/vqa-diag-eval --run ... --frames 4 8 16 32 --output runs/vlm/eval/<run>``;
   seed 0 of every scheme and seed 1 of the ``--noise-schemes`` (right after their seed 0), in ``--schemes`` order,
   then seed 0 of the ``--new-schemes`` (issue 22's schemes); a run left in ``runs/vlm`` by another recipe (config or
   seed) stops the sweep before any training, naming it;
   every finished and evaluated run (and the gate) is archived: its small files (``metrics.csv``,
   ``train_classes.csv``, the training log as ``train.log``; the evaluation's ``results.csv`` and its answers as
   ``predictions.json``; no checkpoints) go to ``docs/results/video_qa_runs/<run>/`` and ``.../eval/<run>/`` with a fingerprint of the recipe
   file, seed, data and evaluation arguments (``run_parts``); a sweep on a fresh checkout (runs/ is not kept between
   machines) restores a run whose fingerprint matches instead of training it, so a committed archive lets the sweep
   continue in a later session;
4. after every evaluated run: ``docs/results/video_qa.md`` (marked partial until every run is in),
   ``video_qa_results.csv`` (``label``, ``scheme``, ``train_frames``, ``frames``, ``acc_qa``, ``chance``),
   ``video_qa_curves.png`` (training curves) and ``video_qa_accuracy.png``.

Acceptance, applied on the page: a run below 80 % at the training frame count, or whose most frequent answer letter
there is 80 % or more of its answers, is listed as not learned with its training curve and left out of every
comparison. For each frame count, a difference between two learned schemes is said to hold only if it exceeds twice
the largest |seed 0 - seed 1| of a learned scheme at that frame count.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import re
import shutil
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cifar10_sweep import (archive_run, archived_info, finished_run as done, log, restore_run,  # noqa: E402
                           run_fingerprint, run_logged)  # the shared sweep helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMES = ('mrope', 'videorope', 'rope1d', 'mrope_interleave', 'vrope', 'v2pe', 'hope')
#: the schemes issue 22 added, one seed each, after the original nine runs
NEW_SCHEMES = ('pype', 'cope', 'cope_rope', 'vista', 'rope_dhr')
#: a finished run's small result files (never checkpoints), kept in ``<docs>/video_qa_runs/<run>/`` (training) and
#: ``<docs>/video_qa_runs/eval/<run>/`` (evaluation) with a fingerprint of what made them; a later sweep on a fresh
#: checkout (runs/ is not kept between machines) restores a run whose fingerprint matches instead of training it
TRAIN_FILES, EVAL_FILES = ('metrics.csv', 'train_classes.csv', 'train.log'), ('results.csv', 'predictions.json')
#: the keys of each answer kept in ``predictions.json`` (eval-video's results.json also holds every item's frame
#: indices and timestamps: ~650 kB a run)
PRED_KEYS = ('label', 'frames', 'id', 'pred', 'answer', 'correct', 'fallback')
ARCHIVE = 'video_qa_runs'
TRAIN_FRAMES, EVAL_FRAMES = 8, (4, 8, 16, 32)
COMMON = ['--frames', '32', '--size', '32', '--blocks', '4']
DATA = {  # path: (tasks, items per task, seed, the square's side as a fraction of the frame)
    'data/vqa-gate': (['object_colour'], 256, 2, 0.5),
    'data/vqa-diag-train': (['flash_position'], 1024, 0, 1.0),
    'data/vqa-diag-eval': (['flash_position'], 256, 1, 1.0),
}
GATE_EPOCHS, GATE_MIN = 5, 95.0
#: the gate's schedule: the recipe's hold_cosine released at update 0, i.e. a plain cosine decay after the warm-up
GATE_SCHED = ['--sched', 'hold_cosine', '--hold-until', '100', '--hold-release-by', '0']
LEARNED_MIN, ONE_LETTER = 80.0, 80.0
RESUME_CMD = 'nohup nice python benchmarks/vlm_sweep.py > runs/vlm/sweep.log 2>&1 &'
_docs_lock = threading.Lock()


def make_data(zoo: List[str], out: str, env: dict) -> None:
    """Write the three data sets unless present; a folder written with other options is an error naming the fix."""
    for path, (tasks, n, seed, object_size) in DATA.items():
        meta_path = os.path.join(path, 'meta.json')
        if os.path.isfile(meta_path):
            with open(meta_path) as f:
                meta = json.load(f)
            want = dict(tasks=tasks, items={t: n for t in tasks}, num_frames=32, size=32, seed=seed, blocks=4,
                        object_size=object_size)
            got = {k: meta.get(k) for k in want}
            if got != want:
                raise SystemExit(f'{path} holds another set ({got}; this sweep needs {want}): remove the folder '
                                 'and start the sweep again to write it')
            log(f'data: {path} already present')
            continue
        cmd = [*zoo, 'make-videoqa', '--output', path, '--tasks', *tasks, '--num-per-task', str(n), '--seed', str(seed),
               '--object-size', str(object_size), *COMMON]
        if run_logged(cmd, os.path.join(out, 'make-data.log'), env, 1800) != 0:
            raise SystemExit(f'zoo make-videoqa failed; see {out}/make-data.log')


def read_metrics(run: str) -> List[Dict[str, float]]:
    """``metrics.csv`` of a run as a list of dicts of floats (empty cells: NaN); [] when missing."""
    path = os.path.join(run, 'metrics.csv')
    if not os.path.isfile(path):
        return []
    import pandas as pd
    return pd.read_csv(path).astype(float).to_dict('records')


def check_recipe(run: str, config: str, seed: int) -> None:
    """A run left by an earlier sweep must have been trained with the present ``config`` and seed (every key of the
    YAML that the checkpoint records); otherwise stop, naming the keys and the fix, rather than mix two recipes."""
    last = os.path.join(run, 'checkpoint-last.pth')
    if not os.path.isfile(last):
        return
    import torch
    import yaml
    with open(config) as f:
        want = dict(yaml.safe_load(f), seed=seed)
    got = torch.load(last, map_location='cpu', weights_only=True)['meta']['args']
    diff = {k: (got[k], v) for k, v in want.items() if k in got and k not in ('workers', 'threads') and got[k] != v}
    if diff:
        raise SystemExit(f'{run} was trained with another recipe than {config} ('
                         + ', '.join(f'{k}: {a!r} there, {b!r} now' for k, (a, b) in diff.items())
                         + f'); move or remove {run} (and {os.path.join(os.path.dirname(run), "eval")}) and start the '
                         'sweep again')


def run_parts(scheme: str, seed: int) -> Dict:
    """What must match for an archived run to count as this sweep's ``scheme`` / ``seed`` run: the recipe file's
    values, the seed, the training and evaluation data arguments and the evaluation frame counts."""
    import yaml
    with open(os.path.join(ROOT, 'configs', f'vlm_{scheme}.yaml')) as f:
        cfg = yaml.safe_load(f)
    return dict(sweep='vlm', config=cfg, seed=seed, data_args=COMMON, train_data=DATA['data/vqa-diag-train'],
                eval_data=DATA['data/vqa-diag-eval'], eval_frames=list(EVAL_FRAMES))


def gate_parts() -> Dict:
    """The fingerprint parts of the sanity gate (the mrope recipe on the colour question, GATE_EPOCHS, cosine)."""
    return dict(run_parts('mrope', 0), sweep='vlm-gate', gate_data=DATA['data/vqa-gate'], epochs=GATE_EPOCHS,
                sched=GATE_SCHED)


def archive_dir(args) -> str:
    return os.path.join(args.docs, ARCHIVE)


def archived(folder: str, archive: str, parts: Dict) -> bool:
    """Whether ``archive`` holds ``folder``'s run (by its name) with the fingerprint of ``parts``."""
    info = archived_info(archive, os.path.basename(os.path.normpath(folder)))
    return bool(info) and info.get('fingerprint') == run_fingerprint(parts)


def keep(run: str, ev: Optional[str], archive: str, parts: Dict) -> None:
    """Copy a finished run's small files (and its evaluation's) into ``archive``; the training log goes along as
    ``train.log``. A failure is logged, never fatal (the run itself is done)."""
    try:
        if os.path.isfile(run + '.log'):
            shutil.copy2(run + '.log', os.path.join(run, 'train.log'))
        archive_run(run, archive, parts, [f for f in TRAIN_FILES if os.path.isfile(os.path.join(run, f))])
        if ev is not None:
            with open(os.path.join(ev, 'results.json')) as f:
                preds = [{k: p.get(k) for k in PRED_KEYS} for p in json.load(f)['predictions']]
            from zoo.datasets.files import write_text_atomic
            write_text_atomic(os.path.join(ev, 'predictions.json'),
                              json.dumps(dict(predictions=preds), separators=(',', ':')) + '\n')
            archive_run(ev, os.path.join(archive, 'eval'), parts, list(EVAL_FILES))
        log(f'archived {os.path.basename(run)} in {archive}')
    except OSError as e:
        log(f'could not archive {run}: {e}')


def train(zoo: List[str], config: str, seed: int, run: str, env: dict, extra: List[str] = ()) -> int:
    cmd = [*zoo, 'train-vlm', '--config', config, '--seed', str(seed), '--output', run, '--no-progress', *extra]
    if os.path.isfile(os.path.join(run, 'checkpoint-last.pth')):
        cmd.append('--resume')
    return run_logged(cmd, run + '.log', env, 4 * 3600)


def gate(zoo: List[str], out: str, env: dict, docs: str = 'docs/results') -> Dict[str, float]:
    """Step 2: the colour question must reach GATE_MIN % (multiple-choice and greedy exact match) in 5 epochs."""
    run = os.path.join(out, 'gate')
    t = time.time()
    archive = os.path.join(docs, ARCHIVE)
    if restore_run(run, archive, gate_parts()):
        log(f'sanity gate: restored from {archive}')
    elif not done(run):
        rc = train(zoo, 'configs/vlm_mrope.yaml', 0, run, env,
                   ['--data-dir', 'data/vqa-gate', '--tasks', 'object_colour', '--epochs', str(GATE_EPOCHS),
                    *GATE_SCHED])
        if rc != 0:
            raise SystemExit(f'sanity gate: zoo train-vlm failed (exit {rc}); see {run}.log')
    rows = read_metrics(run)
    if done(run) and not archived(run, archive, gate_parts()):
        keep(run, None, archive, gate_parts())
    last = rows[-1]
    result = dict(epochs=len(rows), val_top1=last['val_top1'], val_exact=last['val_top5'],
                  first_100=next((int(r['epoch']) for r in rows if r['val_top1'] >= 100.0), None),
                  minutes=_minutes(run + '.log'))
    log(f'sanity gate (colour question, mrope, {len(rows)} epochs): val mc acc {last["val_top1"]:.1f} %, greedy '
        f'exact {last["val_top5"]:.1f} % ({time.time() - t:.0f} s)')
    if not (last['val_top1'] >= GATE_MIN and last['val_top5'] >= GATE_MIN):
        raise SystemExit(f'sanity gate failed: the colour question reached {last["val_top1"]:.1f} % (greedy '
                         f'{last["val_top5"]:.1f} %) after {len(rows)} epochs, needs >= {GATE_MIN:.0f} %: the model, '
                         f'prompts, loss or data are broken, so no temporal result would mean anything; see {run}.log')
    return result


def _minutes(log_path: str) -> float:
    """Training wall minutes: the sum of the per-epoch seconds the loop prints (``... | 17.3s``); a restored run's
    log is its folder's ``train.log``."""
    if not os.path.isfile(log_path):
        log_path = os.path.join(log_path[:-len('.log')], 'train.log')
    if not os.path.isfile(log_path):
        return math.nan
    with open(log_path) as f:
        secs = [float(m.group(1)) for m in re.finditer(r'^epoch \d+/\d+ .*\| ([\d.]+)s$', f.read(), re.M)]
    return sum(secs) / 60 if secs else math.nan


def evaluated(ev: str) -> bool:
    path = os.path.join(ev, 'results.csv')
    if not os.path.isfile(path):
        return False
    import pandas as pd
    df = pd.read_csv(path)
    ok = (df['error'].isna() | (df['error'].astype(str) == '')) if 'error' in df else True
    return len(df) == len(EVAL_FRAMES) and bool(pd.Series(ok).all())


def one_run(args, zoo: List[str], env: dict, scheme: str, seed: int) -> None:
    name = f'{scheme}_s{seed}'
    run, ev = os.path.join(args.out, name), os.path.join(args.out, 'eval', name)
    parts, archive = run_parts(scheme, seed), archive_dir(args)
    if archived(run, archive, parts) and archived(ev, os.path.join(archive, 'eval'), parts):
        restore_run(run, archive, parts)
        restore_run(ev, os.path.join(archive, 'eval'), parts)
        log(f'{name}: restored from {archive} (same recipe, seed and data)')
        with _docs_lock:
            write_docs(args)
        return
    if not done(run):
        t = time.time()
        rc = train(zoo, f'configs/vlm_{scheme}.yaml', seed, run, env)
        log(f'train {name}: exit {rc} in {time.time() - t:.0f} s')
        if not done(run):
            log(f'{run} did not finish; left out (see {run}.log)')
            return
    if not evaluated(ev):
        cmd = [*zoo, 'eval-video', '--benchmark', 'mvbench', '--data-root', 'data/vqa-diag-eval', '--run', run,
               '--label', f'{scheme} (seed {seed})', '--frames', *map(str, EVAL_FRAMES), '--output', ev,
               '--no-progress', '--threads', '1', '--workers', '0',
               '--resume' if os.path.isfile(os.path.join(ev, 'results.json')) else '--overwrite']
        t = time.time()
        rc = run_logged(cmd, ev.rstrip('/') + '.log', env, 3600)
        log(f'eval {name}: exit {rc} in {time.time() - t:.0f} s')
    if evaluated(ev):
        keep(run, ev, archive, parts)
    with _docs_lock:
        write_docs(args)


def restore_all(args) -> None:
    """Copy every archived run (and the gate) whose fingerprint matches the present recipe into ``--out``, so
    ``--docs-only`` on a fresh checkout renders the committed results."""
    archive = archive_dir(args)
    for scheme, seed in plan(args):
        name = f'{scheme}_s{seed}'
        run, ev, parts = os.path.join(args.out, name), os.path.join(args.out, 'eval', name), run_parts(scheme, seed)
        if archived(run, archive, parts) and archived(ev, os.path.join(archive, 'eval'), parts):
            restore_run(run, archive, parts)
            restore_run(ev, os.path.join(archive, 'eval'), parts)
    gate_run, gate_json = os.path.join(args.out, 'gate'), os.path.join(args.out, 'gate.json')
    if not os.path.isfile(gate_json) and restore_run(gate_run, archive, gate_parts()):
        rows = read_metrics(gate_run)
        last = rows[-1]
        with open(gate_json, 'w') as f:
            json.dump(dict(epochs=len(rows), val_top1=last['val_top1'], val_exact=last['val_top5'],
                           first_100=next((int(r['epoch']) for r in rows if r['val_top1'] >= 100.0), None),
                           minutes=_minutes(gate_run + '.log')), f)


def plan(args) -> List[Tuple[str, int]]:
    runs = [(s, 0) for s in args.schemes]
    for s in reversed(args.noise_schemes):  # seed 1 of the noise schemes right after their seed 0
        if s in args.schemes:
            runs.insert(runs.index((s, 0)) + 1, (s, 1))
    return runs + [(s, 0) for s in getattr(args, 'new_schemes', ()) if s not in args.schemes]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--schemes', nargs='+', default=list(SCHEMES))
    p.add_argument('--noise-schemes', nargs='*', default=['mrope', 'videorope'], help='also trained with seed 1')
    p.add_argument('--new-schemes', nargs='*', default=list(NEW_SCHEMES),
                   help='schemes of issue 22, seed 0 only, run after the others')
    p.add_argument('--jobs', type=int, default=2, help='runs at a time (each one process, one thread)')
    p.add_argument('--out', default='runs/vlm')
    p.add_argument('--docs', default='docs/results')
    p.add_argument('--docs-only', action='store_true', help='only step 4, from what is in --out')
    args = p.parse_args(argv)
    os.chdir(ROOT)
    env = dict(os.environ, PYTHONUNBUFFERED='1', OMP_NUM_THREADS='1')
    zoo = [sys.executable, '-m', 'zoo.cli']
    os.makedirs(os.path.join(args.out, 'eval'), exist_ok=True)
    t0 = time.time()
    if args.docs_only:
        restore_all(args)
        write_docs(args)
        return 0
    make_data(zoo, args.out, env)
    for scheme, seed in plan(args):  # before any training: never a sweep of two recipes
        run = os.path.join(args.out, f'{scheme}_s{seed}')
        check_recipe(run, f'configs/vlm_{scheme}.yaml', seed)
        if (os.path.isfile(os.path.join(run, 'metrics.csv')) and not os.path.isfile(os.path.join(run, 'checkpoint-last.pth'))
                and not archived(run, archive_dir(args), run_parts(scheme, seed))):
            raise SystemExit(f'{run} holds results restored for another recipe; move or remove it (and '
                             f'{os.path.join(args.out, "eval", os.path.basename(run))}) and start the sweep again')
    g = gate(zoo, args.out, env, args.docs)
    from zoo.datasets.files import write_text_atomic
    write_text_atomic(os.path.join(args.out, 'gate.json'), json.dumps(g))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for fut in [pool.submit(one_run, args, zoo, env, s, k) for s, k in plan(args)]:
            fut.result()
    write_docs(args)
    log(f'done in {time.time() - t0:.0f} s')
    return 0


# ---- step 4: the page -------------------------------------------------------------------------------------------------

def collect(args):
    """Rows of every evaluated run (``eval-video`` results.csv), its predictions and its training metrics."""
    import pandas as pd
    rows, preds, curves = [], [], {}
    for scheme, seed in plan(args):
        name = f'{scheme}_s{seed}'
        ev = os.path.join(args.out, 'eval', name)
        if evaluated(ev):
            rows.append(pd.read_csv(os.path.join(ev, 'results.csv')))
            full = os.path.join(ev, 'results.json')  # a restored run has only the answers: predictions.json
            with open(full if os.path.isfile(full) else os.path.join(ev, 'predictions.json')) as f:
                preds += json.load(f)['predictions']
        m = read_metrics(os.path.join(args.out, name))
        if m:
            run = os.path.join(args.out, name)
            curves[f'{scheme} (seed {seed})'] = dict(metrics=m, done=done(run) or archived(run, archive_dir(args),
                                                                                          run_parts(scheme, seed)),
                                                    minutes=_minutes(os.path.join(args.out, name) + '.log'),
                                                    letters=_last_letters(os.path.join(args.out, name)),
                                                    lows=_last_letters(os.path.join(args.out, name), below=50.0))
    df = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return df, pd.DataFrame(preds), curves


def _last_letters(run: str, below: float = math.inf) -> str:
    """The last epoch's training accuracy per right letter from ``train_classes.csv`` (``A 37 / B 63 / ...``), only
    the letters below ``below`` percent."""
    path = os.path.join(run, 'train_classes.csv')
    if not os.path.isfile(path):
        return ''
    import pandas as pd
    tc = pd.read_csv(path)
    last = tc[(tc['epoch'] == tc['epoch'].max()) & (tc['top1'] < below)]
    return ' / '.join(f'{r.outcome} {r.top1:.0f}' for r in last.itertuples())


def _config() -> Dict:
    import yaml
    with open(os.path.join(ROOT, 'configs', 'vlm_mrope.yaml')) as f:
        return yaml.safe_load(f)


def _updates_per_epoch(cfg: Dict) -> int:
    n = DATA['data/vqa-diag-train'][1]
    n_train = n - max(1, int(round(n * cfg['val_fraction'])))
    return math.ceil(n_train / cfg['batch_size'])


RECIPE_CMD = ('zoo make-videoqa --output data/x-sq{pct} --tasks flash_position --num-per-task 1024 --seed 0 --frames 32 '
              '--size 32 --blocks 4 --object-size {frac}; zoo train-vlm --config configs/vlm_mrope.yaml --data-dir '
              'data/x-sq{pct} --epochs 10 --hold-until 100 --output runs/x-sq{pct}')


def recipe_section(docs: str) -> List[str]:
    """The measurements that chose the square's size: the per-epoch training curves kept in
    ``<docs>/video_qa_runs/recipe/`` (metrics.csv of short mrope runs, LR held at the peak)."""
    import pandas as pd
    folder = os.path.join(docs, ARCHIVE, 'recipe')
    found = sorted(f for f in os.listdir(folder) if f.endswith('.csv')) if os.path.isdir(folder) else []
    if not found:
        return []
    md = ['## Recipe: why the whole frame', '',
          'With the previous recipe (a 16-px square, `--object-size 0.5`, LR held until 62.5 %; commit 2e60766, this '
          'page then) no run learned in 2016 updates: 3 of 9 passed 62.5 % and stopped at 76 % with one quarter never '
          'told apart once the LR decayed, rope1d and hope stopped near 48 % (only the last quarter), the other 4 '
          'stayed at chance answering one letter. Short runs of mrope seed 0 with the LR '
          'held at the peak (3e-3) on larger squares (`--epochs 10 --hold-until 100`, stopped after 7 epochs to free '
          'the CPU for the sweep), training accuracy per epoch of 112 updates (validation accuracy on the 128 '
          'held-out training questions in brackets):', '']
    for f in found:
        m = pd.read_csv(os.path.join(folder, f))
        frac = f.rsplit('_', 1)[1][:-len('.csv')]
        cmd = RECIPE_CMD.format(pct=int(round(float(frac) * 100)), frac=frac)
        md.append(f'- `--object-size {frac}`: ' + ', '.join(f'{r.train_top1:.0f} ({r.val_top1:.0f})'
                                                         for r in m.itertuples())
                  + f' (`{os.path.relpath(os.path.join(folder, f), docs)}`; made with the configs of commit '
                  f'212d339 by `{cmd}`)')
    md += ['', 'Both left chance within 4 epochs (the 16-px square of the previous recipe had not in 18 for this '
           'seed), and both fell back for an epoch at the peak LR before climbing again, hence the recipe: the '
           'whole frame, the peak LR held until 90 % training accuracy (or half the updates), then the decay.', '']
    return md


def write_docs(args) -> None:
    """``docs/results/video_qa.md``, ``video_qa_results.csv`` and the two plots, from what has finished."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import pandas as pd
    from zoo.datasets.files import write_text_atomic
    df, pr, curves = collect(args)
    cfg = _config()
    upe = _updates_per_epoch(cfg)
    hold = float(cfg.get('hold_until') or (100.0 / 4 + 100.0) / 2)
    release_by = cfg.get('hold_release_by')
    plateau = (100.0 / 4 + 100.0) / 2  # halfway from chance to 100 %: the run has left the one-letter plateau
    planned = [f'{s} (seed {k})' for s, k in plan(args)]
    os.makedirs(args.docs, exist_ok=True)
    finished = list(df['label'].unique()) if len(df) else []
    partial = len(finished) < len(planned)

    # the CSV, exactly these rows
    if len(df):
        csv = df[['label', 'scheme', 'train_frames', 'frames', 'acc_qa', 'chance_qa']].rename(
            columns={'chance_qa': 'chance'})
        write_text_atomic(os.path.join(args.docs, 'video_qa_results.csv'), csv.to_csv(index=False))

    # acceptance per run
    verdict: Dict[str, Dict] = {}
    for label in finished:
        at = df[(df['label'] == label) & (df['frames'] == TRAIN_FRAMES)]
        acc = float(at['acc_qa'].iloc[0]) if len(at) else math.nan
        p = pr[(pr['label'] == label) & (pr['frames'] == TRAIN_FRAMES)] if len(pr) else pr
        vc = p['pred'].value_counts(normalize=True) if len(p) else pd.Series(dtype=float)
        share = 100.0 * float(vc.iloc[0]) if len(vc) else math.nan
        letter = 'ABCDEFGH'[int(vc.index[0])] if len(vc) else '?'
        verdict[label] = dict(acc=acc, share=share, letter=letter,
                              learned=acc >= LEARNED_MIN and share < ONE_LETTER)
    learned = [lb for lb in finished if verdict[lb]['learned']]
    scheme_of = {lb: lb.split(' (seed')[0] for lb in planned}

    md = ['# Video QA: multimodal RoPE schemes in a tiny video-LLM, on a temporal question it can learn', '']
    if partial:
        md += [f'**Partial**: {len(finished)} of {len(planned)} planned runs are trained and evaluated '
               f'({", ".join(finished) or "none"}); the sweep goes on where it stopped with `{RESUME_CMD}` '
               '(from the repository root; finished runs and evaluations are skipped, an interrupted run resumes '
               'from its last epoch). Not yet in: ' + ', '.join(lb for lb in planned if lb not in finished) + '.',
               '']
    md += [f'Command (from the repository root; {args.jobs} runs at a time, each run\'s training minutes on this '
           'project\'s busy 2-core CPU are in the runs table):', '', f'    {RESUME_CMD}', '',
           '## Setup', '',
           f'- **Question** (`zoo make-videoqa --tasks flash_position --object-size '
           f'{float(DATA["data/vqa-diag-train"][3])}`): a grey 32-frame clip of 32 px with a coloured square of side '
           f'{float(DATA["data/vqa-diag-train"][3])} x the frame (1.0: the whole frame, all 4 merged tower tokens) '
           'in exactly one of 4 blocks of 8 raw frames; "When is the <colour> square shown in the video?" with the '
           'options, always in this order, (A) in the first quarter ... (D) in the last quarter. Each block is one '
           'temporal patch of the tower at 8 frames, and every event is visible in any 8-frame draw (tested in '
           '`tests/test_videoqa_tasks.py`). Only the time of the event decides the answer: an absolute-time '
           'question. Chance 25 %.',
           f'- **Data**: training `data/vqa-diag-train` ({DATA["data/vqa-diag-train"][1]} questions, seed 0; '
           f'{cfg["val_fraction"]:.3g} of them held out for the per-epoch validation), evaluation '
           f'`data/vqa-diag-eval` ({DATA["data/vqa-diag-eval"][1]} other questions, seed 1).',
           f'- **Recipe** `configs/vlm_<scheme>.yaml` (only the model name differs): decoder width '
           f'{cfg["model_kwargs"]["dim"]}, {cfg["model_kwargs"]["depth"]} blocks, 1 KV head; a 1-block width-32 '
           f'tower at 32 px (8-px patches, 2-frame tubelets, 2x2 merge: 16 visual tokens at 8 frames); '
           f'{cfg["num_frames"]} frames (random offsets inside the uniform segments), batch {cfg["batch_size"]}, '
           f'AdamW lr {cfg["lr"]:g}, {cfg["epochs"]} epochs x {upe} = {cfg["epochs"] * upe} updates; '
           f'`sched: hold_cosine`: the peak LR is held until an epoch\'s training accuracy reaches {hold:.1f} %'
           + (f' or, at the latest, until {release_by:g} of the updates ({int(release_by * cfg["epochs"] * upe)})'
              if release_by is not None else '') + ', then decays by a cosine over the updates left.',
           f'- **Evaluation**: `zoo eval-video` of each run\'s final weights at {", ".join(map(str, EVAL_FRAMES))} '
           f'frames (segment midpoints), greedy letter answers; {TRAIN_FRAMES} is the training frame count.',
           f'- **Acceptance**: a run is *learned* if it answers >= {LEARNED_MIN:.0f} % right at {TRAIN_FRAMES} frames '
           f'and its most frequent letter there is < {ONE_LETTER:.0f} % of its answers; any other run is listed as '
           'not learned, with its training curve, and is left out of every comparison.', '']
    md += recipe_section(args.docs)
    gate_path = os.path.join(args.out, 'gate.json')
    if os.path.isfile(gate_path):
        with open(gate_path) as f:
            g = json.load(f)
        md += ['## Sanity gate', '',
               f'The colour of a large square (`--tasks object_colour`, 4 colours, fixed option order), trained with '
               f'the mrope recipe for {g["epochs"]} epochs (a cosine decay from the first update): validation accuracy {g["val_top1"]:.1f} %, '
               f'greedy exact match {g["val_exact"]:.1f} %' + (f', 100 % from epoch {g["first_100"]}'
                                                                if g.get('first_100') else '') +
               (f'; {g["minutes"]:.1f} training minutes' if not math.isnan(g.get('minutes', math.nan)) else '') +
               f'. The sweep stops unless both reach {GATE_MIN:.0f} %.', '']

    # runs: verdicts and curves
    md += ['## Runs', '',
           f'| run | finished | accuracy at {TRAIN_FRAMES} frames (%) | most frequent letter (share %) | left the '
           f'plateau (first epoch with train accuracy >= {plateau:.1f} %) | final train accuracy / top-letter share (%) '
           '| final train accuracy per right letter (%) | training minutes | verdict |',
           '|---|---|---|---|---|---|---|---|---|']
    for label in planned:
        c = curves.get(label)
        if c is None:
            md.append(f'| {label} | not started | | | | | | | |')
            continue
        m = c['metrics']
        exit_ep = next((int(r['epoch']) for r in m if r['train_top1'] >= plateau), None)
        v = verdict.get(label)
        state = 'yes' if c['done'] else f'epoch {len(m)} of {cfg["epochs"]}'
        md.append(f'| {label} | {state} | '
                  + (f'{v["acc"]:.1f} | ({v["letter"]}) {v["share"]:.1f} | ' if v else '| | ')
                  + (f'epoch {exit_ep} (update {exit_ep * upe})' if exit_ep else 'not yet') + ' | '
                  + f'{m[-1]["train_top1"]:.1f} / {m[-1]["train_top_share"]:.1f} | {c["letters"]} | '
                  + f'{c["minutes"]:.1f} | '
                  + ('**learned**' if v and v['learned'] else 'not learned' if v else 'training') + ' |')
    md += ['', '![training curves](video_qa_curves.png)', '']
    not_learned = [lb for lb in finished if not verdict[lb]['learned']]
    if not_learned:
        md += ['**Not learned at this budget** (not ranked): ' + ', '.join(
            f'{lb} ({verdict[lb]["acc"]:.1f} %, letter ({verdict[lb]["letter"]}) {verdict[lb]["share"]:.0f} %)'
            for lb in not_learned) + '. Their training accuracy per epoch (with the most frequent letter\'s '
            'share):', '']
        for lb in not_learned:
            md.append(f'- {lb}: ' + ', '.join(f'{r["train_top1"]:.0f} ({r["train_top_share"]:.0f})'
                                              for r in curves[lb]['metrics']))
        md.append('')
        split = {lb: curves[lb]['lows'] for lb in not_learned if curves[lb]['lows'] and any(
            r['train_top1'] >= plateau for r in curves[lb]['metrics'])}
        if split:
            md += ['Left the one-letter plateau but not learned: right letters still below 50 % training accuracy '
                   'at the last epoch (the question is only partly solved: the other quarters are told apart): '
                   + '; '.join(f'{lb}: {v}' for lb, v in split.items()) + '.', '']
    if curves:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for label, c in curves.items():
            x = [r['epoch'] * upe for r in c['metrics']]
            axes[0].plot(x, [r['train_top1'] for r in c['metrics']], marker='.', label=label)
            axes[1].plot(x, [r['val_top1'] for r in c['metrics']], marker='.', label=label)
        for ax, title in zip(axes, ('training accuracy (%)', 'validation accuracy (%, held-out training questions)')):
            ax.axhline(25, color='grey', ls=':', lw=1)
            ax.set(xlabel='updates', title=title, ylim=(0, 102))
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(args.docs, 'video_qa_curves.png'), dpi=90)
        plt.close(fig)

    # accuracy against frames, learned runs only
    if learned:
        wide = df[df['label'].isin(learned)].pivot_table(index='label', columns='frames', values='acc_qa',
                                                          sort=False)
        md += ['## Accuracy (%) against frames, learned runs only', '',
               '| run | ' + ' | '.join(f'{f} frames' + (' (trained)' if f == TRAIN_FRAMES else '')
                                      for f in EVAL_FRAMES) + ' |', '|---' * (len(EVAL_FRAMES) + 1) + '|']
        for lb in wide.index:
            md.append(f'| {lb} | ' + ' | '.join(f'{wide.loc[lb, f]:.1f}' for f in EVAL_FRAMES) + ' |')
        n_eval = DATA['data/vqa-diag-eval'][1]
        md += ['', f'{n_eval} questions per cell: the binomial standard error is {100 * (0.9 * 0.1 / n_eval) ** .5:.1f} '
               f'points at 90 % and {100 * (0.5 * 0.5 / n_eval) ** .5:.1f} at 50 %.', '',
               '![accuracy against frames](video_qa_accuracy.png)', '']
        fig, ax = plt.subplots(figsize=(6, 4))
        for lb in wide.index:
            ax.plot(EVAL_FRAMES, [wide.loc[lb, f] for f in EVAL_FRAMES], marker='o', label=lb)
        ax.axhline(25, color='grey', ls=':', lw=1)
        ax.axvline(TRAIN_FRAMES, color='grey', ls='--', lw=1)
        ax.set(xscale='log', xticks=list(EVAL_FRAMES), xticklabels=list(map(str, EVAL_FRAMES)), xlabel='frames',
               ylabel='accuracy (%)', ylim=(0, 102), title='flash_position, learned runs')
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(args.docs, 'video_qa_accuracy.png'), dpi=90)
        plt.close(fig)
        md += ['## Which differences hold', '',
               'Per frame count: the seed spread is the largest |seed 0 - seed 1| of a scheme with both seeds '
               'learned; a difference between two learned schemes (their mean over learned seeds) holds only if it '
               'exceeds twice that spread.', '']
        by_scheme: Dict[str, List[str]] = {}
        for lb in learned:
            by_scheme.setdefault(scheme_of[lb], []).append(lb)
        for f in EVAL_FRAMES:
            spreads = [abs(wide.loc[lbs[0], f] - wide.loc[lbs[1], f]) for lbs in by_scheme.values() if len(lbs) == 2]
            means = {s: sum(wide.loc[lb, f] for lb in lbs) / len(lbs) for s, lbs in by_scheme.items()}
            where = f'- **{f} frames**' + (' (training)' if f == TRAIN_FRAMES else '') + ': '
            if len(means) < 2:
                md.append(where + f'only {len(means)} learned scheme ({", ".join(means) or "none"}): nothing to '
                          'compare.')
                continue
            if not spreads:
                md.append(where + 'no scheme has two learned seeds yet, so the seed noise is unknown and no '
                          'difference can be called.')
                continue
            bar = 2 * max(spreads)
            ranked = sorted(means, key=means.get, reverse=True)
            pairs = [(a, b, means[a] - means[b]) for i, a in enumerate(ranked) for b in ranked[i + 1:]]
            held = [f'{a} > {b} by {d:.1f}' for a, b, d in pairs if d > bar]
            md.append(where + ', '.join(f'{s} {means[s]:.1f}' for s in ranked) + f'; seed spread {max(spreads):.1f}, '
                      f'bar {bar:.1f} points: ' + ('; '.join(held) if held else 'no difference holds') + '.')
        md.append('')
    else:
        stale = os.path.join(args.docs, 'video_qa_accuracy.png')
        if os.path.isfile(stale):  # a plot of runs that are no longer (or not yet) in
            os.remove(stale)
        if finished:
            md += ['## Accuracy against frames', '', 'No finished run has learned the question yet, so nothing is '
                   'ranked.', '']
    md += ['## Notes', '',
           '- The earlier version of this page trained 360 updates on the original `make-videoqa` tasks and every '
           'scheme answered one letter: those tasks cannot be answered at 8 of 32 frames (2-frame `counting` '
           'flashes, shuffled options, objects smaller than a tower token) and 360 updates end before the plateau '
           'ends (issue 19; `../shared/notes/video-learning.md`, part 2). The old tasks still exist and load.',
           '- V-NIAH is not part of this sweep (the trained model never sees a needle question).',
           f'- Every finished run\'s small files (training curve, per-letter accuracy, log, evaluation rows and '
           f'predictions; no checkpoints) are kept in [{ARCHIVE}/]({ARCHIVE}/) with a fingerprint of its recipe, seed '
           'and data; the sweep restores those instead of training them again on a fresh checkout, and '
           '`python benchmarks/vlm_sweep.py --docs-only` renders this page from them.',
           f'- Raw rows: [video_qa_results.csv](video_qa_results.csv) (written by the sweep; `chance` is the '
           'mean of 1 / options).', '']
    write_text_atomic(os.path.join(args.docs, 'video_qa.md'), '\n'.join(md) + '\n')
    log(f'wrote {args.docs}/video_qa.md ({len(finished)} of {len(planned)} runs{", partial" if partial else ""})')


if __name__ == '__main__':
    sys.exit(main())
