"""``zoo eval-resolution``: zero-shot accuracy of one or more image models across input sizes.

Models come as ``--run DIR`` (a ``zoo train`` output dir: its final ``checkpoint-last.pth``), as ``--checkpoint PATH``
(a zoo checkpoint rebuilds its model from the recorded name and options), or as ``--model NAME --checkpoint PATH``
pairs (in order; ``--checkpoint pretrained`` loads timm's weights for NAME). For every size a copy of the trained
model is moved to that size with ``set_input_size`` (which adapts its PE) and evaluated on the folder with timm's
eval transform (resize + center crop); ``--extrapolation`` adds a variant per training-free strategy.

A thin front end of the sweep engine (:mod:`zoo.sweep.engine`): cells are sizes; results go to ``results.csv``,
``results.json``, ``report.md``, ``scaling.png`` and ``heatmap.png`` (``extrapolation.png`` with strategies), one set
per finished cell; ``--resume`` continues an interrupted sweep.
"""
from __future__ import annotations

__all__ = ['build_eval_parser', 'eval_resolution']

import argparse
import copy
import logging
import os
import time
from typing import Any, Dict, List, Optional, Sequence

import torch
from timm.data import create_transform, resolve_data_config

from zoo.datasets import open_image_folder
from zoo.datasets.splits import apply_class_map, check_class_folders, load_class_map
from zoo.runs.checkpoints import write_results_file
from zoo.runs.models import is_video_model, is_zoo_model, patch_size_of
from zoo.runs.options import INTERPOLATIONS, autocast
from zoo.tasks import ImageClassificationTask
from .classify import (COUNT_FIELDS, evaluate_classifier, family_of, load_classifiers, refuse_other_kinds,
                       with_strategies)
from .engine import SweepModel
from .options import add_allow_root_option, amp_dtype_of, check_common, device_of, run_sweep, sweep_parser
from .report import resolution_page


_logger = logging.getLogger('zoo.sweep')


def _add_options(p: argparse.ArgumentParser) -> None:
    """The options of this sweep only (the shared ones: :func:`zoo.sweep.options.sweep_parser`)."""
    p.add_argument('--data-dir', required=True, metavar='DIR', help='ImageFolder root (or its parent with val/test)')
    p.add_argument('--split', default=None, help='sub-folder of --data-dir to evaluate (default: val, test or none)')
    p.add_argument('--sizes', type=int, nargs='+', required=True, metavar='PX', help='evaluation input sizes')
    p.add_argument('--crop-pct', type=float, default=None,
                   help='center-crop fraction (default: each checkpoint\'s recorded value, else the model\'s)')
    p.add_argument('--interpolation', default=None, help='resize interpolation (default: each checkpoint\'s)')
    p.add_argument('--mean', type=float, nargs=3, default=None, help='normalisation mean (default: each checkpoint\'s)')
    p.add_argument('--std', type=float, nargs=3, default=None, help='normalisation std (default: each checkpoint\'s)')
    p.add_argument('--class-map', metavar='TXT', help='timm class map: class folder names, one per line (line i = '
                                                      'class i); folders not listed are left out')
    add_allow_root_option(p)
    p.add_argument('-b', '--batch-size', type=int, default=128, help='evaluation batch size')
    p.add_argument('--max-per-class', type=int, default=None, help='evaluate only the first N images of each class')
    p.add_argument('--channels-last', action='store_true', help='channels-last memory layout for model and images')
    p.add_argument('--pin-mem', action='store_true', help='pin CPU memory in the data loader')
    p.add_argument('--results-file', metavar='PATH', help='also write the result rows to this .csv or .json file')
    z = p.add_argument_group('CLIP zero-shot (--zero-shot)')
    z.add_argument('--zero-shot', action='store_true',
                   help='evaluate CLIP models zero-shot: --model is an open_clip config (zoo-ViT-B-16-<pe>, or a stock '
                        'ViT config such as ViT-B-16, whose tower becomes a zoo ape tower so that it can change '
                        'size), --checkpoint a local CLIP weights file; classes scored by open_clip\'s zero-shot '
                        'classifier (class names x templates)')
    z.add_argument('--templates', default='openai', metavar='SET|TXT',
                   help='prompt templates: openai (80), simple (2), or a file with one template per line ({} = class)')
    z.add_argument('--class-names', metavar='TXT', help='prompt class names, one per line in class-folder order '
                                                      '(default: folder names, _ as spaces)')
    z.add_argument('--quick-gelu', action='store_true', help='QuickGELU activations (OpenAI CLIP weights)')


def build_eval_parser(prog: str = 'zoo eval-resolution') -> argparse.ArgumentParser:
    """Zero-shot top-1/top-5 and throughput of one or more models at several input sizes, on an ImageFolder (DATA/val,
    DATA/test, or DATA itself holding the class folders, e.g. ImageNet val). Writes OUTPUT/results.csv,
    results.json, report.md, scaling.png, heatmap.png and manifest.json.

    Models: --run DIR (a zoo train output dir; uses its final checkpoint-last.pth, not the best-on-val one),
    --checkpoint PATH (a zoo checkpoint records its model), or --model NAME --checkpoint PATH pairs, matched in
    order (--checkpoint pretrained = timm weights of NAME). Example: zoo eval-resolution --run runs/ape --run
    runs/rope_mixed --data-dir data/cifar10 --sizes 24 32 40 48 56 64 --output runs/eval
    """
    return sweep_parser(prog, build_eval_parser.__doc__, 'eval-resolution', _add_options, extrapolation='img_size')


def _check_args(args) -> None:
    check_common(args)
    if args.crop_pct is not None and not 0 < args.crop_pct <= 1:
        raise ValueError(f'--crop-pct {args.crop_pct!r}: must be in (0, 1]')
    if args.interpolation is not None and args.interpolation not in INTERPOLATIONS:
        raise ValueError(f'--interpolation {args.interpolation!r}: must be one of {", ".join(INTERPOLATIONS)}')
    if args.std is not None and any(v <= 0 for v in args.std):
        raise ValueError(f'--std {args.std}: must be positive')


def _eval_root(args) -> str:
    """The evaluated folder, as ``open_image_folder`` picks it (``--split``, else val/, test/ or the folder)."""
    if args.split:
        return os.path.join(args.data_dir, args.split)
    return next((os.path.join(args.data_dir, n) for n in ('val', 'test')
                 if os.path.isdir(os.path.join(args.data_dir, n))), args.data_dir)


def _open_folder(args, transform=None):
    check_class_folders(_eval_root(args))
    ds = open_image_folder(args.data_dir, args.split, transform, args.max_per_class, args.allow_root)
    if args.class_map:
        apply_class_map(ds, load_class_map(args.class_map), args.class_map)
    return ds


def eval_resolution(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run ``zoo eval-resolution`` with command-line style arguments.

    Returns:
        ``rows`` (one dict per model and size; a failed evaluation has an ``error``), ``paths`` (the written files),
        ``unreadable`` (count), ``failed`` (count of failed evaluations) and ``resumed`` (cells kept from an
        interrupted sweep).

    Raises:
        ValueError / FileNotFoundError / zoo.models.CheckpointMismatchError / zoo.errors.ZooError: user errors,
            before any evaluation (an output dir in use by another sweep included).
    """
    args = build_eval_parser().parse_args(argv)
    _check_args(args)
    sizes = sorted(dict.fromkeys(args.sizes))
    device = device_of(args)
    dtype = amp_dtype_of(args, device)
    if not args.zero_shot:  # the model's kind before the folder: a video folder holds no images, which would be
        refuse_other_kinds(args, 'image', 'zoo eval-resolution')  # the message
    probe = _open_folder(args)  # fails early on a missing / empty folder
    classes, data_root = probe.classes, probe.root
    models = with_strategies(_load_models(args, sizes, classes, data_root), args.extrapolation)
    crops = sorted({m.info['data_config']['crop_pct'] for m in models})
    interps = sorted({m.info['data_config']['interpolation'] for m in models})
    protocol = dict(data_root=data_root, num_classes=len(classes), sizes=sizes,
                    crop_pct=crops[0] if len(crops) == 1 else crops, interpolation=', '.join(interps),
                    batch_size=args.batch_size, device=str(device), amp=dtype is not None,
                    amp_dtype=str(dtype).replace('torch.', '') if dtype is not None else None,
                    max_per_class=args.max_per_class, zero_shot=True, weights='EMA' if args.use_ema else 'raw',
                    clip_templates=args.templates if args.zero_shot else None,
                    quick_gelu=bool(args.quick_gelu) if args.zero_shot else None)
    task = ImageClassificationTask(len(classes), channels_last=args.channels_last)
    datasets: Dict[tuple, Any] = {}

    def evaluate(m: SweepModel, cell: Dict[str, Any], state) -> tuple:
        size, cfg = cell['size'], m.info['data_config']
        key = (size, cfg['crop_pct'], cfg['interpolation'], tuple(cfg['mean']), tuple(cfg['std']))
        if key not in datasets:  # the folder opened once (its warnings logged once per sweep), a transform per key
            datasets[key] = copy.copy(probe)
            datasets[key].transform = create_transform(
                (3, size, size), is_training=False, interpolation=cfg['interpolation'], mean=tuple(cfg['mean']),
                std=tuple(cfg['std']), crop_pct=cfg['crop_pct'])
        ds = datasets[key]
        out = evaluate_classifier(m, ds, dict(img_size=size), args, device, dtype, task, desc=f'{m.label} @ {size}px',
                                  prepare=lambda model: _estimate(model, m.label, size, len(ds), args.batch_size,
                                                                  device, dtype))
        bad = out.pop('bad')
        out['images_per_s'] = out.pop('per_s')
        _logger.info('%-24s %4d px  top1 %6.2f  top5 %6.2f  (%d/%d correct, %d unreadable)  %.0f img/s', m.label,
                     size, out['top1'], out['top5'], out['correct1'], out['n'], out['unreadable'],
                     out['images_per_s'])
        return out, dict(unreadable={b.path: b.error for b in bad})

    def base_row(m: SweepModel, cell: Dict[str, Any]) -> Dict[str, Any]:
        i, cfg = m.info, m.info['data_config']
        row = dict(label=m.label, model=i['model'], checkpoint=i['checkpoint'], pe=i['pe'], family=i['family'],
                   weights=i['weights'], train_size=i['train_size'], size=cell['size'],
                   scale=round(cell['size'] / i['train_size'], 4), crop_pct=cfg['crop_pct'],
                   interpolation=cfg['interpolation'])
        return row

    plan = [(i, dict(size=s)) for i in range(len(models)) for s in sizes]
    inputs = [_eval_root(args), args.class_map, args.class_names if args.zero_shot else None,
              args.templates if args.zero_shot and os.path.isfile(args.templates) else None]
    result = run_sweep('zoo eval-resolution', args, models, plan, evaluate, resolution_page, protocol, base_row,
                       failed_row=dict(COUNT_FIELDS, images_per_s=float('nan')), inputs=inputs)
    if args.results_file:
        write_results_file(args.results_file, result['rows'])
    bad = result['extras'].get('unreadable', {})
    if bad:
        _logger.warning('%d unreadable image(s) excluded from every count; listed in %s', len(bad),
                        result['paths']['md'])
    return dict(result, unreadable=len(bad))


def _load_models(args, sizes: List[int], classes: List[str], data_root: str) -> List[SweepModel]:
    """Every model at its training size, checked against every size before any evaluation."""
    if args.zero_shot:
        loaded = _load_zero_shot(args, classes)
    else:
        def check(model, meta, name):
            if is_video_model(model):
                raise ValueError(f'{name} is a video model (clips, not images); evaluate it with zoo eval-frames')
            patch = patch_size_of(model)
            bad_sizes = [s for s in sizes if s % patch]
            if bad_sizes and not getattr(model.patch_embed, 'dynamic_img_pad', False):
                ok = sorted({max(patch, round(s / patch) * patch) for s in bad_sizes})
                raise ValueError(f'--sizes {bad_sizes} are not divisible by the patch size {patch} px of {name}; '
                                 f'use multiples of {patch} (e.g. {ok}) or --model-kwargs dynamic_img_size=true '
                                 'dynamic_img_pad=true')
            if not is_zoo_model(model) and any(s != int(model.patch_embed.img_size[0]) for s in sizes) \
                    and not hasattr(model, 'set_input_size'):
                raise ValueError(f'{name} is not a zoo model and has no set_input_size: evaluate it at its training '
                                 'size only')
        loaded = load_classifiers(args, classes, data_root, check)
    models = []
    for m in loaded:
        model, meta = m['model'], m['meta']
        data_cfg = dict(meta.get('data_config') or resolve_data_config({}, model=model))
        for key in ('crop_pct', 'interpolation', 'mean', 'std'):
            if getattr(args, key) is not None:
                data_cfg[key] = getattr(args, key)
        if args.channels_last:
            model = model.to(memory_format=torch.channels_last)
        pretrained_cfg = getattr(model, 'pretrained_cfg', {}) or {}
        info = dict(model=m['name'], checkpoint=m['checkpoint'], pe=getattr(model, 'pe_name', '') or '',
                    family=family_of(model), weights='EMA' if args.use_ema else 'raw',
                    model_kwargs=meta.get('model_kwargs') or {},
                    train_size=int(meta.get('img_size') or model.patch_embed.img_size[0]), data_config=data_cfg,
                    adaptation=getattr(getattr(model, 'pe', None), 'adaptation', 'n/a'), tag=pretrained_cfg.get('tag'))
        models.append(SweepModel(m['label'], model.eval(), info))
    return models


def _load_zero_shot(args, classes: List[str]) -> List[Dict[str, Any]]:
    """``--zero-shot``: CLIP models as zero-shot classifiers over the folder's classes."""
    from .zero_shot import class_prompts_names, load_templates, load_zero_shot_model
    if args.run or not args.model:
        raise ValueError('--zero-shot takes --model NAME --checkpoint PATH pairs (an open_clip config such as '
                         'zoo-ViT-B-16-rope_mixed and a CLIP weights file), not --run')
    if len(args.model) != len(args.checkpoint):
        raise ValueError(f'{len(args.model)} --model but {len(args.checkpoint)} --checkpoint: give one --model per '
                         '--checkpoint')
    if args.use_ema or args.model_kwargs:
        raise ValueError('--zero-shot evaluates open_clip models as built from their config: drop --use-ema and '
                         '--model-kwargs')
    templates = load_templates(args.templates)
    names = class_prompts_names(classes, args.class_names)
    device = args.device or ('cuda' if torch.cuda.is_available() else 'cpu')
    out = []
    for i, (name, path) in enumerate(zip(args.model, args.checkpoint)):
        model, meta = load_zero_shot_model(name, path, names, templates, args.quick_gelu, device)
        out.append(dict(model=model, meta=meta, name=name, checkpoint=path,
                        label=args.label[i] if args.label else name))
    return out


@torch.no_grad()
def _estimate(model: torch.nn.Module, label: str, size: int, n_images: int, batch_size: int, device: torch.device,
              dtype) -> None:
    """Warm up (so throughput excludes one-time costs), time one more small batch, and log a rough estimate of the
    forward time for the whole folder at this size."""
    x = torch.zeros(min(batch_size, 8), 3, size, size, device=device)
    with autocast(device.type, dtype):
        model(x)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        model(x)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
    seconds = (time.perf_counter() - t0) / x.shape[0] * n_images
    _logger.info('%s @ %d px: %d images, roughly %s of forward time (from one timed batch of %d)', label, size,
                 n_images, f'{seconds:.0f} s' if seconds < 120 else f'{seconds / 60:.1f} min', x.shape[0])
