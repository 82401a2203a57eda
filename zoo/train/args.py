"""Command-line options of ``zoo train`` and how they are layered.

Precedence, lowest first: built-in defaults < the run's recorded options (``--resume``) < ``--config`` YAML <
flags given on the command line.
"""
from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional, Sequence

import yaml

__all__ = ['build_train_parser', 'parse_train_args', 'parse_model_kwargs', 'load_yaml_config']


def parse_model_kwargs(items: Optional[Sequence[str] | Dict[str, Any]]) -> Dict[str, Any]:
    """Turn ``['patch_size=4', 'pe_kwargs.block_size=4']`` into ``{'patch_size': 4, 'pe_kwargs': {'block_size': 4}}``.

    Values are parsed with ``yaml.safe_load`` (``4`` -> int, ``1e-3`` -> float, ``[0,1]`` -> list, ``true`` -> bool).
    Dotted keys nest. A dict (from YAML) passes through, its dotted keys nested the same way.

    Raises:
        ValueError: an item without ``=`` or with an empty key.
    """
    if not items:
        return {}
    pairs = items.items() if isinstance(items, dict) else []
    if not isinstance(items, dict):
        parsed = []
        for item in items:
            key, sep, value = str(item).partition('=')
            if not sep or not key.strip():
                raise ValueError(f'--model-kwargs expects key=value items, got {item!r} (e.g. patch_size=4 '
                                 'pe_kwargs.theta=10)')
            parsed.append((key.strip(), yaml.safe_load(value) if value.strip() else None))
        pairs = parsed
    out: Dict[str, Any] = {}
    for key, value in pairs:
        node = out
        parts = str(key).split('.')
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f'--model-kwargs key {key!r} nests under a non-dict value')
        node[parts[-1]] = value
    return out


def build_train_parser(prog: str = 'zoo train') -> argparse.ArgumentParser:
    """The ``zoo train`` parser. Options that may come from a YAML config are not marked required here."""
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description='Train or fine-tune a zoo ViT on an ImageFolder dataset (DATA/train/<class>/*.jpg, DATA/val or '
                    'DATA/test). Writes OUTPUT/metrics.csv, checkpoint-last.pth and checkpoint-best.pth. '
                    'Multi-process: torchrun --nproc-per-node N -m zoo.train ...',
        epilog='Precedence: defaults < recorded run options (--resume) < --config YAML < command-line flags. '
               'Example: zoo train --config configs/cifar10_ape.yaml --output runs/ape --epochs 5')
    g = p.add_argument_group('run')
    g.add_argument('--config', metavar='YAML', help='YAML file of options (keys as the flags, with underscores)')
    g.add_argument('--output', metavar='DIR', help='output directory (refused if it exists, unless --resume or '
                                                   '--overwrite)')
    g.add_argument('--resume', nargs='?', const='auto', metavar='CKPT',
                   help='continue a run: no value = OUTPUT/checkpoint-last.pth; restores epoch, optimizer, scheduler, '
                        'scaler, EMA and the recorded options')
    g.add_argument('--overwrite', action='store_true', help='allow writing into an existing output dir')
    g.add_argument('--seed', type=int, default=0, help='random seed (each epoch reseeds from seed, epoch and rank)')
    g.add_argument('--workers', type=int, default=2, help='data loader processes per rank')
    g.add_argument('--device', default=None, help='torch device (default: cuda if available, else cpu)')
    g.add_argument('--threads', type=int, default=None, help='torch CPU threads per process (default: torch\'s)')
    g.add_argument('--amp', action='store_true', help='mixed precision (float16 + GradScaler on CUDA, bfloat16 on CPU)')
    g.add_argument('--no-progress', action='store_true', help='no tqdm progress bar (log lines only)')

    g = p.add_argument_group('data')
    g.add_argument('--data-dir', metavar='DIR', help='dataset root in ImageFolder layout')
    g.add_argument('--train-split', default='train', help='training sub-folder')
    g.add_argument('--val-split', default=None, help='validation sub-folder (default: val, else test)')
    g.add_argument('--img-size', type=int, default=None, help='training input size in px (default: the model\'s)')
    g.add_argument('--crop-pct', type=float, default=None, help='eval center-crop fraction (default: the model\'s)')
    g.add_argument('--interpolation', default=None, help='resize interpolation (default: the model\'s)')
    g.add_argument('--mean', type=float, nargs=3, default=None, help='normalisation mean (default: the model\'s)')
    g.add_argument('--std', type=float, nargs=3, default=None, help='normalisation std (default: the model\'s)')
    g.add_argument('--scale', type=float, nargs=2, default=(0.08, 1.0), help='RandomResizedCrop area range')
    g.add_argument('--ratio', type=float, nargs=2, default=(3. / 4., 4. / 3.), help='RandomResizedCrop aspect range')
    g.add_argument('--hflip', type=float, default=0.5, help='horizontal flip probability')
    g.add_argument('--color-jitter', type=float, default=0.4, help='color jitter strength (0 = off)')
    g.add_argument('--aa', default=None, help='timm auto-augment policy, e.g. rand-m9-mstd0.5-inc1')
    g.add_argument('--reprob', type=float, default=0., help='random erasing probability')
    g.add_argument('--max-train-per-class', type=int, default=None, help='use only the first N images per class')

    g = p.add_argument_group('model')
    g.add_argument('--model', help='registered model name (see `zoo list`)')
    g.add_argument('--model-kwargs', nargs='*', default=None, metavar='KEY=VALUE',
                   help='constructor overrides, values parsed as YAML; dotted keys nest, e.g. patch_size=4 '
                        'embed_dim=192 pe_kwargs.theta=10')
    g.add_argument('--pretrained', action='store_true', help='start from the model\'s timm pretrained weights')
    g.add_argument('--initial-checkpoint', metavar='CKPT',
                   help='start from these weights (any layout zoo.models.checkpoint_filter_fn converts; APE tables '
                        'are resampled to --img-size; a classifier of another size is re-initialised)')
    g.add_argument('--drop-path', type=float, default=0., help='stochastic depth rate')
    g.add_argument('--model-ema', action='store_true', help='keep an EMA of the weights (timm ModelEmaV3)')
    g.add_argument('--model-ema-decay', type=float, default=0.999, help='EMA decay per step')

    g = p.add_argument_group('optimisation')
    g.add_argument('--epochs', type=int, default=10, help='training epochs')
    g.add_argument('--batch-size', type=int, default=128, help='batch size per process')
    g.add_argument('--opt', default='adamw', help='timm optimizer name')
    g.add_argument('--lr', type=float, default=1e-3, help='peak learning rate')
    g.add_argument('--weight-decay', type=float, default=0.05, help='weight decay (not applied to no_weight_decay '
                                                                  'params, biases and norms)')
    g.add_argument('--sched', default='cosine', help='timm scheduler name')
    g.add_argument('--warmup-epochs', type=float, default=1, help='linear warmup (epochs, may be fractional)')
    g.add_argument('--warmup-lr', type=float, default=1e-5, help='learning rate at the start of warmup')
    g.add_argument('--min-lr', type=float, default=1e-5, help='final learning rate')
    g.add_argument('--clip-grad', type=float, default=None, help='clip the gradient norm to this value')
    g.add_argument('--smoothing', type=float, default=0.1, help='label smoothing')
    g.add_argument('--mixup', type=float, default=0., help='mixup alpha (0 = off)')
    g.add_argument('--cutmix', type=float, default=0., help='cutmix alpha (0 = off)')
    g.add_argument('--mixup-prob', type=float, default=1.0, help='probability of applying mixup or cutmix')
    return p


def load_yaml_config(path: str, parser: argparse.ArgumentParser) -> Dict[str, Any]:
    """Read a YAML config of option values.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a mapping, or a key that is not a ``zoo train`` option.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f'config file {path!r} does not exist')
    with open(path) as f:
        cfg = yaml.safe_load(f) or {}
    if not isinstance(cfg, dict):
        raise ValueError(f'config {path!r} must be a mapping of option: value')
    cfg = {k.replace('-', '_'): v for k, v in cfg.items()}
    known = {a.dest for a in parser._actions}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ValueError(f'config {path!r} has unknown options {unknown}; see `zoo train --help`')
    return cfg


# Recorded options that describe the session rather than the run; a resumed run takes them from the new command.
_SESSION_OPTIONS = ('config', 'output', 'resume', 'overwrite', 'workers', 'device', 'threads', 'no_progress')


def parse_train_args(argv: Optional[List[str]] = None, recorded: Optional[Dict[str, Any]] = None,
                     check_required: bool = True) -> argparse.Namespace:
    """Parse ``zoo train`` options with the documented precedence.

    Args:
        argv: command-line arguments (without the program / subcommand name).
        recorded: the options of the run being resumed, if any.
        check_required: raise when a required option is missing (off for the first pass that finds the run dir).

    Raises:
        ValueError / FileNotFoundError: bad config file, or a required option (``--model``, ``--data-dir``,
            ``--output``) given nowhere.
    """
    parser = build_train_parser()
    args = parser.parse_args(argv)
    layers: Dict[str, Any] = {}
    if recorded:
        known = {a.dest for a in parser._actions}
        layers.update({k: v for k, v in recorded.items() if k in known and k not in _SESSION_OPTIONS})
    if args.config:
        layers.update(load_yaml_config(args.config, parser))
    if layers:
        parser.set_defaults(**layers)
        args = parser.parse_args(argv)
    for name in ('model', 'data_dir', 'output') if check_required else ():
        if not getattr(args, name):
            raise ValueError(f'--{name.replace("_", "-")} is required (on the command line or in --config)')
    args.model_kwargs = parse_model_kwargs(args.model_kwargs)
    for name in ('scale', 'ratio', 'mean', 'std'):
        if getattr(args, name) is not None:
            setattr(args, name, tuple(getattr(args, name)))
    return args
