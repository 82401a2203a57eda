"""``zoo eval-resolution``: zero-shot accuracy of one or more models across input sizes.

Models come as ``--run DIR`` (a ``zoo train`` output dir: its final ``checkpoint-last.pth``), as ``--checkpoint PATH``
(a zoo checkpoint rebuilds its model from the recorded name and options), or as ``--model NAME --checkpoint PATH``
pairs (in order; ``--checkpoint pretrained`` loads timm's weights for NAME). For every size the trained model is copied,
moved to that size with ``set_input_size`` (which adapts its PE), and evaluated on the folder with timm's eval transform
(resize + center crop). Results go to ``results.csv``, ``results.json``, ``report.md`` and ``scaling.png``.
"""
from __future__ import annotations

import argparse
import copy
import logging
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils.data import DataLoader
from timm.data import create_transform, resolve_data_config

from zoo.datasets import collate_skip_bad, open_image_folder
from zoo.train.args import check_device, parse_model_kwargs
from zoo.train.build import create_zoo_model, load_weights, patch_size_of
from zoo.train.checkpoint import checkpoint_meta, load_checkpoint
from .accuracy import evaluate
from .report import write_report

__all__ = ['build_eval_parser', 'eval_resolution']

_logger = logging.getLogger('zoo.eval')


def build_eval_parser(prog: str = 'zoo eval-resolution') -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description='Zero-shot top-1/top-5 and throughput of one or more models at several input sizes, on an '
                    'ImageFolder (DATA/val, DATA/test, or DATA itself holding the class folders, e.g. ImageNet val). '
                    'Writes OUTPUT/results.csv, results.json, report.md and scaling.png.',
        epilog='Models: --run DIR (a zoo train output dir; uses its final checkpoint-last.pth, not the best-on-val one), --checkpoint PATH (a zoo '
               'checkpoint records its model), or --model NAME --checkpoint PATH pairs, matched in order '
               '(--checkpoint pretrained = timm weights of NAME). Example: zoo eval-resolution --run runs/ape '
               '--run runs/rope_mixed --data-dir data/cifar10 --sizes 24 32 40 48 56 64 --output runs/eval')
    p.add_argument('--run', action='append', default=[], metavar='DIR', help='zoo train output dir (repeatable)')
    p.add_argument('--checkpoint', action='append', default=[], metavar='PATH', help='checkpoint file (repeatable)')
    p.add_argument('--model', action='append', default=[], metavar='NAME',
                   help='model name for the --checkpoint at the same position (repeatable)')
    p.add_argument('--label', action='append', default=[], metavar='TEXT',
                   help='display names, one per model in the order runs then checkpoints (default: the PE name)')
    p.add_argument('--model-kwargs', nargs='*', default=None, metavar='KEY=VALUE',
                   help='constructor overrides applied to every model, over those recorded in the checkpoint')
    p.add_argument('--data-dir', required=True, metavar='DIR', help='ImageFolder root (or its parent with val/test)')
    p.add_argument('--split', default=None, help='sub-folder of --data-dir to evaluate (default: val, test or none)')
    p.add_argument('--sizes', type=int, nargs='+', required=True, metavar='PX', help='evaluation input sizes')
    p.add_argument('--crop-pct', type=float, default=None,
                   help='center-crop fraction (default: each checkpoint\'s recorded value, else the model\'s)')
    p.add_argument('--batch-size', type=int, default=128, help='evaluation batch size')
    p.add_argument('--workers', type=int, default=2, help='data loader processes')
    p.add_argument('--max-per-class', type=int, default=None, help='evaluate only the first N images of each class')
    p.add_argument('--device', default=None, help='torch device (default: cuda if available, else cpu)')
    p.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch\'s)')
    p.add_argument('--amp', action='store_true', help='autocast the forward (bfloat16 on CPU, float16 on CUDA)')
    p.add_argument('--output', default='eval-resolution', metavar='DIR', help='output dir')
    p.add_argument('--overwrite', action='store_true', help='replace an existing output dir\'s result files')
    p.add_argument('--note', action='append', default=[], metavar='TEXT', help='paragraph added to report.md')
    p.add_argument('--no-progress', action='store_true', help='no tqdm progress bars')
    return p


def _deep_merge(base: Dict[str, Any], over: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _short_name(model_name: str) -> str:
    """``pe_vit_tiny_patch16_rope_mixed_224`` -> ``rope_mixed``."""
    parts = model_name.split('_')
    if model_name.startswith('pe_vit_') and len(parts) > 5 and parts[3].startswith('patch'):
        return '_'.join(parts[4:-1])
    return model_name


def _entries(args) -> List[Dict[str, Any]]:
    """Resolve the model sources into ``{'model', 'checkpoint'}`` dicts, in order: runs, then checkpoints."""
    if args.model and len(args.model) != len(args.checkpoint):
        raise ValueError(f'{len(args.model)} --model but {len(args.checkpoint)} --checkpoint: give one --model per '
                         '--checkpoint (in the same order), or none to take the model names from the checkpoints')
    entries = []
    for run in args.run:
        if not os.path.isdir(run):
            raise FileNotFoundError(f'run dir {run!r} does not exist')
        # The final weights: checkpoint-best was selected on the validation split, which is often the split evaluated
        # here, so using it would report a selected (optimistic) number.
        path = os.path.join(run, 'checkpoint-last.pth')
        if not os.path.isfile(path):
            raise FileNotFoundError(f'run dir {run!r} has no checkpoint-last.pth; pass --checkpoint PATH instead')
        entries.append(dict(model=None, checkpoint=path))
    for i, path in enumerate(args.checkpoint):
        entries.append(dict(model=args.model[i] if args.model else None, checkpoint=path))
    if not entries:
        raise ValueError('no model given: pass --run DIR, --checkpoint PATH, or --model NAME --checkpoint PATH')
    if args.label and len(args.label) != len(entries):
        raise ValueError(f'{len(args.label)} --label for {len(entries)} models')
    return entries


def _load_model(entry: Dict[str, Any], cli_kwargs: Dict[str, Any]) -> Tuple[torch.nn.Module, Dict[str, Any]]:
    """Build a model at its training size with its weights. Returns the model and the checkpoint's meta."""
    path = entry['checkpoint']
    if path == 'pretrained':
        if not entry['model']:
            raise ValueError('--checkpoint pretrained needs a --model')
        model = create_zoo_model(entry['model'], cli_kwargs, pretrained=True)
        return model, {}
    ckpt = load_checkpoint(path)
    meta = checkpoint_meta(ckpt)
    name = entry['model'] or meta.get('model_name')
    if not name:
        raise ValueError(f'{path!r} records no model name (not a zoo train checkpoint); pass --model NAME before '
                         'its --checkpoint')
    kwargs = _deep_merge(meta.get('model_kwargs') or {}, cli_kwargs)
    num_classes = meta.get('num_classes')
    if num_classes is None:
        from zoo.models import unwrap_state_dict
        head = unwrap_state_dict(ckpt).get('head.weight')
        num_classes = int(head.shape[0]) if head is not None else None
    model = create_zoo_model(name, kwargs, img_size=meta.get('img_size'), num_classes=num_classes)
    del ckpt
    load_weights(model, path, allow_new_classifier=False)
    meta = dict(meta, model_name=name, model_kwargs=kwargs)
    return model, meta


def eval_resolution(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run ``zoo eval-resolution`` with command-line style arguments.

    Returns:
        ``rows`` (one dict per model and size), ``paths`` (the written files) and ``unreadable`` (count).

    Raises:
        ValueError / FileNotFoundError / zoo.models.CheckpointMismatchError: user errors, before any evaluation.
    """
    args = build_eval_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if os.path.exists(args.output) and (not os.path.isdir(args.output) or os.listdir(args.output)) \
            and not args.overwrite:
        raise ValueError(f'output dir {args.output!r} already exists; pass --overwrite to replace its results or '
                         'choose another --output')
    if any(s <= 0 for s in args.sizes):
        raise ValueError(f'--sizes must be positive, got {args.sizes}')
    if args.crop_pct is not None and not 0 < args.crop_pct <= 1:
        raise ValueError(f'--crop-pct {args.crop_pct!r}: must be in (0, 1]')
    if args.batch_size < 1:
        raise ValueError(f'--batch-size {args.batch_size}: must be at least 1')
    if args.max_per_class is not None and args.max_per_class < 1:
        raise ValueError(f'--max-per-class {args.max_per_class}: must be at least 1')
    if args.workers < 0:
        raise ValueError(f'--workers {args.workers}: must be 0 or more')
    check_device(args.device)
    sizes = sorted(dict.fromkeys(args.sizes))
    device = torch.device(args.device or ('cuda' if torch.cuda.is_available() else 'cpu'))
    cli_kwargs = parse_model_kwargs(args.model_kwargs)
    entries = _entries(args)
    probe = open_image_folder(args.data_dir, args.split)  # fails early on a missing / empty folder
    classes, data_root = probe.classes, probe.root

    # Load everything and check every (model, size) before spending time on evaluation.
    loaded = []
    for i, entry in enumerate(entries):
        model, meta = _load_model(entry, cli_kwargs)
        name = meta.get('model_name', entry['model'])
        if meta.get('class_names') and list(meta['class_names']) != list(classes):
            raise ValueError(f'{entry["checkpoint"]!r} was trained on classes {meta["class_names"][:5]}... '
                             f'({len(meta["class_names"])}), but {data_root!r} has {classes[:5]}... ({len(classes)})')
        if model.num_classes != len(classes):
            raise ValueError(f'{name} predicts {model.num_classes} classes but {data_root!r} has {len(classes)} '
                             'class folders')
        patch = patch_size_of(model)
        bad_sizes = [s for s in sizes if s % patch]
        if bad_sizes and not getattr(model.patch_embed, 'dynamic_img_pad', False):
            ok = sorted({max(patch, round(s / patch) * patch) for s in bad_sizes})
            raise ValueError(f'--sizes {bad_sizes} are not divisible by the patch size {patch} px of {name}; use '
                             f'multiples of {patch} (e.g. {ok}) or --model-kwargs dynamic_img_size=true '
                             'dynamic_img_pad=true')
        train_size = int(meta.get('img_size') or model.patch_embed.img_size[0])
        pretrained_cfg = getattr(model, 'pretrained_cfg', {}) or {}
        data_cfg = dict(meta.get('data_config') or resolve_data_config({}, model=model))
        if args.crop_pct is not None:
            data_cfg['crop_pct'] = args.crop_pct
        seed = (meta.get('args') or {}).get('seed')
        label = args.label[i] if args.label else _short_name(name)
        loaded.append(dict(model=model.eval(), name=name, label=label, seed=seed, train_size=train_size,
                           data_cfg=data_cfg, checkpoint=entry['checkpoint'], tag=pretrained_cfg.get('tag')))
    labels = [m['label'] for m in loaded]
    for m in loaded:
        if labels.count(m['label']) > 1 and not args.label:
            m['label'] += f' (seed {m["seed"]})' if m['seed'] is not None else f' #{labels.index(m["label"]) + 1}'
    if len({m['label'] for m in loaded}) != len(loaded):
        m_labels = [m['label'] for m in loaded]
        raise ValueError(f'model labels are not unique: {m_labels}; pass one --label per model')

    if os.path.isdir(args.output) and args.overwrite:
        for n in ('results.csv', 'results.json', 'report.md', 'scaling.png'):
            if os.path.exists(os.path.join(args.output, n)):
                os.remove(os.path.join(args.output, n))
    os.makedirs(args.output, exist_ok=True)

    rows, datasets, unreadable = [], {}, {}
    for m in loaded:
        for size in sizes:
            cfg = m['data_cfg']
            key = (size, cfg['crop_pct'], cfg['interpolation'], tuple(cfg['mean']), tuple(cfg['std']))
            if key not in datasets:
                transform = create_transform((3, size, size), is_training=False, interpolation=cfg['interpolation'],
                                             mean=tuple(cfg['mean']), std=tuple(cfg['std']), crop_pct=cfg['crop_pct'])
                datasets[key] = open_image_folder(args.data_dir, args.split, transform, args.max_per_class)
            ds = datasets[key]
            model = copy.deepcopy(m['model'])
            if size != m['train_size']:
                model.set_input_size(img_size=size)
            model.to(device)
            loader = DataLoader(ds, batch_size=args.batch_size, shuffle=False, num_workers=args.workers,
                                collate_fn=collate_skip_bad, pin_memory=device.type == 'cuda')
            with torch.no_grad():  # warm-up forward, so throughput excludes one-time costs
                model(torch.zeros(min(args.batch_size, 8), 3, size, size, device=device))
            counts = evaluate(model, loader, device, amp=args.amp,
                              progress=None if args.no_progress else f'{m["label"]} @ {size}px')
            for b in counts.bad:
                unreadable[b.path] = b.error
            row = dict(label=m['label'], model=m['name'], checkpoint=m['checkpoint'], pe=getattr(model, 'pe_name', ''),
                       family=type(model.pe).family if hasattr(model, 'pe') else '', train_size=m['train_size'],
                       size=size, scale=round(size / m['train_size'], 4), top1=counts.top1, top5=counts.top5,
                       correct1=counts.correct1, correct5=counts.correct5, n=counts.n, unreadable=len(counts.bad),
                       loss=counts.loss, images_per_s=counts.images_per_s, crop_pct=cfg['crop_pct'],
                       interpolation=cfg['interpolation'])
            rows.append(row)
            _logger.info('%-24s %4d px  top1 %6.2f  top5 %6.2f  (%d/%d correct, %d unreadable)  %.0f img/s',
                         m['label'], size, counts.top1, counts.top5, counts.correct1, counts.n, len(counts.bad),
                         counts.images_per_s)
            del model
    crops = sorted({m['data_cfg']['crop_pct'] for m in loaded})
    interps = sorted({m['data_cfg']['interpolation'] for m in loaded})
    protocol = dict(data_root=data_root, num_classes=len(classes), sizes=sizes,
                    crop_pct=crops[0] if len(crops) == 1 else crops, interpolation=', '.join(interps),
                    batch_size=args.batch_size, device=str(device), amp=args.amp, max_per_class=args.max_per_class,
                    unreadable=sorted([p, e] for p, e in unreadable.items()), zero_shot=True)
    models = [dict(label=m['label'], model=m['name'], checkpoint=m['checkpoint'], train_size=m['train_size'],
                   family=type(m['model'].pe).family if hasattr(m['model'], 'pe') else '',
                   adaptation=getattr(getattr(m['model'], 'pe', None), 'adaptation', 'n/a')) for m in loaded]
    paths = write_report(rows, models, protocol, args.output, notes=args.note)
    if unreadable:
        _logger.warning('%d unreadable image(s) excluded from every count; listed in %s', len(unreadable), paths['md'])
    return dict(rows=rows, paths=paths, unreadable=len(unreadable))
