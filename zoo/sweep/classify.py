"""Classifier sweeps (``zoo eval-resolution`` and ``zoo eval-frames``): loading and checking the models, their
extrapolation-strategy variants, and evaluating one cell (a copy of the model moved to the cell's input, under the
variant's strategy, over the cell's data)."""
from __future__ import annotations

import copy
import logging
import os
import re
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from zoo.runs.models import (is_video_llm, is_video_model, is_zoo_model, load_model, model_sources,
                             recorded_model_name, unique_labels)
from zoo.runs.options import parse_model_kwargs
from zoo.tasks import Task, evaluate
from zoo.datasets.splits import make_loader
from .engine import SweepModel

__all__ = ['short_name', 'load_classifiers', 'with_strategies', 'evaluate_classifier', 'COUNT_FIELDS',
           'refuse_other_kinds']

_logger = logging.getLogger('zoo.sweep')

#: Metric fields of a classifier row (NaN / 0 in a failed row).
COUNT_FIELDS = dict(top1=float('nan'), top5=float('nan'), correct1=0, correct5=0, n=0, unreadable=0,
                    loss=float('nan'))


def short_name(model_name: str) -> str:
    """The PE part of a zoo model name: ``pe_vit_tiny_patch16_rope_mixed_224`` -> ``rope_mixed``,
    ``pe_video_vit_tiny_patch16_rope3d_224`` -> ``rope3d``, ``clip_pe_vit_*`` -> ``clip <pe>``; other names
    unchanged."""
    if model_name.startswith('clip_pe_vit_'):
        return 'clip ' + short_name(model_name[len('clip_'):])
    m = re.fullmatch(r'pe_(?:video_)?vit_[a-z]+_patch\d+_(.+)_\d+', model_name)
    return m.group(1) if m else model_name


def family_of(model: torch.nn.Module) -> str:
    """The PE family of a zoo model (``"timm's own"`` for a plain timm model)."""
    return type(model.pe).family if is_zoo_model(model) else "timm's own"


def refuse_other_kinds(args, want: str, command: str) -> None:
    """Refuse, before the data is opened or anything loads, a model of another kind than the sweep takes, naming the
    command that takes it: a video-LLM (``pe_vlm_*``: ``zoo eval-video``), a video classifier in an image sweep
    (``zoo eval-frames``), an image classifier in a video sweep (``zoo eval-resolution``). The kind comes from the
    ``--model`` name or the name the checkpoint records; a checkpoint recording none is judged once loaded.

    Args:
        want: ``'image'`` or ``'video'``.
        command: this sweep (``zoo eval-frames``), for the message.

    Raises:
        ValueError: a model of another kind.
    """
    import timm
    for entry in model_sources(args.run, args.checkpoint, getattr(args, 'model', [])):
        name = entry['model'] or recorded_model_name(entry['checkpoint'])
        if not name:
            continue
        where = entry['checkpoint'] if entry['checkpoint'] != 'pretrained' else f'--model {name}'
        if is_video_llm(name):
            raise ValueError(f'{where} holds the video-LLM {name}: {command} evaluates '
                             f'{"image" if want == "image" else "video"} classifiers; score a video-LLM on a video-QA '
                             'benchmark with zoo eval-video --run/--checkpoint')
        video = is_video_model(name)
        if want == 'image' and video:
            raise ValueError(f'{name} ({where}) is a video model (clips, not images); evaluate it with zoo eval-frames')
        if want == 'video' and not video and timm.is_model(name.split('.')[0]):
            raise ValueError(f'{name} ({where}) is an image model; {command} evaluates video models '
                             '(pe_video_vit_*): use zoo eval-resolution for images')


def load_classifiers(args, classes: Sequence[str], data_root: str,
                     check: Callable[[torch.nn.Module, Dict[str, Any], str], None],
                     command: str = 'zoo train') -> List[Dict[str, Any]]:
    """Load every ``--run`` / ``--checkpoint`` model at its training input and check it against the data.

    Args:
        classes: the evaluated folder's classes (a checkpoint trained on other classes is refused).
        check: ``(model, meta, name)`` -> raises ``ValueError`` for a model the sweep cannot take (an image model
            in a video sweep, sizes not divisible by its patch ...); called before the classes are compared.

    Returns:
        One dict per model: ``model``, ``meta``, ``name``, ``label``, ``checkpoint``.

    Raises:
        ValueError / FileNotFoundError / zoo.models.CheckpointMismatchError: before any evaluation.
    """
    cli_kwargs = parse_model_kwargs(args.model_kwargs)
    loaded = []
    for entry in model_sources(args.run, args.checkpoint, args.model, command):
        model, meta = load_model(entry, cli_kwargs, use_ema=args.use_ema, force=args.force)
        name = meta.get('model_name', entry['model'])
        check(model, meta, name)  # the model's kind first: an image model in a video sweep is not a class mismatch
        if meta.get('class_names') and list(meta['class_names']) != list(classes):
            missing = [c for c in meta['class_names'] if c not in classes]
            linked = [c for c in missing if os.path.islink(os.path.join(data_root, c))]
            lacks = (f' (it lacks {missing[:5]}' + (f'; {linked[:5]} are symlinks out of the data root, read only '
                                                    'with --allow-root DIR, as the warning above says)'
                                                    if linked else ')')) if missing else ''
            raise ValueError(f'{entry["checkpoint"]!r} was trained on classes {meta["class_names"][:5]}... '
                             f'({len(meta["class_names"])}), but {data_root!r} has {classes[:5]}... ({len(classes)})'
                             f'{lacks}; pass a --class-map listing the training classes in order')
        if getattr(model, 'num_classes', None) != len(classes):
            raise ValueError(f'{name} predicts {getattr(model, "num_classes", "?")} classes but {data_root!r} has '
                             f'{len(classes)} class folders')
        loaded.append(dict(model=model, meta=meta, name=name, checkpoint=entry['checkpoint']))
    labels = args.label or [short_name(m['name']) for m in loaded]
    seeds = [(m['meta'].get('args') or {}).get('seed') for m in loaded]
    for m, label in zip(loaded, labels if args.label else unique_labels(labels, seeds)):
        m['label'] = label
    return loaded


def with_strategies(models: List[SweepModel], strategies: Optional[Sequence[str]]) -> List[SweepModel]:
    """One variant per (model, strategy), labelled ``<label> · <strategy>``, every pair checked first; the models
    themselves when no strategy is asked for (their own recorded strategy, if any, is described).

    A strategy a model's encoding does not take (``ntk`` for a learned APE) makes a variant marked
    ``not_applicable`` with the reason: the engine records its rows with the reason instead of evaluating them, and
    the other variants run.

    Raises:
        ValueError: no (model, strategy) pair applies at all (naming the model, the encoding and the strategies it
            takes), or a ``longrope=FILE`` whose file is bad on its own (:func:`zoo.encodings.longrope.load_factors`:
            missing, not JSON, bad fields), whatever the other strategies.
    """
    if not strategies:
        for m in models:
            m.info.setdefault('strategy', '')
            m.info.setdefault('extrapolation', _describe(getattr(m.model, 'pe', None)))
        return models
    from zoo.encodings.longrope import load_factors
    for strategy in dict.fromkeys(strategies):  # a bad factors file is the user's error, whichever model it meets
        if isinstance(strategy, str) and strategy.startswith('longrope='):
            load_factors(strategy.partition('=')[2], f'--extrapolation {strategy}')
    out, refused = [], []
    for m in models:
        pe = getattr(m.model, 'pe', None)
        for strategy in dict.fromkeys(strategies):
            reason = ''
            try:
                if pe is None:
                    if strategy != 'none':
                        raise ValueError(f'{m.info["model"]} is not a zoo model and has no position encoding to '
                                         'change')
                    described = ''
                else:
                    ext = pe.check_extrapolation(strategy)  # validates without changing (or copying) the encoding
                    described = ext.describe() if ext is not None else ''
            except ValueError as e:
                reason = ' '.join(f'--extrapolation {strategy} for {m.label}: {e}'.split())
                refused.append(reason)
                described = 'not applicable'
            info = dict(m.info, strategy=strategy, extrapolation=described, base_label=m.label)
            if reason:
                info['not_applicable'] = reason
            out.append(SweepModel(f'{m.label} · {strategy}', m.model, info))
    if len(refused) == len(out):
        raise ValueError(refused[0] + ('' if len(refused) == 1 else f' (and no other model takes any of '
                                       f'{", ".join(dict.fromkeys(strategies))})'))
    for reason in refused:
        _logger.warning('%s: its rows are recorded as not applicable', reason)
    return out


def _describe(pe: Optional[torch.nn.Module]) -> str:
    """The strategy an encoding holds, described; '' without one."""
    ext = getattr(pe, 'extrapolation', None)
    return ext.describe() if ext is not None else ''


def evaluate_classifier(m: SweepModel, dataset: Any, input_size: Dict[str, Any], args, device: torch.device,
                        dtype: Optional[torch.dtype], task: Task, collate_fn=None, desc: Optional[str] = None,
                        prepare: Optional[Callable[[torch.nn.Module], None]] = None) -> Dict[str, Any]:
    """Evaluate a copy of ``m.model`` moved to ``input_size`` (``set_input_size`` keywords; nothing moves when it
    equals the training input), under the variant's strategy, on ``dataset``; ``prepare(model)`` runs on the moved
    copy first (a warm-up).

    Returns:
        The row's metric fields: ``top1``, ``top5`` (%), ``correct1``, ``correct5``, ``n``, ``unreadable``,
        ``loss``, ``per_s`` (inputs per second of forward time) and ``bad`` (the unreadable samples).
    """
    model = copy.deepcopy(m.model)
    strategy = m.info.get('strategy')
    if strategy and getattr(model, 'pe', None) is not None:
        model.pe.set_extrapolation(strategy)
    if any(input_size[k] != m.info['train_' + ('size' if k == 'img_size' else 'frames')] for k in input_size):
        model.set_input_size(**input_size)
    model.to(device)
    if prepare is not None:
        prepare(model)
    loader = make_loader(dataset, args.batch_size, args.workers, getattr(args, 'pin_mem', False) and
                         device.type == 'cuda', collate_fn=collate_fn)
    counts = evaluate(model, loader, device, task, dtype, progress=None if args.no_progress else desc)
    return dict(top1=counts.top1, top5=counts.top5, correct1=counts.correct1, correct5=counts.correct5, n=counts.n,
                unreadable=len(counts.bad), loss=counts.loss, per_s=counts.images_per_s, bad=counts.bad)
