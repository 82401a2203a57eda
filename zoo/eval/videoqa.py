"""``zoo eval-video``: multiple-choice accuracy of video-LLMs on a video-QA benchmark across frame counts and sizes.

Models come as ``--run DIR`` (a ``zoo train-vlm`` output dir: its final ``checkpoint-last.pth``) or ``--checkpoint
PATH`` (a ``zoo train-vlm`` checkpoint; it records the ``pe_vlm_*`` name and options). Questions come from any reader
of :mod:`zoo.datasets.videoqa` (``--benchmark mvbench|videomme|nextqa_mc|mlvu|longvideobench|egoschema``).

Protocol, per (frames, size, model): ``frames`` frames at the segment midpoints of the item's window (MVBench's rule,
:class:`zoo.datasets.video.FrameSampling`), resized on the shorter side and centre-cropped to ``size`` px; the MVBench
prompt (:func:`zoo.tasks.videoqa.format_question`), greedy decoding of ``--max-new-tokens`` tokens with a KV
cache, left-padded batches. The answer is the option letter the model writes (or a 0-based option index, or an
option's exact text); when none can be read, a seeded random option is scored instead and counted as a fallback.

Decoding: frames are read once per (video, sampling) at the largest ``--sizes`` value into an on-disk
:class:`~zoo.datasets.video.FrameCache` and resized from there for smaller sizes and for every further model, so a
sweep over models and sizes decodes each video once per frame count. Decode time and model time are reported apart.

Writes ``results.csv`` (one row per model, frames and size; per-task accuracy columns ``acc:<task>``),
``results.json`` (protocol, models, rows, every prediction, and the frame indices and timestamps of every item per
frame count), ``report.md``, ``accuracy.png`` (accuracy against frames per scheme, V-NIAH in its own panel) and
``vniah.png`` (V-NIAH accuracy over needle depth x haystack length, per model and frame count), all rewritten
atomically after every evaluation. A failed evaluation (out of memory, a grid the tower cannot take) is recorded and
the sweep goes on. The output directory is locked while the sweep runs.

V-NIAH: LongVA, "Long Context Transfer from Language to Vision" (arXiv:2406.16852); prompt and frame rule: MVBench
(arXiv:2311.17005).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import shutil
import tempfile
import time
import zlib
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from zoo.errors import OutputDirError
from zoo.datasets.files import write_atomic, write_text_atomic
from zoo.runs.checkpoints import checkpoint_meta, load_checkpoint
from zoo.runs.options import check_device
from zoo.runs.rundir import STAGING, sweep_output_dir
from zoo.tasks.videoqa import LETTERS, format_question
from zoo.datasets.video import FrameCache, FrameSampling, VideoReadError, read_video, resize_frames

__all__ = ['build_video_parser', 'eval_video', 'load_video_llm', 'parse_choice', 'write_video_report']

_logger = logging.getLogger('zoo.eval')

NIAH_TASK = 'vniah'


def build_video_parser(prog: str = 'zoo eval-video') -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description='Multiple-choice accuracy of video-LLMs (zoo train-vlm runs) on a video-QA benchmark at several '
                    'frame counts and frame sizes. Writes OUTPUT/results.csv, results.json, report.md, accuracy.png '
                    'and vniah.png (when the benchmark has V-NIAH items).',
        epilog='Example: zoo eval-video --benchmark mvbench --data-root data/vqa-eval --run runs/vlm/mrope_s0 --run '
               'runs/vlm/videorope_s0 --frames 8 16 32 64 --output runs/eval-video. Benchmarks: mvbench, videomme, '
               'nextqa_mc, mlvu, longvideobench, egoschema (zoo.datasets.videoqa.list_benchmarks()).')
    p.add_argument('--benchmark', required=True, help='benchmark reader (lmms-eval task name, e.g. mvbench)')
    p.add_argument('--data-root', required=True, metavar='DIR', help='the benchmark\'s data root')
    p.add_argument('--tasks', nargs='*', default=None, help='tasks to read (readers that have tasks; default all)')
    p.add_argument('--run', action='append', default=[], metavar='DIR', help='zoo train-vlm output dir (repeatable)')
    p.add_argument('--checkpoint', action='append', default=[], metavar='PATH',
                   help='zoo train-vlm checkpoint file (repeatable)')
    p.add_argument('--label', action='append', default=[], metavar='TEXT',
                   help='display names, one per model in the order runs then checkpoints (default: the scheme)')
    p.add_argument('--use-ema', action='store_true', help='evaluate the checkpoints\' EMA weights')
    p.add_argument('--frames', type=int, nargs='+', required=True, metavar='T', help='frames per clip to evaluate')
    p.add_argument('--sampling', default='uniform', choices=('uniform', 'fps'),
                   help='uniform: T frames at the segment midpoints (MVBench); fps: --fps frames per second, at most T')
    p.add_argument('--fps', type=float, default=1.0, help='frames per second for --sampling fps')
    p.add_argument('--sizes', type=int, nargs='+', default=None, metavar='PX',
                   help='frame sizes in px (default: each model\'s training size)')
    p.add_argument('--max-items', type=int, default=None, help='evaluate only the first N questions (by id)')
    p.add_argument('--max-new-tokens', type=int, default=4, help='tokens generated per answer')
    p.add_argument('--seed', type=int, default=0, help='seed of the random option scored when no answer is read')
    p.add_argument('-b', '--batch-size', type=int, default=8, help='questions per generate call (left padded)')
    p.add_argument('-j', '--workers', type=int, default=1, help='data loader processes (video decoding)')
    p.add_argument('--frame-cache', metavar='DIR', default=None,
                   help='keep decoded frames here between runs (default: a temporary folder removed at the end)')
    p.add_argument('--device', default=None, help='torch device (default: cuda if available, else cpu)')
    p.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch\'s)')
    p.add_argument('--output', default='eval-video', metavar='DIR', help='output dir (locked while running)')
    p.add_argument('--overwrite', action='store_true',
                   help='replace an existing report in the output dir (only once the new one is complete)')
    p.add_argument('--note', action='append', default=[], metavar='TEXT', help='paragraph added to report.md')
    p.add_argument('--no-progress', action='store_true', help='no tqdm progress bars')
    return p


def _check_args(args) -> None:
    bad_frames = [f for f in args.frames if f < 1]
    if bad_frames:
        raise ValueError(f'--frames {bad_frames}: frame counts must be at least 1 (e.g. --frames 8 16 32 64)')
    if args.sizes is not None and any(s < 1 for s in args.sizes):
        raise ValueError(f'--sizes {args.sizes}: frame sizes must be positive pixels (e.g. --sizes 32 48)')
    for flag in ('batch_size', 'max_new_tokens', 'max_items', 'threads'):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise ValueError(f'--{flag.replace("_", "-")} {v}: must be at least 1')
    if not (args.fps > 0 and math.isfinite(args.fps)):
        raise ValueError(f'--fps {args.fps}: must be a positive number of frames per second')
    if args.workers < 0:
        raise ValueError(f'--workers {args.workers}: must be 0 or more')
    if not args.run and not args.checkpoint:
        raise ValueError('no model given: pass --run DIR (a zoo train-vlm output dir) or --checkpoint PATH')
    n = len(args.run) + len(args.checkpoint)
    if args.label and len(args.label) != n:
        raise ValueError(f'{len(args.label)} --label for {n} models; give one per model (runs first, then checkpoints)')
    check_device(args.device)
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise OutputDirError(f'--output {args.output!r} is a file, not a directory; choose another --output')


# ---------------------------------------------------------------------------------------------------------- models
def load_video_llm(path: str, use_ema: bool = False) -> Tuple[torch.nn.Module, Dict[str, Any]]:
    """Rebuild a ``zoo train-vlm`` model from its checkpoint (recorded name and options) and load its weights.

    Returns:
        ``(model in eval mode, checkpoint meta)``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a video-LLM checkpoint (the message names the expected layout), or no EMA weights with
            ``use_ema``.
        zoo.models.CheckpointMismatchError: the weights do not fit the recorded model.
    """
    from zoo.models import CheckpointMismatchError, unwrap_state_dict
    from zoo.models.vlm import create_video_llm
    if not os.path.isfile(path):
        raise FileNotFoundError(f'checkpoint {path!r} does not exist')
    ckpt = load_checkpoint(path)
    meta = checkpoint_meta(ckpt)
    name = meta.get('model_name')
    if not (isinstance(name, str) and name.startswith('pe_vlm_')):
        what = f'records the model {name!r}' if name else 'records no model name'
        raise ValueError(f'{path!r} is not a video-LLM checkpoint ({what}); zoo eval-video takes zoo train-vlm '
                         'checkpoints: a dict with "model" weights and "meta" {model_name: pe_vlm_<size>_<scheme>, '
                         'model_kwargs, img_size, num_frames}, e.g. RUN/checkpoint-last.pth of zoo train-vlm')
    if use_ema and not isinstance(ckpt.get('model_ema'), dict):
        raise ValueError(f'--use-ema: {path!r} holds no EMA weights (trained without --model-ema); drop --use-ema')
    model = create_video_llm(name, **(meta.get('model_kwargs') or {}))
    state = ckpt['model_ema'] if use_ema else unwrap_state_dict(ckpt)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise CheckpointMismatchError(f'{path!r} does not load into {name}: {" ".join(str(e).split())[:600]}') \
            from None
    return model.eval(), meta


def _load_models(args) -> List[Dict[str, Any]]:
    paths = []
    for run in args.run:
        if os.path.isfile(run):
            raise ValueError(f'--run {run!r} is a file; --run takes a zoo train-vlm output dir (pass a checkpoint '
                             'file as --checkpoint)')
        if not os.path.isdir(run):
            raise FileNotFoundError(f'run dir {run!r} does not exist')
        path = os.path.join(run, 'checkpoint-last.pth')
        if not os.path.isfile(path):
            raise FileNotFoundError(f'run dir {run!r} has no checkpoint-last.pth (not a finished zoo train-vlm run?); '
                                    'pass --checkpoint PATH instead')
        paths.append(path)
    paths += list(args.checkpoint)
    loaded = []
    for i, path in enumerate(paths):
        model, meta = load_video_llm(path, args.use_ema)
        seed = (meta.get('args') or {}).get('seed')
        loaded.append(dict(model=model, name=meta['model_name'], scheme=model.scheme, checkpoint=path, seed=seed,
                           label=args.label[i] if args.label else model.scheme,
                           train_size=int(meta.get('img_size') or model.data_config['img_size'][0]),
                           train_frames=int(meta.get('num_frames') or 0) or None,
                           weights='EMA' if args.use_ema else 'raw'))
    labels = [m['label'] for m in loaded]
    for m in loaded:
        if labels.count(m['label']) > 1 and not args.label:
            m['label'] += f' (seed {m["seed"]})' if m['seed'] is not None else f' #{labels.index(m["label"]) + 1}'
    if len({m['label'] for m in loaded}) != len(loaded):
        raise ValueError(f'model labels are not unique: {[m["label"] for m in loaded]}; pass one --label per model')
    return loaded


# ---------------------------------------------------------------------------------------------------------- answers
_LEAD = re.compile(r'^\W*([a-z]|\d+)(?:\W|$)', re.IGNORECASE)
_PAREN = re.compile(r'\(([a-z])\)', re.IGNORECASE)


def parse_choice(text: str, options: Sequence[str]) -> Optional[int]:
    """The option a generated answer names, or ``None``.

    Read in order: a leading option letter (``"B"``, ``"(b)"``, ``"b. red"``; the tokenizer lower-cases), a
    leading 0-based option index (``"2"``), a letter in parentheses anywhere (``"the answer is (c)"``), the exact
    text of one option (case-insensitive). Letters or indices beyond the options do not count.
    """
    s = ' '.join(str(text).split())
    n = len(options)
    m = _LEAD.match(s)
    if m:
        tok = m.group(1)
        k = int(tok) if tok.isdigit() else LETTERS.index(tok.upper())
        if k < n:
            return k
    m = _PAREN.search(s)
    if m and LETTERS.index(m.group(1).upper()) < n:
        return LETTERS.index(m.group(1).upper())
    low = s.lower().strip(' .')
    hits = [i for i, o in enumerate(options) if ' '.join(str(o).split()).lower().strip(' .') == low]
    return hits[0] if len(hits) == 1 else None


def _fallback(seed: int, item_id: str, n: int) -> int:
    """The seeded random option scored for an unreadable answer: depends on (seed, item) only."""
    return int(np.random.default_rng([seed, zlib.crc32(item_id.encode())]).integers(n))


# ------------------------------------------------------------------------------------------------------------- data
class _CachedClips(Dataset):
    """Records -> frames at ``cache_size`` px through the frame cache; says whether this read decoded the video."""

    def __init__(self, records, sampling: FrameSampling, cache_size: int, cache_dir: str):
        self.records, self.sampling, self.size = list(records), sampling, cache_size
        self.cache = FrameCache(cache_dir)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> Dict[str, Any]:
        r = self.records[i]
        t0 = time.perf_counter()
        try:
            key = self.cache.key(r.video, self.size, self.sampling, r.start, r.end, 'error')
            cached = os.path.isfile(self.cache._file(key))
            clip = read_video(r.video, self.sampling, start=r.start, end=r.end, size=self.size, cache=self.cache)
        except (VideoReadError, OSError) as e:
            reason = getattr(e, 'reason', 'undecodable')
            return dict(record=r, error=f'{reason}: {getattr(e, "detail", e)}', reason=reason,
                        read_s=time.perf_counter() - t0, decoded=True)
        return dict(record=r, frames=clip.frames, indices=clip.indices.tolist(),
                    timestamps=[round(float(t), 4) for t in clip.timestamps], read_s=time.perf_counter() - t0,
                    decoded=not cached)


def _collate(batch):
    return list(batch)


# ------------------------------------------------------------------------------------------------------------ sweep
def eval_video(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run ``zoo eval-video`` with command-line style arguments.

    Returns:
        ``rows`` (one dict per model, frames and size; a failed evaluation has an ``error``), ``paths`` (the written
        files), ``predictions`` (one dict per item and row) and ``failed`` (count).

    Raises:
        ValueError / FileNotFoundError / zoo.datasets.videoqa.BenchmarkFormatError / CheckpointMismatchError /
            OutputDirError: user errors, before any evaluation (unknown benchmark, a data root without the expected
            annotation file or with a file of another format, ``--frames 0``, a checkpoint that is not a video-LLM).
    """
    from zoo.datasets.videoqa import load_benchmark
    args = build_video_parser().parse_args(argv)
    _check_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    records, report = load_benchmark(args.benchmark, args.data_root, **({'tasks': args.tasks} if args.tasks else {}))
    records = sorted(records, key=lambda r: r.id)[:args.max_items] if args.max_items else records
    if not records:
        raise ValueError(f'{args.data_root!r} holds no usable {args.benchmark} question (skipped: '
                         f'{dict(report.skipped) or "none"}); check --data-root and --tasks')
    loaded = _load_models(args)
    for m in loaded:  # every grid must be one the tower can merge, before any evaluation
        for t in args.frames:
            for s in (args.sizes or [m['train_size']]):
                try:
                    m['model'].visual_grid(t, s, s)
                except ValueError as e:
                    raise ValueError(f'{m["label"]} cannot take {t} frames x {s} px: {e}') from None
    with sweep_output_dir(args.output, 'zoo eval-video', args.overwrite) as staged:
        cache = args.frame_cache or tempfile.mkdtemp(prefix='zoo-videoqa-')
        try:
            return _sweep(args, records, report, loaded, staged=staged, cache_dir=cache)
        finally:
            if not args.frame_cache:
                shutil.rmtree(cache, ignore_errors=True)


def _sweep(args, records, report, loaded, staged: bool, cache_dir: str) -> Dict[str, Any]:
    device = torch.device(args.device or ('cuda' if torch.cuda.is_available() else 'cpu'))
    frames_list = sorted(dict.fromkeys(args.frames))
    target = os.path.join(args.output, STAGING) if staged else args.output
    if os.path.isdir(os.path.join(args.output, STAGING)):
        shutil.rmtree(os.path.join(args.output, STAGING))
    os.makedirs(target, exist_ok=True)
    plan = [(t, s, m) for t in frames_list for m in loaded
            for s in sorted(dict.fromkeys(args.sizes or [m['train_size']]), reverse=True)]
    cache_size = max(s for _, s, _ in plan)
    models = [dict(label=m['label'], model=m['name'], scheme=m['scheme'], checkpoint=m['checkpoint'], seed=m['seed'],
                   train_frames=m['train_frames'], train_size=m['train_size'], weights=m['weights']) for m in loaded]
    protocol = dict(benchmark=args.benchmark, data_root=os.path.abspath(args.data_root), items=len(records),
                    load_report=report.summary(), frames=frames_list, sizes=sorted({s for _, s, _ in plan}),
                    cache_size=cache_size,
                    sampling='uniform, segment midpoints (MVBench)' if args.sampling == 'uniform' else
                    f'{args.fps:g} frames per second, at most the frame count (segment midpoints)',
                    resize=f'shorter side + centre crop to {cache_size} px (cached), then resized to each size',
                    batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, seed=args.seed,
                    device=str(device), decoding='greedy, KV cache, left padding', unreadable={})
    rows: List[Dict[str, Any]] = []
    preds: List[Dict[str, Any]] = []
    frame_log: Dict[str, Dict[str, Any]] = {}
    paths: Dict[str, str] = {}
    for t, s, m in plan:
        sampling = FrameSampling('uniform', t) if args.sampling == 'uniform' else FrameSampling('fps', t, fps=args.fps)
        ds = _CachedClips(records, sampling, cache_size, cache_dir)
        log = frame_log.setdefault(str(t), {})
        row, item_preds = _eval_one(args, m, t, s, ds, device, log, protocol['unreadable'])
        rows.append(row)
        preds += item_preds
        paths = write_video_report(rows, models, protocol, target, preds, frame_log, notes=args.note,
                                   total=len(plan))
    if staged:
        for name in os.listdir(target):
            os.replace(os.path.join(target, name), os.path.join(args.output, name))
        shutil.rmtree(target)
        paths = {k: os.path.join(args.output, os.path.basename(v)) for k, v in paths.items()}
    failed = [r for r in rows if r.get('error')]
    return dict(rows=rows, paths=paths, predictions=preds, failed=len(failed))


def _eval_one(args, m, frames: int, size: int, ds: _CachedClips, device, frame_log: Dict[str, Any],
              unreadable: Dict[str, str]) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """Evaluate one model at one (frames, size); a failure becomes the row's ``error``."""
    row = dict(label=m['label'], model=m['name'], scheme=m['scheme'], checkpoint=m['checkpoint'],
               train_frames=m['train_frames'], train_size=m['train_size'], frames=frames, size=size)
    model = m['model']
    preds: List[Dict[str, Any]] = []
    decoded = read_s = decode_s = model_s = 0.0
    t_start = time.perf_counter()
    try:
        model.to(device)
        loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers, collate_fn=_collate)
        for batch in tqdm(loader, desc=f'{m["label"]} @ {frames}f x {size}px', unit='batch',
                          disable=args.no_progress, leave=False):
            good = []
            for it in batch:
                read_s += it['read_s']
                if it['decoded']:
                    decoded += 1
                    decode_s += it['read_s']
                if 'error' in it:
                    unreadable[it['record'].video] = it['error']
                    continue
                frame_log.setdefault(it['record'].id, dict(indices=it['indices'], timestamps=it['timestamps']))
                good.append(it)
            if not good:
                continue
            t0 = time.perf_counter()
            texts = _answer(model, good, size, args.max_new_tokens, device)
            model_s += time.perf_counter() - t0
            for it, text in zip(good, texts):
                r = it['record']
                parsed = parse_choice(text, r.options)
                pred = parsed if parsed is not None else _fallback(args.seed, r.id, len(r.options))
                preds.append(dict(label=m['label'], frames=frames, size=size, id=r.id, task=r.task,
                                  category=r.category, output=text, pred=pred, answer=r.answer,
                                  correct=int(pred == r.answer), fallback=int(parsed is None),
                                  num_options=len(r.options),
                                  **{k: r.extra[k] for k in ('length', 'depth') if k in r.extra}))
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # out of memory, a grid the tower cannot take, ...: record and go on
        detail = ' '.join(str(e).split())[:300]
        _logger.error('%s @ %d frames x %d px failed: %s: %s', m['label'], frames, size, type(e).__name__, detail)
        row.update(acc=float('nan'), n=0, error=f'{type(e).__name__}: {detail}')
        return row, []
    finally:
        model.to('cpu')
    df = pd.DataFrame(preds)
    n = len(df)
    row.update(n=n, correct=int(df['correct'].sum()) if n else 0, acc=100.0 * df['correct'].mean() if n else math.nan,
               chance=100.0 * (1.0 / df['num_options']).mean() if n else math.nan,
               fallback=int(df['fallback'].sum()) if n else 0, unreadable=len(ds) - n, decoded=int(decoded),
               read_s=round(read_s, 3), decode_s=round(decode_s, 3), model_s=round(model_s, 3),
               wall_s=round(time.perf_counter() - t_start, 3), error='')
    if n:
        qa = df[df['task'] != NIAH_TASK]
        niah = df[df['task'] == NIAH_TASK]
        row['acc_qa'] = 100.0 * qa['correct'].mean() if len(qa) else math.nan
        row['acc_vniah'] = 100.0 * niah['correct'].mean() if len(niah) else math.nan
        for task, part in df.groupby('task'):
            row[f'acc:{task}'] = 100.0 * part['correct'].mean()
        cats = df[df['category'] != df['task']]
        for cat, part in cats.groupby('category'):
            row[f'acc:cat:{cat}'] = 100.0 * part['correct'].mean()
    _logger.info('%-22s %3d frames x %3d px  acc %6.2f (chance %.1f)  %d/%d correct, %d fallback, %d unreadable | '
                 'decoded %d videos in %.1f s, model %.1f s', m['label'], frames, size, row['acc'], row['chance'],
                 row['correct'], n, row['fallback'], row['unreadable'], decoded, decode_s, model_s)
    return row, preds


def _answer(model, items: List[Dict[str, Any]], size: int, max_new_tokens: int, device) -> List[str]:
    """Generated answer texts of a left-padded batch."""
    prompts, clips = [], []
    for it in items:
        r = it['record']
        frames = resize_frames(it['frames'], size) if it['frames'].shape[1:3] != (size, size) else it['frames']
        clip, seg = model.prepare_video(frames, it['timestamps'])
        prompts.append(model.prompt([seg, format_question(r.question, r.options)]))
        clips.append(clip.to(device))
    b = model.collate(prompts, 'left')
    out = model.generate(b['input_ids'].to(device), attention_mask=b['attention_mask'].to(device), videos=clips,
                         video_grid_thw=b['video_grid_thw'], second_per_grid_ts=b['second_per_grid_ts'],
                         max_new_tokens=max_new_tokens)
    eos, pad = model.tokenizer.eos_id, model.tokenizer.pad_id
    texts = []
    for row in out.new_tokens.tolist():
        keep = []
        for tok in row:
            if tok in (eos, pad):
                break
            keep.append(tok)
        texts.append(model.tokenizer.decode(keep))
    return texts


# ----------------------------------------------------------------------------------------------------------- report
def _fmt(v: Any, digits: int = 1) -> str:
    return 'n/a' if v is None or pd.isna(v) else f'{v:.{digits}f}'


def _pivot_table(df: pd.DataFrame, value: str, title_unit: str = 'f') -> str:
    wide = df.pivot_table(index='label', columns='frames', values=value, sort=False, dropna=False)
    wide = wide.reindex(list(dict.fromkeys(df['label'])))
    cols = sorted(wide.columns)
    lines = ['| model | ' + ' | '.join(f'{c} {title_unit}' for c in cols) + ' |', '|' + '---|' * (len(cols) + 1)]
    for label in wide.index:
        lines.append(f'| {label} | ' + ' | '.join(_fmt(wide.loc[label, c]) for c in cols) + ' |')
    return '\n'.join(lines)


def plot_accuracy(df: pd.DataFrame, path: str, title: str) -> None:
    """Accuracy against frames per model (at its training size): QA tasks, and V-NIAH when present; chance dashed."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from .report import series_styles
    panels = [('acc_qa', 'QA tasks (V-NIAH excluded)')] if df.get('acc_qa') is not None else [('acc', 'all items')]
    if 'acc_vniah' in df and df['acc_vniah'].notna().any():
        panels.append(('acc_vniah', 'V-NIAH'))
    if 'acc_qa' in df and not df['acc_qa'].notna().any():
        panels = panels[1:] or [('acc', 'all items')]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels) + 2.2, 4.2), dpi=120, squeeze=False)
    axes = axes[0]
    part = df[df['size'] == df['train_size']]
    styles = series_styles(part[['label']].assign(pe=None)) if len(part) else {}
    for ax, (col, name) in zip(axes, panels):
        for label, p in part.groupby('label', sort=False):
            p = p.sort_values('frames')
            st = styles.get(label, {})
            ax.plot(p['frames'], p[col], label=label, ms=5, **st)
            tf = p[p['frames'] == p['train_frames']]
            ax.plot(tf['frames'], tf[col], marker='*', ms=13, color=st.get('color'), mec='black', mew=0.6, ls='none')
        ax.set_xscale('log', base=2)
        ticks = sorted(set(df['frames']))
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel('frames per clip')
        ax.set_ylabel('accuracy (%)')
        top = part[col].max() if len(part) and part[col].notna().any() else 0
        ax.set_ylim(0, min(100, max(60, top + 10)))  # from 0: near-chance noise must not look like a trend
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    chance = _chance_by_panel(df)
    for ax, (col, _) in zip(axes, panels):
        if col in chance and not pd.isna(chance[col]):
            ax.axhline(chance[col], color='grey', ls='--', lw=1, label='chance')
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    axes[-1].legend(list(handles.values()), list(handles), fontsize=8, loc='upper left', bbox_to_anchor=(1.02, 1.0),
                    borderaxespad=0.)
    fig.suptitle(title + '  (★ = training frames)', fontsize=10)
    fig.tight_layout()
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png'))
    plt.close(fig)


def _chance_by_panel(df: pd.DataFrame) -> Dict[str, float]:
    out = {}
    for col in ('acc_qa', 'acc_vniah', 'acc'):
        key = 'chance_' + col.split('_')[-1] if col != 'acc' else 'chance'
        if key in df:
            out[col] = df[key].dropna().mean() if df[key].notna().any() else math.nan
    return out


def plot_vniah(preds: pd.DataFrame, path: str, title: str) -> None:
    """V-NIAH accuracy over needle depth (columns) x haystack length (rows): one panel per model (rows) and frame
    count (columns), the value written in each cell."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    labels = list(dict.fromkeys(preds['label']))
    frames = sorted(set(preds['frames']))
    fig, axes = plt.subplots(len(labels), len(frames), figsize=(2.6 * len(frames) + 1.2, 1.9 * len(labels) + 0.8),
                             dpi=110, squeeze=False, layout='constrained')
    im = None
    for i, label in enumerate(labels):
        for j, t in enumerate(frames):
            ax = axes[i][j]
            p = preds[(preds['label'] == label) & (preds['frames'] == t)]
            wide = p.pivot_table(index='length', columns='depth', values='correct', aggfunc='mean') * 100
            im = ax.imshow(wide.values, cmap='viridis', vmin=0, vmax=100, aspect='auto')
            ax.set_xticks(range(len(wide.columns)), [f'{d:g}' for d in wide.columns], fontsize=7)
            ax.set_yticks(range(len(wide.index)), [str(int(v)) for v in wide.index], fontsize=7)
            for a in range(wide.shape[0]):
                for b in range(wide.shape[1]):
                    v = wide.values[a, b]
                    ax.text(b, a, 'n/a' if pd.isna(v) else f'{v:.0f}', ha='center', va='center', fontsize=7,
                            color='white' if pd.isna(v) or v < 60 else 'black')
            if i == 0:
                ax.set_title(f'{t} frames', fontsize=9)
            if j == 0:
                ax.set_ylabel(f'{label}\nhaystack (frames)', fontsize=8)
            if i == len(labels) - 1:
                ax.set_xlabel('needle depth', fontsize=8)
    if im is not None:
        fig.colorbar(im, ax=axes, label='accuracy (%)', fraction=0.03, pad=0.02)
    fig.suptitle(title, fontsize=10)
    write_atomic(path, lambda tmp: fig.savefig(tmp, format='png', bbox_inches='tight'))
    plt.close(fig)


def write_video_report(rows: List[Dict[str, Any]], models: List[Dict[str, Any]], protocol: Dict[str, Any],
                       out_dir: str, predictions: List[Dict[str, Any]], frame_log: Dict[str, Any],
                       notes: Sequence[str] = (), total: Optional[int] = None) -> Dict[str, str]:
    """Write ``results.csv``, ``results.json``, ``report.md``, ``accuracy.png`` and (with V-NIAH items) ``vniah.png``,
    each atomically. Returns their paths (keys ``csv``, ``json``, ``md``, ``png``, ``vniah``)."""
    df = pd.DataFrame(rows)
    pr = pd.DataFrame(predictions)
    if len(pr):  # chance per panel, from the items themselves
        pr['chance'] = 100.0 / pr['num_options']
        for col, sel in (('chance_qa', pr['task'] != NIAH_TASK), ('chance_vniah', pr['task'] == NIAH_TASK)):
            ch = pr[sel].groupby(['label', 'frames', 'size'])['chance'].mean()
            df[col] = [ch.get((r['label'], r['frames'], r['size']), math.nan) for _, r in df.iterrows()]
    paths = {k: os.path.join(out_dir, n) for k, n in
             dict(csv='results.csv', json='results.json', md='report.md', png='accuracy.png').items()}
    total = len(rows) if total is None else total
    failed = [r for r in rows if r.get('error')]
    status = dict(done=len(rows), total=total, failed=len(failed), complete=len(rows) >= total)
    write_text_atomic(paths['csv'], df.to_csv(index=False))
    write_text_atomic(paths['json'], json.dumps(dict(status=status, protocol=protocol, models=models, results=rows,
                                                     predictions=predictions, frames=frame_log), default=str))
    ok = df[df['error'] == ''] if 'error' in df else df
    title = f'{protocol["benchmark"]} ({protocol["items"]} questions)'
    if len(ok):
        plot_accuracy(ok, paths['png'], title)
    has_niah = len(pr) and (pr['task'] == NIAH_TASK).any() and {'length', 'depth'} <= set(pr.columns)
    if has_niah:
        paths['vniah'] = os.path.join(out_dir, 'vniah.png')
        plot_vniah(pr[pr['task'] == NIAH_TASK], paths['vniah'], 'V-NIAH accuracy (%): haystack length x needle depth')
    md = [f'# Video QA: {protocol["benchmark"]}, accuracy (%) against frames per clip', '']
    if len(rows) < total:
        md += [f'**Incomplete: {len(rows)} of {total} (model, frames, size) evaluations done** (the files are '
               'rewritten after every evaluation).', '']
    lr = protocol['load_report']
    md += [f'Data: `{protocol["data_root"]}`: {protocol["items"]} questions ({lr["rows"]} rows read, skipped: '
           f'{lr["skipped"] or "none"}).', '']
    at_train = ok[ok['size'] == ok['train_size']] if len(ok) else ok
    if len(at_train):
        md += ['### All questions (at each model\'s training frame size)', '', _pivot_table(at_train, 'acc'), '']
        if 'acc_qa' in at_train and at_train['acc_qa'].notna().any():
            md += ['### QA tasks (V-NIAH excluded)', '', _pivot_table(at_train, 'acc_qa'), '']
        if 'acc_vniah' in at_train and at_train['acc_vniah'].notna().any():
            md += ['### V-NIAH', '', _pivot_table(at_train, 'acc_vniah'), '']
        ch = _chance_by_panel(at_train)
        md += ['Chance (mean of 1 / options): ' + ', '.join(
            f'{name} {_fmt(ch.get(col))}' for col, name in (('acc_qa', 'QA tasks'), ('acc_vniah', 'V-NIAH'))
            if not pd.isna(ch.get(col, math.nan))) + '.', '', '![accuracy against frames](accuracy.png)', '']
        task_cols = [c for c in ok.columns if c.startswith('acc:')]
        if task_cols:
            md += ['### Per task / category', '', '| model | frames | size | ' + ' | '.join(
                c[4:] for c in task_cols) + ' |', '|' + '---|' * (len(task_cols) + 3)]
            for _, r in ok.iterrows():
                md.append(f'| {r["label"]} | {r["frames"]} | {r["size"]} | ' + ' | '.join(
                    _fmt(r[c]) for c in task_cols) + ' |')
            md.append('')
    if has_niah:
        md += ['### V-NIAH: haystack length x needle depth', '', '![V-NIAH heatmaps](vniah.png)', '']
    if len(ok):
        md += ['### Answers read and speed', '', '| model | frames | size | n | fallback (unparsed) | unreadable | '
               'videos decoded | decode s | cache read s | model s |', '|' + '---|' * 10]
        for _, r in ok.iterrows():
            md.append(f'| {r["label"]} | {r["frames"]} | {r["size"]} | {r["n"]} | {r["fallback"]} | '
                      f'{r["unreadable"]} | {r["decoded"]} | {r["decode_s"]:.1f} | '
                      f'{r["read_s"] - r["decode_s"]:.1f} | {r["model_s"]:.1f} |')
        md.append('')
    if failed:
        md += ['### Failed evaluations', ''] + [f'- {r["label"]} at {r["frames"]} frames x {r["size"]} px: '
                                                f'{r["error"]}' for r in failed] + ['']
    for note in notes:
        md += [note, '']
    md += ['## Protocol', '',
           f'- Frames: {protocol["sampling"]} inside each item\'s window; {protocol["resize"]}. Indices and timestamps '
           'of every item per frame count: `results.json` -> `frames`.',
           '- Prompt: the MVBench prompt (`Question: ... Options: (A) ... Answer with the option\'s letter from the '
           f'given choices directly.`); greedy decoding of {protocol["max_new_tokens"]} tokens, KV cache, left-padded '
           f'batches of {protocol["batch_size"]}; {protocol["device"]}.',
           '- Scoring: the option letter the model writes (else a 0-based index, a letter in parentheses, or an '
           f'option\'s exact text); when none is read, a random option seeded by ({protocol["seed"]}, item id) is '
           'scored and counted as a fallback.',
           f'- Unreadable videos: {len(protocol["unreadable"])} (left out of every count).', '',
           '| model | timm-style name | checkpoint | trained at |', '|---|---|---|---|']
    for m in models:
        md.append(f'| {m["label"]} | `{m["model"]}` | `{m["checkpoint"]}` | {m["train_frames"]} frames x '
                  f'{m["train_size"]} px |')
    if protocol['unreadable']:
        md += ['', '## Unreadable videos', ''] + [f'- `{p}`: {e}' for p, e in list(protocol['unreadable'].items())[:50]]
    write_text_atomic(paths['md'], '\n'.join(md) + '\n')
    return paths
