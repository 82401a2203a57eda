"""``zoo eval-video``: multiple-choice accuracy of video-LLMs on a video-QA benchmark across frame counts and sizes.

Models come as ``--run DIR`` (a ``zoo train-vlm`` output dir: its final ``checkpoint-last.pth``) or ``--checkpoint
PATH`` (a ``zoo train-vlm`` checkpoint; it records the ``pe_vlm_*`` name and options). Questions come from any reader
of :mod:`zoo.datasets.videoqa` (``--benchmark mvbench|videomme|nextqa_mc|mlvu|longvideobench|egoschema``).

Protocol, per (frames, size, model): ``frames`` frames at the segment midpoints of the item's window (MVBench's rule,
:class:`zoo.datasets.video.FrameSampling`), resized on the shorter side and centre-cropped to ``size`` px; the MVBench
prompt (:func:`zoo.tasks.format_question`), greedy decoding of ``--max-new-tokens`` tokens with a KV cache,
left-padded batches. The answer is the option letter the model writes (:func:`zoo.tasks.answers.parse_choice`); when
none can be read, a seeded random option is scored instead and counted as a fallback.

Decoding: frames are read once per (video, sampling) at the largest ``--sizes`` value into an on-disk
:class:`~zoo.datasets.video.FrameCache` and resized from there for smaller sizes and for every further model, so a
sweep over models and sizes decodes each video once per frame count. Decode time and model time are reported apart.

A thin front end of the sweep engine (:mod:`zoo.sweep.engine`): results go to ``results.csv`` (one row per model,
frames and size; per-task accuracy columns ``acc:<task>``), ``results.json`` (protocol, models, rows, every
prediction, and the frame indices and timestamps of every item per frame count), ``report.md``, ``accuracy.png`` and
``vniah.png``, one set per finished cell; ``--resume`` continues an interrupted sweep.

V-NIAH: LongVA, "Long Context Transfer from Language to Vision" (arXiv:2406.16852); prompt and frame rule: MVBench
(arXiv:2311.17005).
"""
from __future__ import annotations

__all__ = ['build_video_parser', 'eval_video']

import argparse
import logging
import math
import os
import time
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from zoo.datasets.video import FrameCache, FrameSampling, VideoReadError, read_video
from zoo.runs.models import load_video_llm, run_checkpoint, unique_labels
from zoo.tasks.answers import fallback_choice, generate_answers, parse_choice
from .engine import SweepModel
from .options import (add_allow_root_option, check_common, clip_memory_check, device_of, frame_cache_dir, run_sweep,
                      sweep_parser)
from .report import NIAH_TASK, videoqa_page


_logger = logging.getLogger('zoo.sweep')


def _add_options(p: argparse.ArgumentParser) -> None:
    """The options of this sweep only (the shared ones: :func:`zoo.sweep.options.sweep_parser`)."""
    p.add_argument('--benchmark', required=True, help='benchmark reader (lmms-eval task name, e.g. mvbench)')
    p.add_argument('--data-root', required=True, metavar='DIR',
                   help='the benchmark\'s data root (its layout per benchmark: below)')
    p.add_argument('--tasks', nargs='*', default=None,
                   help='tasks to read (mvbench, mlvu: JSON file stems; default all)')
    p.add_argument('--split', default=None,
                   help='the benchmark\'s split where it has several: nextqa_mc reads <root>/<split>.csv (val, test, '
                        'train; default val), longvideobench <root>/lvb_<split>.json (val, test; default val)')
    add_allow_root_option(p)
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
    p.add_argument('--frame-cache', metavar='DIR', default=None,
                   help='keep decoded frames here between runs (default: a temporary folder removed at the end)')


def build_video_parser(prog: str = 'zoo eval-video') -> argparse.ArgumentParser:
    """Multiple-choice accuracy of video-LLMs (zoo train-vlm runs) on a video-QA benchmark at several frame counts and
    frame sizes. Writes OUTPUT/results.csv, results.json, report.md, accuracy.png, vniah.png (when the benchmark has
    V-NIAH items) and manifest.json.

    Example: zoo eval-video --benchmark mvbench --data-root data/vqa-eval --run runs/vlm/mrope --run
    runs/vlm/videorope --frames 8 16 32 64 --output runs/eval-video. Benchmarks: mvbench, videomme, nextqa_mc,
    mlvu, longvideobench, egoschema (zoo.datasets.videoqa.list_benchmarks()). Rows that cannot be used (a missing
    video, an answer that is no option, a symlink out of the data root) are counted per reason in the report, never
    fatal; --frames above a clip's length repeat its frames (logged once with the clip lengths).
    """
    from zoo.datasets.videoqa import get_benchmark, list_benchmarks
    layouts = ' '.join(f'{name}: {get_benchmark(name)[1]}.' for name in list_benchmarks())
    return sweep_parser(prog, build_video_parser.__doc__ + f'\n    Layout under --data-root. {layouts}\n', 'eval-video',
                        _add_options, 'zoo train-vlm', classifiers=False, amp=False, workers=1)


class _CachedClips(Dataset):
    """Records -> frames at ``cache_size`` px through the frame cache; says whether this read decoded the video (or
    took the frames from the cache), and what the sampling was done over (window frames, clip seconds).

    ``logged`` is shared by the sweep's datasets: what has been logged once per sweep."""

    def __init__(self, records, sampling: FrameSampling, cache_size: int, cache_dir: str, logged: Optional[set] = None):
        self.records, self.sampling, self.size = list(records), sampling, cache_size
        self.cache = FrameCache(cache_dir)
        self.short_logged = False  # clips shorter than the frame count: logged once per sweep and frame count
        self.logged = logged if logged is not None else set()

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> Dict[str, Any]:
        r = self.records[i]
        t0 = time.perf_counter()
        hits = self.cache.hits
        try:
            clip = read_video(r.video, self.sampling, start=r.start, end=r.end, size=self.size, cache=self.cache)
        except (VideoReadError, OSError) as e:
            reason = getattr(e, 'reason', 'undecodable')
            return dict(record=r, error=f'{reason}: {getattr(e, "detail", e)}', reason=reason,
                        read_s=time.perf_counter() - t0, decoded=True)
        return dict(record=r, frames=clip.frames, indices=clip.indices.tolist(),
                    timestamps=[round(float(t), 4) for t in clip.timestamps], read_s=time.perf_counter() - t0,
                    decoded=self.cache.hits == hits,  # a damaged cache entry is decoded again: counted as decoded
                    length=clip.window_frames or clip.decodable_frames or clip.num_frames, duration=clip.duration,
                    fps=clip.fps)


#: reasons that are about an item, not about its video file (the video may be fine for other items)
ITEM_REASONS = ('bad_window',)


def _as_list(batch):
    return list(batch)


def eval_video(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run ``zoo eval-video`` with command-line style arguments.

    Returns:
        ``rows`` (one dict per model, frames and size; a failed evaluation has an ``error``), ``paths`` (the written
        files), ``predictions`` (one dict per item and row), ``failed`` (count) and ``resumed``.

    Raises:
        ValueError / FileNotFoundError / zoo.datasets.videoqa.BenchmarkFormatError / CheckpointMismatchError /
            OutputDirError: user errors, before any evaluation (unknown benchmark, a data root without the expected
            annotation file or with a file of another format, ``--frames 0``, a checkpoint that is not a video-LLM).
    """
    from zoo.datasets.videoqa import load_benchmark
    args = build_video_parser().parse_args(argv)
    check_common(args)
    if not args.run and not args.checkpoint:
        raise ValueError('no model given: pass --run DIR (a zoo train-vlm output dir) or --checkpoint PATH')
    options = dict(**({'tasks': args.tasks} if args.tasks else {}), **({'split': args.split} if args.split else {}))
    records, report = load_benchmark(args.benchmark, args.data_root, allow_roots=args.allow_root, **options)
    if any((r.extra or {}).get('modality') == 'image' for r in records):
        raise ValueError(f'--benchmark {args.benchmark} is a set of images, and zoo eval-video reads videos; its '
                         'accuracy is the validation accuracy of zoo train-vlm --benchmark imageqa (metrics.csv)')
    records = sorted(records, key=lambda r: r.id)[:args.max_items] if args.max_items else records
    if not records:
        hint = report.hint()
        raise ValueError(f'{args.data_root!r} holds no usable {args.benchmark} question (skipped: '
                         f'{dict(report.skipped) or "none"}); ' + (hint or 'check --data-root and --tasks'))
    _check_memory(args, records)
    models = _load_models(args)
    device = device_of(args)
    frames_list = sorted(dict.fromkeys(args.frames))
    plan = [(i, dict(frames=t, size=s)) for t in frames_list for i, m in enumerate(models)
            for s in sorted(dict.fromkeys(args.sizes or [m.info['train_size']]), reverse=True)]
    cache_size = max(c['size'] for _, c in plan)
    protocol = dict(benchmark=args.benchmark, data_root=os.path.abspath(args.data_root), **options,
                    items=len(records), load_report=report.summary(), frames=frames_list,
                    sizes=sorted({c['size'] for _, c in plan}), cache_size=cache_size,
                    sampling='uniform, segment midpoints (MVBench)' if args.sampling == 'uniform' else
                    f'{args.fps:g} frames per second, at most the frame count (segment midpoints)',
                    resize=f'shorter side + centre crop to {cache_size} px (cached), then resized to each size',
                    batch_size=args.batch_size, max_new_tokens=args.max_new_tokens, seed=args.seed,
                    device=str(device), decoding='greedy, KV cache, left padding')
    datasets: Dict[int, _CachedClips] = {}
    logged: set = set()  # what the sweep has logged once (shared by the frame counts' datasets)

    def evaluate(m: SweepModel, cell: Dict[str, Any], state) -> tuple:
        t = cell['frames']
        if t not in datasets:
            sampling = FrameSampling('uniform', t) if args.sampling == 'uniform' else \
                FrameSampling('fps', t, fps=args.fps)
            datasets[t] = _CachedClips(records, sampling, cache_size, cache, logged)
        return _evaluate_cell(args, m, t, cell['size'], datasets[t], device)

    def base_row(m: SweepModel, cell: Dict[str, Any]) -> Dict[str, Any]:
        i = m.info
        return dict(label=m.label, model=i['model'], scheme=i['scheme'], checkpoint=i['checkpoint'],
                    train_frames=i['train_frames'], train_size=i['train_size'], frames=cell['frames'],
                    size=cell['size'])

    with frame_cache_dir(args, 'zoo-videoqa-') as cache:
        result = run_sweep('zoo eval-video', args, models, plan, evaluate, videoqa_page, protocol, base_row,
                           failed_row=dict(acc=float('nan'), n=0), inputs=[args.data_root])
    return dict(result, predictions=result['extras'].get('predictions', []))


def _check_memory(args, records) -> None:
    """Refuse, before any model loads or the output is locked, a sweep whose batches of decoded clips would not fit
    in memory (the first readable video gives the native frame size)."""
    from zoo.datasets.video import probe_video
    for r in records[:20]:
        try:
            info = probe_video(r.video, check_last=False)
        except VideoReadError:
            continue
        sizes = list(args.sizes or [64])
        clip_memory_check(f'--frames {max(args.frames)} at --sizes {max(sizes)} with -b {args.batch_size} '
                          f'({info.height}x{info.width} px videos)', args.batch_size, max(args.frames),
                          (info.height, info.width), sizes, 'lower --frames or --batch-size')
        return


def _load_models(args) -> List[SweepModel]:
    paths = [run_checkpoint(r, 'zoo train-vlm') for r in args.run] + list(args.checkpoint)
    loaded = []
    for path in paths:
        model, meta = load_video_llm(path, args.use_ema)
        loaded.append((model, meta, path))
    labels = args.label or unique_labels([model.scheme for model, _, _ in loaded],
                                         [(meta.get('args') or {}).get('seed') for _, meta, _ in loaded])
    models = []
    for (model, meta, path), label in zip(loaded, labels):
        info = dict(model=meta['model_name'], scheme=model.scheme, checkpoint=path,
                    seed=(meta.get('args') or {}).get('seed'),
                    train_size=int(meta.get('img_size') or model.data_config['img_size'][0]),
                    train_frames=int(meta.get('num_frames') or 0) or None, weights='EMA' if args.use_ema else 'raw')
        models.append(SweepModel(label, model, info))
    for m in models:  # every grid must be one the tower can merge, before any evaluation
        for t in args.frames:
            for s in (args.sizes or [m.info['train_size']]):
                try:
                    m.model.visual_grid(t, s, s)
                except ValueError as e:
                    raise ValueError(f'{m.label} cannot take {t} frames x {s} px: {e}') from None
    return models


def _evaluate_cell(args, m: SweepModel, frames: int, size: int, ds: _CachedClips, device) -> tuple:
    """Answer every question with one model at one (frames, size): the row's metrics and the extras (predictions,
    frame log, unreadable videos, items left out for their own fault such as a bad window)."""
    model = m.model
    preds: List[Dict[str, Any]] = []
    frame_log: Dict[str, Any] = {}
    unreadable: Dict[str, str] = {}  # video -> error (the file cannot be read)
    bad_items: Dict[str, str] = {}   # item id -> error (the item asks for what its video cannot give)
    skipped: Dict[str, int] = {}     # items left out, per reason
    decoded = cached = 0
    read_s = decode_s = model_s = 0.0
    short: Dict[str, int] = {}
    past_end: Dict[str, tuple] = {}
    t_start = time.perf_counter()
    try:
        model.to(device)
        loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers, collate_fn=_as_list)
        for batch in tqdm(loader, desc=f'{m.label} @ {frames}f x {size}px', unit='batch', disable=args.no_progress,
                          leave=False):
            good = []
            for it in batch:
                read_s += it['read_s']
                if it['decoded']:
                    decoded += 1
                    decode_s += it['read_s']
                else:
                    cached += 1
                r = it['record']
                if 'error' in it:
                    skipped[it['reason']] = skipped.get(it['reason'], 0) + 1
                    if it['reason'] in ITEM_REASONS:
                        bad_items[r.id] = it['error']
                    else:
                        unreadable[r.video] = it['error']
                    continue
                frame_log.setdefault(r.id, dict(indices=it['indices'], timestamps=it['timestamps']))
                if it['length'] < frames:
                    short[r.id] = it['length']
                if r.end is not None and it['duration'] is not None and r.end > it['duration'] + 0.5 / it['fps']:
                    past_end[r.id] = (r.start or 0.0, r.end, it['duration'])
                good.append(it)
            if not good:
                continue
            t0 = time.perf_counter()
            texts = generate_answers(model, good, size, args.max_new_tokens, device)
            model_s += time.perf_counter() - t0
            for it, text in zip(good, texts):
                r = it['record']
                parsed = parse_choice(text, r.options)
                pred = parsed if parsed is not None else fallback_choice(args.seed, r.id, len(r.options))
                preds.append(dict(label=m.label, frames=frames, size=size, id=r.id, task=r.task,
                                  category=r.category, output=text, pred=pred, answer=r.answer,
                                  correct=int(pred == r.answer), fallback=int(parsed is None),
                                  num_options=len(r.options),
                                  **{k: r.extra[k] for k in ('length', 'depth') if k in r.extra}))
    finally:
        model.to('cpu')
    _log_once(ds, frames, short, past_end)
    row = _accuracy_row(pd.DataFrame(preds))
    n_bad = sum(v for k, v in skipped.items() if k in ITEM_REASONS)
    row.update(unreadable=len(ds) - row['n'] - n_bad, bad_window=skipped.get('bad_window', 0), decoded=int(decoded),
               from_cache=int(cached), read_s=round(read_s, 3), decode_s=round(decode_s, 3), model_s=round(model_s, 3),
               wall_s=round(time.perf_counter() - t_start, 3))
    _logger.info('%-22s %3d frames x %3d px  acc %6.2f (chance %.1f)  %d/%d correct, %d fallback, %d unreadable, %d '
                 'bad window | videos: %d decoded in %.1f s, %d from the frame cache; model %.1f s', m.label, frames,
                 size, row['acc'], row['chance'], row['correct'], row['n'], row['fallback'], row['unreadable'],
                 row['bad_window'], decoded, decode_s, cached, model_s)
    return row, dict(predictions=preds, frames={str(frames): frame_log}, unreadable=unreadable, bad_items=bad_items)


def _log_once(ds: _CachedClips, frames: int, short: Dict[str, int], past_end: Dict[str, tuple]) -> None:
    """Warn, once per sweep (and frame count), about items whose frames repeat: clips or windows holding fewer frames
    than asked for, and windows reaching past their clip's end (cut there)."""
    if short and not ds.short_logged:
        ds.short_logged = True
        lengths = sorted(set(short.values()))
        _logger.warning('--frames %d: %d of %d items hold fewer frames in their clip or window (%s frames): their '
                        'frames repeat', frames, len(short), len(ds),
                        ', '.join(map(str, lengths[:8])) + (' ...' if len(lengths) > 8 else ''))
    if past_end and 'past_end' not in ds.logged:
        ds.logged.add('past_end')
        first, (a, b, d) = next(iter(past_end.items()))
        lengths = sorted({round(v[2], 2) for v in past_end.values()})
        _logger.warning('%d of %d items ask for a window past the end of their clip (e.g. %s: %g-%g s of a %.2f s '
                        'clip; clip lengths %s s): the window is cut at the clip\'s end, and its frames repeat when '
                        'it holds fewer than the frame count', len(past_end), len(ds), first, a, b, d,
                        ', '.join(f'{x:g}' for x in lengths[:8]) + (' ...' if len(lengths) > 8 else ''))


def _accuracy_row(df: pd.DataFrame) -> Dict[str, Any]:
    """Accuracy (%) over all items, QA items, V-NIAH items, per task and per category, with chance levels."""
    n = len(df)
    row = dict(n=n, correct=int(df['correct'].sum()) if n else 0, acc=100.0 * df['correct'].mean() if n else math.nan,
               chance=100.0 * (1.0 / df['num_options']).mean() if n else math.nan,
               fallback=int(df['fallback'].sum()) if n else 0)
    if not n:
        return row
    for name, part in (('qa', df[df['task'] != NIAH_TASK]), ('vniah', df[df['task'] == NIAH_TASK])):
        row[f'acc_{name}'] = 100.0 * part['correct'].mean() if len(part) else math.nan
        row[f'chance_{name}'] = 100.0 * (1.0 / part['num_options']).mean() if len(part) else math.nan
    for task, part in df.groupby('task'):
        row[f'acc:{task}'] = 100.0 * part['correct'].mean()
    for cat, part in df[df['category'] != df['task']].groupby('category'):
        row[f'acc:cat:{cat}'] = 100.0 * part['correct'].mean()
    return row
