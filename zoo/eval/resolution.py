"""``zoo eval-resolution``: zero-shot accuracy of one or more models across input sizes.

Models come as ``--run DIR`` (a ``zoo train`` output dir: its final ``checkpoint-last.pth``), as ``--checkpoint PATH``
(a zoo checkpoint rebuilds its model from the recorded name and options), or as ``--model NAME --checkpoint PATH``
pairs (in order; ``--checkpoint pretrained`` loads timm's weights for NAME). For every size the trained model is copied,
moved to that size with ``set_input_size`` (which adapts its PE), and evaluated on the folder with timm's eval transform
(resize + center crop). Results go to ``results.csv``, ``results.json``, ``report.md``, ``scaling.png`` and
``heatmap.png``.

The sweep keeps what it finishes: after every (model, size) the four files are rewritten atomically. With
``--overwrite`` over an existing report, the new files are written to ``OUTPUT/incomplete/`` and replace the old
ones only once the sweep is complete. A failure at one size (out of memory, ...) is recorded for that size and the
sweep goes on. The output directory is locked while the sweep runs.
"""
from __future__ import annotations

import argparse
import copy
import logging
import os
import shutil
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from timm.data import create_transform, resolve_data_config

from zoo.runs.models import check_model_identity, create_zoo_model, is_zoo_model, load_weights, patch_size_of, pe_of
from zoo.datasets.splits import apply_class_map, check_class_folders, load_class_map, make_loader
from zoo.errors import OutputDirError
from zoo.tasks.evaluate import evaluate
from zoo.runs.checkpoints import checkpoint_meta, load_checkpoint, write_results_file
from zoo.runs.options import INTERPOLATIONS, amp_dtype, check_device, parse_model_kwargs
from zoo.runs.rundir import STAGING, sweep_output_dir
from zoo.tasks.classification import ImageClassificationTask
from zoo.datasets import open_image_folder
from zoo.encodings.extrapolation import STRATEGIES, extrapolation_of, set_extrapolation
from .report import write_report

__all__ = ['build_eval_parser', 'eval_resolution']

_logger = logging.getLogger('zoo.eval')


def build_eval_parser(prog: str = 'zoo eval-resolution') -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description='Zero-shot top-1/top-5 and throughput of one or more models at several input sizes, on an '
                    'ImageFolder (DATA/val, DATA/test, or DATA itself holding the class folders, e.g. ImageNet val). '
                    'Writes OUTPUT/results.csv, results.json, report.md, scaling.png and heatmap.png.',
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
    p.add_argument('--use-ema', action='store_true', help='evaluate the checkpoints\' EMA weights (--model-ema runs)')
    p.add_argument('--force', action='store_true', help='evaluate a checkpoint as another --model / PE than it records')
    p.add_argument('--crop-pct', type=float, default=None,
                   help='center-crop fraction (default: each checkpoint\'s recorded value, else the model\'s)')
    p.add_argument('--interpolation', default=None, help='resize interpolation (default: each checkpoint\'s)')
    p.add_argument('--mean', type=float, nargs=3, default=None, help='normalisation mean (default: each checkpoint\'s)')
    p.add_argument('--std', type=float, nargs=3, default=None, help='normalisation std (default: each checkpoint\'s)')
    p.add_argument('--class-map', metavar='TXT', help='timm class map: class folder names, one per line (line i = '
                                                      'class i); folders not listed are left out')
    p.add_argument('-b', '--batch-size', type=int, default=128, help='evaluation batch size')
    p.add_argument('-j', '--workers', type=int, default=2, help='data loader processes')
    p.add_argument('--max-per-class', type=int, default=None, help='evaluate only the first N images of each class')
    p.add_argument('--device', default=None, help='torch device (default: cuda if available, else cpu)')
    p.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch\'s)')
    p.add_argument('--amp', action='store_true', help='autocast the forward (bfloat16 on CPU, float16 on CUDA)')
    p.add_argument('--amp-dtype', default=None, help='AMP dtype, float16 or bfloat16 (default: as --amp)')
    p.add_argument('--channels-last', action='store_true', help='channels-last memory layout for model and images')
    p.add_argument('--pin-mem', action='store_true', help='pin CPU memory in the data loader')
    p.add_argument('--output', default='eval-resolution', metavar='DIR', help='output dir (locked while running)')
    p.add_argument('--overwrite', action='store_true',
                   help='replace an existing report in the output dir (only once the new one is complete)')
    p.add_argument('--results-file', metavar='PATH', help='also write the result rows to this .csv or .json file')
    p.add_argument('--note', action='append', default=[], metavar='TEXT', help='paragraph added to report.md')
    p.add_argument('--no-progress', action='store_true', help='no tqdm progress bars')
    p.add_argument('--extrapolation', nargs='+', default=None, choices=STRATEGIES, metavar='STRATEGY',
                   help='evaluate every model under each training-free extrapolation strategy (none pi ntk yarn; '
                        'zoo.encodings.extrapolation), a report dimension: RoPE-family encodings take all four, '
                        'sincos/fourier none and pi, other encodings only none. Factors: evaluated grid / the '
                        'training grid recorded in the checkpoint (its img_size), per axis')
    z = p.add_argument_group('CLIP zero-shot (--zero-shot; needs open_clip_torch)')
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
    return p


def _deep_merge(base: Dict[str, Any], over: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _short_name(model_name: str) -> str:
    """``pe_vit_tiny_patch16_rope_mixed_224`` -> ``rope_mixed`` (``clip_pe_vit_*`` -> ``clip rope_mixed``)."""
    if model_name.startswith('clip_pe_vit_'):
        return 'clip ' + _short_name(model_name[len('clip_'):])
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
        if os.path.isfile(run):
            raise ValueError(f'--run {run!r} is a file; --run takes a zoo train output dir (pass a checkpoint file '
                             'as --checkpoint)')
        if not os.path.isdir(run):
            raise FileNotFoundError(f'run dir {run!r} does not exist')
        # The final weights: checkpoint-best was selected on the validation split, which is often the split evaluated
        # here, so using it would report a selected (optimistic) number.
        path = os.path.join(run, 'checkpoint-last.pth')
        if not os.path.isfile(path) and os.path.isfile(os.path.join(run, 'model.safetensors')):
            path = os.path.join(run, 'model.safetensors')
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


def _load_model(entry: Dict[str, Any], cli_kwargs: Dict[str, Any], use_ema: bool = False,
                force: bool = False) -> Tuple[torch.nn.Module, Dict[str, Any]]:
    """Build a model at its training size with its weights. Returns the model and the checkpoint's meta.

    Raises:
        zoo.models.CheckpointMismatchError: ``--model`` names another model or PE than the checkpoint records (unless
            ``force``), or the weights do not fit.
        ValueError: ``use_ema`` and the checkpoint has no EMA weights.
    """
    path = entry['checkpoint']
    if path == 'pretrained':
        if not entry['model']:
            raise ValueError('--checkpoint pretrained needs a --model')
        if use_ema:
            raise ValueError('--use-ema applies to zoo train checkpoints; --checkpoint pretrained has no EMA weights')
        model = create_zoo_model(entry['model'], cli_kwargs, pretrained=True)
        return model, {}
    ckpt = load_checkpoint(path)
    meta = checkpoint_meta(ckpt)
    name = entry['model'] or meta.get('model_name')
    if not name:
        raise ValueError(f'{path!r} records no model name (not a zoo train checkpoint); pass --model NAME before '
                         'its --checkpoint')
    if entry['model'] and meta:
        pe = pe_of(name)
        if isinstance(cli_kwargs.get('pe'), str):
            pe = cli_kwargs['pe']
        check_model_identity(path, meta, name, pe, force)
    kwargs = _deep_merge(meta.get('model_kwargs') or {}, cli_kwargs)
    num_classes = meta.get('num_classes')
    if num_classes is None:
        from zoo.models import unwrap_state_dict
        head = unwrap_state_dict(ckpt).get('head.weight')
        num_classes = int(head.shape[0]) if head is not None else None
    if use_ema and not isinstance(ckpt.get('model_ema'), dict):
        raise ValueError(f'--use-ema: {path!r} holds no EMA weights (the run was trained without --model-ema); drop '
                         '--use-ema to evaluate its raw weights')
    frames = {'num_frames': meta['num_frames']} if meta.get('num_frames') else {}  # video models' training clip
    model = create_zoo_model(name, kwargs, img_size=meta.get('img_size'), num_classes=num_classes, **frames)
    del ckpt
    load_weights(model, path, allow_new_classifier=False, use_ema=use_ema)
    meta = dict(meta, model_name=name, model_kwargs=kwargs)
    return model, meta


_RESULT_FILES = ('results.csv', 'results.json', 'report.md', 'scaling.png', 'heatmap.png')


def _check_args(args) -> None:
    """Ranges and choices; ``ValueError`` naming the flag."""
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
    if args.interpolation is not None and args.interpolation not in INTERPOLATIONS:
        raise ValueError(f'--interpolation {args.interpolation!r}: must be one of {", ".join(INTERPOLATIONS)}')
    if args.std is not None and any(v <= 0 for v in args.std):
        raise ValueError(f'--std {args.std}: must be positive')
    if args.results_file and not args.results_file.lower().endswith(('.csv', '.json')):
        raise ValueError(f'--results-file {args.results_file!r}: must be a .csv or .json path')
    check_device(args.device)
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise OutputDirError(f'--output {args.output!r} is a file, not a directory; choose another --output')


def _open_eval_folder(args, transform=None):
    if args.split:
        root = os.path.join(args.data_dir, args.split)
    else:  # as open_image_folder picks it: val/, test/ or the folder itself
        root = next((os.path.join(args.data_dir, n) for n in ('val', 'test')
                     if os.path.isdir(os.path.join(args.data_dir, n))), args.data_dir)
    check_class_folders(root)
    ds = open_image_folder(args.data_dir, args.split, transform, args.max_per_class)
    if args.class_map:
        apply_class_map(ds, load_class_map(args.class_map), args.class_map)
    return ds


def eval_resolution(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run ``zoo eval-resolution`` with command-line style arguments.

    Returns:
        ``rows`` (one dict per model and size; a failed evaluation has an ``error``), ``paths`` (the written files),
        ``unreadable`` (count) and ``failed`` (count of failed evaluations).

    Raises:
        ValueError / FileNotFoundError / zoo.models.CheckpointMismatchError / zoo.errors.ZooError: user
            errors, before any evaluation (an output dir in use by another sweep included).
    """
    args = build_eval_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    _check_args(args)
    with sweep_output_dir(args.output, 'zoo eval-resolution', args.overwrite) as staged:
        return _sweep(args, staged=staged)


def _load_zero_shot(args, entries: List[Dict[str, Any]], classes: List[str]):
    """``--zero-shot``: CLIP models as zero-shot classifiers over the folder's classes."""
    from .zero_shot import class_prompts_names, load_templates, load_zero_shot_model
    if args.run or not args.model:
        raise ValueError('--zero-shot takes --model NAME --checkpoint PATH pairs (an open_clip config such as '
                         'zoo-ViT-B-16-rope_mixed and a CLIP weights file), not --run')
    if args.use_ema or args.model_kwargs:
        raise ValueError('--zero-shot evaluates open_clip models as built from their config: drop --use-ema and '
                         '--model-kwargs')
    templates = load_templates(args.templates)
    names = class_prompts_names(classes, args.class_names)
    device = args.device or ('cuda' if torch.cuda.is_available() else 'cpu')
    return [load_zero_shot_model(e['model'], e['checkpoint'], names, templates, args.quick_gelu, device)
            for e in entries]


def _load_all(args, sizes: List[int], classes: List[str], data_root: str) -> List[Dict[str, Any]]:
    """Load every model and check every (model, size) before spending time on evaluation."""
    cli_kwargs = parse_model_kwargs(args.model_kwargs)
    loaded = []
    entries = _entries(args)
    clip = _load_zero_shot(args, entries, classes) if args.zero_shot else None
    for i, entry in enumerate(entries):
        if clip is not None:
            model, meta = clip[i]
        else:
            model, meta = _load_model(entry, cli_kwargs, use_ema=args.use_ema, force=args.force)
        name = meta.get('model_name', entry['model'])
        if meta.get('class_names') and list(meta['class_names']) != list(classes):
            raise ValueError(f'{entry["checkpoint"]!r} was trained on classes {meta["class_names"][:5]}... '
                             f'({len(meta["class_names"])}), but {data_root!r} has {classes[:5]}... ({len(classes)}); '
                             'pass a --class-map listing the training classes in order')
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
        if not is_zoo_model(model) and any(s != int(model.patch_embed.img_size[0]) for s in sizes):
            if not hasattr(model, 'set_input_size'):
                raise ValueError(f'{name} is not a zoo model and has no set_input_size: evaluate it at its '
                                 'training size only')
        train_size = int(meta.get('img_size') or model.patch_embed.img_size[0])
        pretrained_cfg = getattr(model, 'pretrained_cfg', {}) or {}
        data_cfg = dict(meta.get('data_config') or resolve_data_config({}, model=model))
        for key in ('crop_pct', 'interpolation', 'mean', 'std'):
            if getattr(args, key) is not None:
                data_cfg[key] = getattr(args, key)
        seed = (meta.get('args') or {}).get('seed')
        label = args.label[i] if args.label else _short_name(name)
        if args.channels_last:
            model = model.to(memory_format=torch.channels_last)
        loaded.append(dict(model=model.eval(), name=name, label=label, seed=seed, train_size=train_size,
                           data_cfg=data_cfg, checkpoint=entry['checkpoint'], tag=pretrained_cfg.get('tag'),
                           weights='EMA' if args.use_ema else 'raw'))
    labels = [m['label'] for m in loaded]
    for m in loaded:
        if labels.count(m['label']) > 1 and not args.label:
            m['label'] += f' (seed {m["seed"]})' if m['seed'] is not None else f' #{labels.index(m["label"]) + 1}'
    if len({m['label'] for m in loaded}) != len(loaded):
        raise ValueError(f'model labels are not unique: {[m["label"] for m in loaded]}; pass one --label per model')
    return _with_strategies(loaded, args.extrapolation) if args.extrapolation else loaded


def _with_strategies(loaded: List[Dict[str, Any]], strategies: Sequence[str]) -> List[Dict[str, Any]]:
    """One entry per (model, strategy), labelled ``<label> · <strategy>``; every pair is checked first.

    Raises:
        ValueError: a strategy the model's encoding does not take (naming the model, the encoding and how it adapts).
    """
    out = []
    for m in loaded:
        pe = getattr(m['model'], 'pe', None)
        for strategy in dict.fromkeys(strategies):
            described = ''
            try:
                if pe is None:
                    if strategy != 'none':
                        raise ValueError(f'{m["name"]} is not a zoo model and has no position encoding to change')
                else:
                    probe = copy.deepcopy(pe)
                    set_extrapolation(probe, strategy)
                    ext = extrapolation_of(probe)
                    described = ext.describe() if ext is not None else ''
            except ValueError as e:
                raise ValueError(f'--extrapolation {strategy} for {m["label"]}: {e}') from None
            out.append(dict(m, label=f'{m["label"]} · {strategy}', base_label=m['label'], extrapolation=strategy,
                            extrapolation_desc=described))
    return out


def _own_extrapolation(model) -> str:
    """The strategy a model's encoding holds (recorded ``pe_kwargs``), described; '' without one."""
    ext = extrapolation_of(getattr(model, 'pe', None))
    return ext.describe() if ext is not None else ''


def _refuse_video_models(args) -> None:
    """``ValueError`` for a video model (``pe_video_vit_*``) among the entries, before the image folder is read."""
    from zoo.runs.models import is_video_model
    for entry in _entries(args):
        name = entry['model']
        if name is None and entry['checkpoint'] != 'pretrained':
            name = checkpoint_meta(load_checkpoint(entry['checkpoint'])).get('model_name')
        if name and is_video_model(name):
            raise ValueError(f'{name} ({entry["checkpoint"]}) is a video model (clips, not images); evaluate it with '
                             'zoo eval-frames')


def _family(model) -> str:
    return type(model.pe).family if is_zoo_model(model) else "timm's own"


def _sweep(args, staged: bool) -> Dict[str, Any]:
    sizes = sorted(dict.fromkeys(args.sizes))
    device = torch.device(args.device or ('cuda' if torch.cuda.is_available() else 'cpu'))
    dtype = amp_dtype(args.amp or args.amp_dtype is not None, args.amp_dtype, device.type)
    _refuse_video_models(args)
    probe = _open_eval_folder(args)  # fails early on a missing / empty folder
    classes, data_root = probe.classes, probe.root
    loaded = _load_all(args, sizes, classes, data_root)
    target = os.path.join(args.output, STAGING) if staged else args.output
    if os.path.isdir(os.path.join(args.output, STAGING)):
        shutil.rmtree(os.path.join(args.output, STAGING))  # an earlier interrupted --overwrite
    os.makedirs(target, exist_ok=True)
    if staged:
        _logger.info('writing the new results to %s; they replace the old report when the sweep is complete', target)

    task = ImageClassificationTask(len(classes), channels_last=args.channels_last)
    crops = sorted({m['data_cfg']['crop_pct'] for m in loaded})
    interps = sorted({m['data_cfg']['interpolation'] for m in loaded})
    models = [dict(label=m['label'], model=m['name'], checkpoint=m['checkpoint'], train_size=m['train_size'],
                   family=_family(m['model']), weights=m['weights'],
                   adaptation=getattr(getattr(m['model'], 'pe', None), 'adaptation', 'n/a'),
                   extrapolation=m.get('extrapolation_desc') or _own_extrapolation(m['model'])) for m in loaded]
    protocol = dict(data_root=data_root, num_classes=len(classes), sizes=sizes,
                    crop_pct=crops[0] if len(crops) == 1 else crops, interpolation=', '.join(interps),
                    batch_size=args.batch_size, device=str(device), amp=dtype is not None,
                    amp_dtype=str(dtype).replace('torch.', '') if dtype is not None else None,
                    max_per_class=args.max_per_class, unreadable=[], zero_shot=True,
                    weights='EMA' if args.use_ema else 'raw',
                    clip_templates=args.templates if args.zero_shot else None)
    total = len(loaded) * len(sizes)
    rows: List[Dict[str, Any]] = []
    datasets: Dict[tuple, Any] = {}
    unreadable: Dict[str, str] = {}
    paths: Dict[str, str] = {}
    for m in loaded:
        for size in sizes:
            row = _eval_one(args, m, size, device, dtype, task, datasets, unreadable)
            rows.append(row)
            protocol['unreadable'] = sorted([p, e] for p, e in unreadable.items())
            paths = write_report(rows, models, protocol, target, notes=args.note, total=total)
    if staged:
        for name in [n for n in _RESULT_FILES + ('extrapolation.png',) if os.path.exists(os.path.join(target, n))]:
            os.replace(os.path.join(target, name), os.path.join(args.output, name))
        shutil.rmtree(target)
        paths = {k: os.path.join(args.output, os.path.basename(v)) for k, v in paths.items()}
    if args.results_file:
        write_results_file(args.results_file, rows)
    failed = [r for r in rows if r.get('error')]
    if unreadable:
        _logger.warning('%d unreadable image(s) excluded from every count; listed in %s', len(unreadable), paths['md'])
    if failed:
        _logger.warning('%d of %d evaluations failed (listed in %s): %s', len(failed), total, paths['md'],
                        '; '.join(f'{r["label"]} @ {r["size"]} px: {r["error"]}' for r in failed[:3]))
    return dict(rows=rows, paths=paths, unreadable=len(unreadable), failed=len(failed))


def _eval_one(args, m: Dict[str, Any], size: int, device: torch.device, dtype, task, datasets: Dict[tuple, Any],
              unreadable: Dict[str, str]) -> Dict[str, Any]:
    """Evaluate one model at one size; a failure (out of memory, ...) becomes the row's ``error``."""
    cfg = m['data_cfg']
    row = dict(label=m['label'], model=m['name'], checkpoint=m['checkpoint'],
               pe=getattr(m['model'], 'pe_name', '') or '', family=_family(m['model']), weights=m['weights'],
               train_size=m['train_size'], size=size, scale=round(size / m['train_size'], 4), crop_pct=cfg['crop_pct'],
               interpolation=cfg['interpolation'])
    if m.get('extrapolation'):
        row.update(extrapolation=m['extrapolation'], base_label=m['base_label'])
    model = None
    try:
        key = (size, cfg['crop_pct'], cfg['interpolation'], tuple(cfg['mean']), tuple(cfg['std']))
        if key not in datasets:
            transform = create_transform((3, size, size), is_training=False, interpolation=cfg['interpolation'],
                                         mean=tuple(cfg['mean']), std=tuple(cfg['std']), crop_pct=cfg['crop_pct'])
            datasets[key] = _open_eval_folder(args, transform)
        ds = datasets[key]
        model = copy.deepcopy(m['model'])
        if m.get('extrapolation') and getattr(model, 'pe', None) is not None:
            set_extrapolation(model.pe, m['extrapolation'])
        if size != m['train_size']:
            model.set_input_size(img_size=size)
        model.to(device)
        loader = make_loader(ds, args.batch_size, args.workers, args.pin_mem and device.type == 'cuda')
        _estimate(model, size, len(ds), args.batch_size, device, dtype, m['label'])
        counts = evaluate(model, loader, device, task, dtype,
                          progress=None if args.no_progress else f'{m["label"]} @ {size}px')
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # torch.OutOfMemoryError, a PE that cannot adapt to this grid, ...: record and go on
        del model
        if device.type == 'cuda':
            torch.cuda.empty_cache()
        detail = ' '.join(str(e).split())[:300]
        _logger.error('%s @ %d px failed: %s: %s', m['label'], size, type(e).__name__, detail)
        row.update(top1=float('nan'), top5=float('nan'), correct1=0, correct5=0, n=0, unreadable=0,
                   loss=float('nan'), images_per_s=float('nan'), error=f'{type(e).__name__}: {detail}')
        return row
    for b in counts.bad:
        unreadable[b.path] = b.error
    row.update(top1=counts.top1, top5=counts.top5, correct1=counts.correct1, correct5=counts.correct5, n=counts.n,
               unreadable=len(counts.bad), loss=counts.loss, images_per_s=counts.images_per_s, error='')
    _logger.info('%-24s %4d px  top1 %6.2f  top5 %6.2f  (%d/%d correct, %d unreadable)  %.0f img/s',
                 m['label'], size, counts.top1, counts.top5, counts.correct1, counts.n, len(counts.bad),
                 counts.images_per_s)
    return row


@torch.no_grad()
def _estimate(model, size: int, n_images: int, batch_size: int, device: torch.device, dtype, label: str) -> None:
    """Warm up (so throughput excludes one-time costs), time one more small batch, and print a rough estimate of
    the forward time for the whole folder at this size."""
    from zoo.runs.options import autocast
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
