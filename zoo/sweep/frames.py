"""``zoo eval-frames``: zero-shot accuracy of video models across clip lengths (frames) and frame sizes (pixels).

Models come as in ``zoo eval-resolution`` (``--run DIR``, ``--checkpoint PATH``, ``--model NAME --checkpoint PATH``).
Every model is loaded once at its training clip (recorded ``num_frames`` and ``img_size``); for every (frames, size)
cell a copy is moved there with ``set_input_size(img_size=size, num_frames=frames)`` (which adapts its position
encoding) and evaluated on the video folder: ``frames`` frames at the segment midpoints (MVBench's rule), resized on
the shorter side and centre-cropped to ``size`` pixels, normalised with the model's training mean / std. Decoded
frames are cached on disk per (file, frames, size), so every model sees identical inputs. ``--extrapolation`` adds a
variant per training-free strategy, as in ``zoo eval-resolution``.

A thin front end of the sweep engine (:mod:`zoo.sweep.engine`): results go to ``results.csv``, ``results.json``,
``report.md``, ``scaling.png`` and ``heatmap_<label>.png`` per model, one set per finished cell; ``--resume``
continues an interrupted sweep.
"""
from __future__ import annotations

__all__ = ['build_frames_parser', 'eval_frames']

import argparse
import copy
import logging
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

from zoo.datasets.folder import evaluation_root
from zoo.datasets.splits import configure_clips, open_video_split
from zoo.datasets.video import VideoReadError, probe_video
from zoo.datasets.video_folder import collate_video_skip_bad
from zoo.runs.checkpoints import write_results_file
from zoo.runs.models import is_video_model, model_mean_std
from zoo.tasks import VideoClassificationTask
from .classify import (COUNT_FIELDS, evaluate_classifier, family_of, load_classifiers, refuse_other_kinds,
                       with_strategies)
from .engine import SweepModel
from .options import (add_allow_root_option, amp_dtype_of, check_common, clip_memory_check, device_of,
                      frame_cache_dir, run_sweep, sweep_parser)
from .report import frames_page


_logger = logging.getLogger('zoo.sweep')


#: Options of eval-resolution that mean nothing for clips (frames are resized on the shorter side, centre-cropped).
_IMAGE_ONLY = {'--crop-pct': dict(type=float), '--interpolation': dict(), '--channels-last': dict(action='store_true')}


def _add_options(p: argparse.ArgumentParser) -> None:
    """The options of this sweep only (the shared ones: :func:`zoo.sweep.options.sweep_parser`)."""
    p.add_argument('--data-dir', required=True, metavar='DIR',
                   help='video folder root: DIR/<split>/<class>/<video> (or DIR/<class>/<video>)')
    p.add_argument('--split', default=None, help='sub-folder of --data-dir to evaluate (default: val, test or none)')
    add_allow_root_option(p)
    p.add_argument('--frames', type=int, nargs='+', required=True, metavar='T',
                   help='clip lengths to evaluate (frames; multiples of each model\'s tubelet size)')
    p.add_argument('--sizes', type=int, nargs='+', required=True, metavar='PX', help='frame sizes (px)')
    p.add_argument('--mean', type=float, nargs=3, default=None, help='normalisation mean (default: each checkpoint\'s)')
    p.add_argument('--std', type=float, nargs=3, default=None, help='normalisation std (default: each checkpoint\'s)')
    p.add_argument('--class-map', metavar='TXT', help='timm class map: class folder names, one per line')
    p.add_argument('-b', '--batch-size', type=int, default=128, help='evaluation batch size')
    p.add_argument('--max-per-class', type=int, default=None, help='evaluate only the first N clips of each class')
    p.add_argument('--frame-cache', metavar='DIR', default=None,
                   help='keep decoded frames here between runs (default: a temporary folder removed at the end)')
    p.add_argument('--pin-mem', action='store_true', help='pin CPU memory in the data loader')
    for flag, kw in _IMAGE_ONLY.items():  # eval-resolution's image options: refused with the reason
        p.add_argument(flag, help=argparse.SUPPRESS, **kw)
    p.add_argument('--results-file', metavar='PATH', help='also write the result rows to this .csv or .json file')


def build_frames_parser(prog: str = 'zoo eval-frames') -> argparse.ArgumentParser:
    """Zero-shot top-1/top-5 of video models (pe_video_vit_*) at several clip lengths and frame sizes, on a video
    folder (DATA/val/<class>/*.mp4, DATA/test or DATA itself). Writes OUTPUT/results.csv, results.json, report.md,
    scaling.png, heatmap_<model>.png and manifest.json.

    Models as in zoo eval-resolution: --run DIR (final checkpoint-last.pth), --checkpoint PATH or --model NAME
    --checkpoint PATH. Frames are sampled at segment midpoints, resized on the shorter side and centre-cropped.
    Layout under --data-dir: DIR/val/<class>/<video> (or DIR/test/..., DIR/<split>/... with --split, or
    DIR/<class>/<video>); videos .mp4 .mkv .mov .avi .webm, other files are listed and skipped, hidden folders are no
    classes; symlinks may lead into DIR or an --allow-root folder. --frames above a clip's length repeat its frames
    (logged once with the clip lengths); a sweep whose batches would not fit in memory is refused before it starts.
    Example (after the README's zoo make-videos --task ranking --output data/video-ranking and its two trainings):
    zoo eval-frames --run runs/video/rope3d --run runs/video/sincos --data-dir data/video-ranking --frames 4 8 16 32
    --sizes 24 32 40 48 64 --output runs/eval-frames
    """
    return sweep_parser(prog, build_frames_parser.__doc__, 'eval-frames', _add_options,
                        extrapolation='clip: frames and size')


def _check_clips(args, paths: Sequence[str], frames: List[int], sizes: List[int]) -> None:
    """Log, once, the clips shorter than a --frames value (their frames repeat), and refuse a sweep whose batches of
    decoded clips would not fit in memory (before any model loads or the output is locked)."""
    infos = []
    for path in paths:
        try:
            infos.append((path, probe_video(path, check_last=False)))
        except VideoReadError:
            continue  # counted as unreadable when evaluated
    if not infos:
        return
    for t in frames:
        short = sorted({i.num_frames for _, i in infos if i.num_frames < t})
        if short:
            k = sum(i.num_frames < t for _, i in infos)
            _logger.warning('--frames %d: %d of %d clips hold fewer frames (%s frames): their frames repeat', t, k,
                            len(infos), ', '.join(map(str, short[:8])) + (' ...' if len(short) > 8 else ''))
    native = (max(i.height for _, i in infos), max(i.width for _, i in infos))
    clip_memory_check(f'--frames {max(frames)} at --sizes {max(sizes)} with -b {args.batch_size} (clips up to '
                      f'{native[0]}x{native[1]} px)', args.batch_size, max(frames), native, sizes,
                      'lower --frames or --batch-size')


def eval_frames(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run ``zoo eval-frames`` with command-line style arguments.

    Returns:
        ``rows`` (one dict per model, frames and size; a failed evaluation has an ``error``), ``paths`` (the written
        files), ``unreadable`` (count), ``failed`` (count of failed evaluations) and ``resumed``.

    Raises:
        ValueError / FileNotFoundError / zoo.models.CheckpointMismatchError / zoo.errors.ZooError: user errors,
            before any evaluation (an image model or a video-LLM, frames not divisible by a tubelet, an output dir
            in use, batches of clips that would not fit in memory: zoo.datasets.video.VideoMemoryError).
    """
    args = build_frames_parser().parse_args(argv)
    check_common(args)
    given = [flag for flag in _IMAGE_ONLY if getattr(args, flag[2:].replace('-', '_')) not in (None, False)]
    if given:
        raise ValueError(f'{", ".join(given)} apply to image models; video frames are resized on the shorter side and '
                         'centre-cropped to each --sizes value')
    frames, sizes = sorted(dict.fromkeys(args.frames)), sorted(dict.fromkeys(args.sizes))
    device = device_of(args)
    dtype = amp_dtype_of(args, device)
    refuse_other_kinds(args, 'video', 'zoo eval-frames')  # the model's kind before the data and the classes
    root = evaluation_root(args.data_dir, args.split, 'video')
    split = open_video_split(root, args.data_dir, args.max_per_class, args.class_map, args.allow_root)
    classes = split.classes
    _check_clips(args, [p for p, _ in split.samples], frames, sizes)
    models = with_strategies(_load_models(args, frames, sizes, classes, root), args.extrapolation)
    protocol = dict(data_root=root, num_classes=len(classes), frames=frames, sizes=sizes, batch_size=args.batch_size,
                    device=str(device), amp=dtype is not None, max_per_class=args.max_per_class, zero_shot=True,
                    sampling='uniform, segment midpoints', resize='shorter side, centre crop',
                    weights='EMA' if args.use_ema else 'raw')
    task = VideoClassificationTask(len(classes))

    def evaluate(m: SweepModel, cell: Dict[str, Any], state) -> tuple:
        t, s = cell['frames'], cell['size']
        # the split opened once (its warnings about the folder logged once per sweep, not once per cell)
        ds = copy.copy(split)
        ds.bad_counts = Counter()
        ds = configure_clips(ds, t, s, m.info['mean'], m.info['std'], train=False, cache_dir=cache)
        out = evaluate_classifier(m, ds, dict(img_size=s, num_frames=t), args, device, dtype, task,
                                  collate_fn=collate_video_skip_bad, desc=f'{m.label} @ {t}f x {s}px')
        bad = out.pop('bad')
        out['clips_per_s'] = out.pop('per_s')
        _logger.info('%-16s %3d frames x %4d px  top1 %6.2f  top5 %6.2f  (%d/%d correct, %d unreadable)  %.1f '
                     'clips/s', m.label, t, s, out['top1'], out['top5'], out['correct1'], out['n'], out['unreadable'],
                     out['clips_per_s'])
        return out, dict(unreadable={b.path: b.error for b in bad})

    def base_row(m: SweepModel, cell: Dict[str, Any]) -> Dict[str, Any]:
        i = m.info
        row = dict(label=m.label, model=i['model'], checkpoint=i['checkpoint'], pe=i['pe'], weights=i['weights'],
                   train_frames=i['train_frames'], train_size=i['train_size'], frames=cell['frames'],
                   size=cell['size'], frame_scale=round(cell['frames'] / i['train_frames'], 4),
                   scale=round(cell['size'] / i['train_size'], 4))
        return row

    plan = [(i, dict(frames=t, size=s)) for i in range(len(models)) for t in frames for s in sizes]
    with frame_cache_dir(args, 'zoo-frames-') as cache:
        result = run_sweep('zoo eval-frames', args, models, plan, evaluate, frames_page, protocol, base_row,
                           failed_row=dict(COUNT_FIELDS, clips_per_s=float('nan')), inputs=[root, args.class_map])
    if args.results_file:
        write_results_file(args.results_file, result['rows'])
    return dict(result, unreadable=len(result['extras'].get('unreadable', {})))


def _load_models(args, frames: List[int], sizes: List[int], classes: List[str], root: str) -> List[SweepModel]:
    """Every model at its training clip, checked against every (frames, size) before any evaluation."""
    def check(model, meta, name):
        if not is_video_model(model):
            raise ValueError(f'{name} is an image model; zoo eval-frames evaluates video models (pe_video_vit_*); '
                             'use zoo eval-resolution for images')
        tubelet, patch = model.patch_embed.tubelet_size, model.patch_embed.patch_size[0]
        bad_frames = [f for f in frames if f % tubelet]
        if bad_frames:
            raise ValueError(f'--frames {bad_frames} are not divisible by the tubelet size {tubelet} of {name}; use '
                             f'multiples of {tubelet}')
        bad_sizes = [s for s in sizes if s % patch]
        if bad_sizes and not model.dynamic_img_pad:
            raise ValueError(f'--sizes {bad_sizes} are not divisible by the patch size {patch} px of {name}; use '
                             f'multiples of {patch}')
    models = []
    for m in load_classifiers(args, classes, root, check):
        model, meta = m['model'], m['meta']
        data_cfg = dict(meta.get('data_config') or {})
        mean, std = model_mean_std(model, args.mean or data_cfg.get('mean'), args.std or data_cfg.get('std'))
        info = dict(model=m['name'], checkpoint=m['checkpoint'], pe=getattr(model, 'pe_name', '') or '',
                    family=family_of(model), weights='EMA' if args.use_ema else 'raw', mean=mean, std=std,
                    model_kwargs=meta.get('model_kwargs') or {},
                    train_size=int(meta.get('img_size') or model.patch_embed.img_size[0]),
                    train_frames=int(meta.get('num_frames') or model.num_frames),
                    adaptation=getattr(getattr(model, 'pe', None), 'adaptation', 'n/a'))
        models.append(SweepModel(m['label'], model, info))
    return models
