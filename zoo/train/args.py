"""Command-line options of ``zoo train`` and how they are layered.

A new run: built-in defaults < ``--config`` YAML < flags given on the command line. A ``--sched`` other than
``hold_cosine`` on the command line drops the config's ``hold_until`` / ``hold_release_by`` (logged; they do not
apply); typed on the command line they are refused.

``--resume``: the run's recorded options are restored, all of them. A flag (on the command line or in ``--config``)
that contradicts a recorded value is an error naming both values, unless it is one of :data:`MAY_CHANGE_ON_RESUME`
(a longer / shorter schedule, and options that do not change results). Fine-tuning into another recipe is a new run
with ``--initial-checkpoint``.
"""
from __future__ import annotations

import argparse
import logging
import os
from typing import Any, Dict, List, Optional, Sequence

import yaml

from zoo.errors import ResumeMismatchError
from zoo.runs.options import INTERPOLATIONS, DefaultsOnceHelpFormatter, check_device, parse_model_kwargs

__all__ = ['build_train_parser', 'parse_train_args', 'load_yaml_config', 'add_run_options', 'add_ema_options',
           'add_optimisation_options', 'check_run_options', 'check_counts', 'bad_option', 'MAY_CHANGE_ON_RESUME',
           'SESSION_OPTIONS']

# Options that name the session rather than the run: never compared with the record.
SESSION_OPTIONS = ('config', 'output', 'resume', 'overwrite')
#: options of ``--sched hold_cosine`` only: dropped (logged) when a config gives them and the command line another sched
HOLD_OPTIONS = ('hold_until', 'hold_release_by')

_logger = logging.getLogger('zoo.train')
# Recorded options that a resumed run may change: the schedule length and options that do not change any result.
MAY_CHANGE_ON_RESUME = ('epochs', 'no_progress', 'pin_mem', 'results_file', 'allow_root')


def may_change_on_resume() -> str:
    """The flags of :data:`MAY_CHANGE_ON_RESUME` as a phrase for help texts (``--epochs, ... and --allow-root``)."""
    flags = [f'--{name.replace("_", "-")}' for name in MAY_CHANGE_ON_RESUME]
    return ', '.join(flags[:-1]) + ' and ' + flags[-1]


def build_train_parser(prog: str = 'zoo train') -> argparse.ArgumentParser:
    """The ``zoo train`` parser. Options that may come from a YAML config are not marked required here."""
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=DefaultsOnceHelpFormatter,
        description='Train or fine-tune a zoo ViT on an ImageFolder dataset (DATA/train/<class>/*.jpg, DATA/val or '
                    'DATA/test). Writes OUTPUT/metrics.csv, checkpoint-last.pth and checkpoint-best.pth. '
                    'Multi-process: torchrun --nproc-per-node N -m zoo.train ...',
        epilog='Precedence: defaults < --config YAML < command-line flags. --resume restores every recorded option; '
               'a flag contradicting the record is an error, except ' + may_change_on_resume() + '. Example: zoo '
               'train --config configs/cifar10_ape.yaml --output runs/ape --epochs 5')
    g = add_run_options(p)
    g.add_argument('--channels-last', action='store_true', help='channels-last memory layout for model and images')

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
    g.add_argument('--max-val-per-class', type=int, default=None,
                   help='validate on only the first N images per class (faster epochs on a large validation split)')
    g.add_argument('--class-map', metavar='TXT', help='timm class map: class folder names, one per line (line i = '
                                                      'class i); folders not listed are left out')
    g.add_argument('--allow-root', action='append', default=[], metavar='DIR',
                   help='a folder that symlinks inside --data-dir may lead into (repeatable; e.g. where the videos or '
                        'images really are); any other symlink out of --data-dir is skipped and named')
    g.add_argument('--num-frames', type=int, default=None,
                   help='video models (pe_video_vit_*): frames per clip (default: the model\'s); their --data-dir is '
                        'a video folder (DATA/train/<class>/*.mp4); clips take random-offset uniform frames in '
                        'training, segment midpoints in validation; no spatial augmentation')
    g.add_argument('--in-memory-clips', action='store_true',
                   help='video models on a set written by zoo make-videos --task ranking|steps: render its clips in '
                        'memory from DATA/meta.json (the files\' frames before H.264) instead of decoding the files')

    g = add_model_group(p, 'registered model name (see `zoo list`)',
                        'constructor overrides, values parsed as YAML; dotted keys nest, e.g. patch_size=4 '
                        'embed_dim=192 pe_kwargs.theta=10')
    g.add_argument('--pretrained', action='store_true', help='start from the model\'s timm pretrained weights')
    g.add_argument('--initial-checkpoint', metavar='CKPT',
                   help='start from these weights (any layout zoo.models.checkpoint_filter_fn converts; APE tables '
                        'are resampled to --img-size; a classifier of another size is re-initialised)')
    g.add_argument('--drop-path', type=float, default=0., help='stochastic depth rate')
    add_ema_options(g)

    g = add_optimisation_options(p, epochs=10, batch_size=128, lr=1e-3, warmup_epochs=1, warmup_lr=1e-5, min_lr=1e-5,
                                 clip_grad=None)
    g.add_argument('--smoothing', type=float, default=0.1, help='label smoothing')
    g.add_argument('--mixup', type=float, default=0., help='mixup alpha (0 = off)')
    g.add_argument('--cutmix', type=float, default=0., help='cutmix alpha (0 = off)')
    g.add_argument('--mixup-prob', type=float, default=1.0, help='probability of applying mixup or cutmix')
    g.add_argument('--pe-aux-loss', type=float, default=0., metavar='WEIGHT',
                   help='add WEIGHT x the position encoding\'s own regulariser to the training loss (seqpe: its '
                        'contrastive + distillation aux_loss); 0 = off')
    return p


def add_run_options(p: argparse.ArgumentParser) -> Any:
    """Add the ``run`` group every training subcommand shares (config, output dir, resume, seed, devices, AMP,
    progress, results file) to ``p``; returns the group for the subcommand's own run options."""
    g = p.add_argument_group('run')
    g.add_argument('--config', metavar='YAML', help='YAML file of options (keys as the flags, with underscores)')
    g.add_argument('--output', metavar='DIR', help='output directory (refused if it holds another run, unless '
                                                   '--resume or --overwrite; locked while the run lasts)')
    g.add_argument('--resume', nargs='?', const='auto', metavar='CKPT',
                   help='continue a run: no value = OUTPUT/checkpoint-last.pth; restores epoch, optimizer, scheduler, '
                        'scaler, EMA and every recorded option (only ' + may_change_on_resume() + ' may change)')
    g.add_argument('--overwrite', action='store_true', help='allow writing into an existing output dir')
    g.add_argument('--seed', type=int, default=0, help='random seed (each epoch reseeds from seed, epoch and rank)')
    g.add_argument('-j', '--workers', type=int, default=2, help='data loader processes per rank')
    g.add_argument('--device', default=None, help='torch device (default: cuda if available, else cpu)')
    g.add_argument('--threads', type=int, default=None, help='torch CPU threads per process (default: torch\'s)')
    g.add_argument('--amp', action='store_true', help='mixed precision (float16 + GradScaler on CUDA, bfloat16 on CPU)')
    g.add_argument('--amp-dtype', default=None, help='AMP dtype, float16 or bfloat16 (default: float16 on CUDA, '
                                                     'bfloat16 on CPU); the GradScaler runs only for float16 on CUDA')
    g.add_argument('--pin-mem', action='store_true', help='pin CPU memory in the data loaders (faster host-to-GPU)')
    g.add_argument('--no-progress', action='store_true', help='no tqdm progress bars (log lines only)')
    g.add_argument('--results-file', metavar='PATH', help='also write the final results (one row) to this .csv '
                                                          'or .json file')
    return g


def add_model_group(p: argparse.ArgumentParser, model_help: str, kwargs_help: str) -> Any:
    """The ``model`` option group with ``--model`` and ``--model-kwargs`` (each command's own help); returns it."""
    g = p.add_argument_group('model')
    g.add_argument('--model', help=model_help)
    g.add_argument('--model-kwargs', nargs='*', default=None, metavar='KEY=VALUE', help=kwargs_help)
    return g


def add_ema_options(g: Any) -> None:
    """Add ``--model-ema`` and ``--model-ema-decay`` (timm's ``ModelEmaV3``) to the group ``g``."""
    g.add_argument('--model-ema', action='store_true', help='keep an EMA of the weights (timm ModelEmaV3)')
    g.add_argument('--model-ema-decay', type=float, default=0.999, help='EMA decay per step')


def add_optimisation_options(p: argparse.ArgumentParser, epochs: int, batch_size: int, lr: float,
                             warmup_epochs: float, warmup_lr: float, min_lr: float,
                             clip_grad: Optional[float]) -> Any:
    """Add the ``optimisation`` group every training subcommand shares (timm optimizer and scheduler) to ``p``,
    with the subcommand's defaults; returns the group for its own options."""
    g = p.add_argument_group('optimisation')
    g.add_argument('--epochs', type=int, default=epochs, help='training epochs')
    g.add_argument('-b', '--batch-size', type=int, default=batch_size, help='batch size per process')
    g.add_argument('--grad-accum-steps', type=int, default=1,
                   help='accumulate gradients over N batches per optimizer step (effective batch N x --batch-size)')
    g.add_argument('--opt', default='adamw', help='timm optimizer name')
    g.add_argument('--lr', type=float, default=lr, help='peak learning rate')
    g.add_argument('--weight-decay', type=float, default=0.05, help='weight decay (not applied to no_weight_decay '
                                                                  'params, biases and norms)')
    g.add_argument('--sched', default='cosine', help='timm scheduler name, or hold_cosine: the peak LR (after '
                   'warm-up) until an epoch\'s training top-1 reaches --hold-until, then cosine decay over the updates '
                   'left (zoo.train.schedule)')
    g.add_argument('--hold-until', type=float, default=None, metavar='ACC',
                   help='--sched hold_cosine: training top-1 (percent) that starts the decay (default: halfway between '
                        'chance, 100 / classes or options, and 100)')
    g.add_argument('--hold-release-by', type=float, default=None, metavar='FRAC',
                   help='--sched hold_cosine: start the decay at the latest after this fraction of the updates (0-1), '
                        'even if --hold-until was not reached (default: hold to the end)')
    g.add_argument('--warmup-epochs', type=float, default=warmup_epochs,
                   help='linear warmup (epochs, may be fractional)')
    g.add_argument('--warmup-lr', type=float, default=warmup_lr, help='learning rate at the start of warmup')
    g.add_argument('--min-lr', type=float, default=min_lr, help='final learning rate')
    g.add_argument('--clip-grad', type=float, default=clip_grad, help='clip the gradient norm to this value')
    return g


def load_yaml_config(path: str, parser: argparse.ArgumentParser) -> Dict[str, Any]:
    """Read a YAML config of option values.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a mapping, or a key that is not a ``zoo train`` option.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f'config file {path!r} does not exist')
    try:
        with open(path) as f:
            cfg = yaml.safe_load(f) or {}
    except yaml.YAMLError as e:
        detail = ' '.join(str(e).split())
        raise ValueError(f'config {path!r} is not valid YAML: {detail}') from None
    except UnicodeDecodeError:
        raise ValueError(f'config {path!r} is not a text (YAML) file') from None
    if not isinstance(cfg, dict):
        raise ValueError(f'config {path!r} must be a mapping of option: value')
    cfg = {k.replace('-', '_'): v for k, v in cfg.items()}
    known = {a.dest for a in parser._actions}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ValueError(f'config {path!r} has unknown options {unknown}; see `zoo train --help`')
    actions = {a.dest: a for a in parser._actions}
    for key, value in cfg.items():
        cfg[key] = _check_config_value(path, actions[key], value)
    return cfg


def _type_name(kind: Any) -> str:
    return {int: 'an integer', float: 'a number', str: 'a string'}.get(kind, getattr(kind, '__name__', str(kind)))


def _check_config_value(path: str, action: argparse.Action, value: Any) -> Any:
    """Check a YAML value against the option's argparse type / nargs; returns it converted (int -> float, ...)."""
    key = action.dest
    where = f'config {path!r}: {key}: {value!r}'
    if key == 'model_kwargs':
        if value is None or isinstance(value, dict) or (isinstance(value, list) and
                                                        all(isinstance(v, str) for v in value)):
            return value
        raise ValueError(f'{where} must be a mapping of constructor options (e.g. {{patch_size: 8}})')
    if value is None:
        return value
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise ValueError(f'{where} must be true or false')
        return value
    kind = action.type or str

    def one(v: Any) -> Any:
        if kind is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f'{where} must be {_type_name(int)}')
            return v
        if kind is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f'{where} must be {_type_name(float)}')
            return float(v)
        if kind is str:
            if isinstance(v, (dict, list)) or isinstance(v, bool):
                raise ValueError(f'{where} must be {_type_name(str)}')
            return str(v)
        return v

    if action.nargs in (None, '?'):
        return one(value)
    if not isinstance(value, (list, tuple)):
        raise ValueError(f'{where} must be a list of {action.nargs if isinstance(action.nargs, int) else "some"} '
                         f'values')
    if isinstance(action.nargs, int) and len(value) != action.nargs:
        raise ValueError(f'{where} must be a list of {action.nargs} values')
    return [one(v) for v in value]


def bad_option(flag: str, value: Any, need: str) -> None:
    """Raise the ``ValueError`` of an option value out of range: ``--flag VALUE: must be NEED``."""
    raise ValueError(f'{flag} {value!r}: must be {need}')


def check_counts(args: argparse.Namespace, names: Sequence[str], optional: bool = False) -> None:
    """``names`` must be at least 1 (``optional``: or ``None``)."""
    for name in names:
        value = getattr(args, name)
        if not (optional and value is None) and value < 1:
            bad_option(_flag(name), value, 'at least 1')


def check_run_options(args: argparse.Namespace) -> None:
    """Ranges of the options every training subcommand shares (:func:`add_run_options`, :func:`add_ema_options`,
    :func:`add_optimisation_options`); ``ValueError`` naming the flag."""
    check_counts(args, ('epochs', 'batch_size', 'grad_accum_steps'))
    check_counts(args, ('threads',), optional=True)
    if args.workers < 0:
        bad_option('--workers', args.workers, '0 or more')
    if args.amp_dtype is not None and args.amp_dtype not in ('float16', 'bfloat16'):
        bad_option('--amp-dtype', args.amp_dtype, 'float16 or bfloat16')
    if args.results_file and not args.results_file.lower().endswith(('.csv', '.json')):
        bad_option('--results-file', args.results_file, 'a .csv or .json path')
    if not 0 <= args.model_ema_decay <= 1:
        bad_option('--model-ema-decay', args.model_ema_decay, 'in [0, 1]')
    if not args.lr > 0:
        bad_option('--lr', args.lr, 'positive')
    for name in ('weight_decay', 'warmup_epochs', 'warmup_lr', 'min_lr'):
        if getattr(args, name) < 0:
            bad_option(_flag(name), getattr(args, name), '0 or more')
    if args.hold_until is not None and not 0 < args.hold_until <= 100:
        bad_option('--hold-until', args.hold_until, 'a training top-1 in (0, 100] percent')
    if getattr(args, 'hold_release_by', None) is not None and not 0 <= args.hold_release_by <= 1:
        bad_option('--hold-release-by', args.hold_release_by, 'a fraction of the updates in [0, 1]')
    if getattr(args, 'hold_release_by', None) is not None and args.sched != 'hold_cosine':
        raise ValueError(f'--hold-release-by applies to --sched hold_cosine only (got --sched {args.sched}); drop it '
                         'or add --sched hold_cosine')
    if args.hold_until is not None and args.sched != 'hold_cosine':
        raise ValueError(f'--hold-until applies to --sched hold_cosine only (got --sched {args.sched}); drop it or '
                         'pass --sched hold_cosine')
    if args.clip_grad is not None and not args.clip_grad > 0:
        bad_option('--clip-grad', args.clip_grad, 'positive')
    check_device(args.device)


def _validate(args: argparse.Namespace) -> None:
    """Ranges and choices of the options; ``ValueError`` naming the flag."""
    bad = bad_option
    check_run_options(args)
    check_counts(args, ('max_train_per_class', 'img_size', 'max_val_per_class', 'num_frames'), optional=True)
    if not 0 <= args.smoothing < 1:
        bad('--smoothing', args.smoothing, 'in [0, 1)')
    if args.pe_aux_loss < 0:
        bad('--pe-aux-loss', args.pe_aux_loss, '0 or more')
    if not 0 <= args.drop_path < 1:
        bad('--drop-path', args.drop_path, 'in [0, 1)')
    for name in ('hflip', 'reprob', 'mixup_prob'):
        if not 0 <= getattr(args, name) <= 1:
            bad(_flag(name), getattr(args, name), 'in [0, 1]')
    if args.crop_pct is not None and not 0 < args.crop_pct <= 1:
        bad('--crop-pct', args.crop_pct, 'in (0, 1]')
    for name in ('mixup', 'cutmix', 'color_jitter'):
        if getattr(args, name) < 0:
            bad(_flag(name), getattr(args, name), '0 or more')
    if args.scale is not None and not (0 < args.scale[0] <= args.scale[1] <= 1):
        bad('--scale', list(args.scale), 'MIN MAX with 0 < MIN <= MAX <= 1')
    if args.ratio is not None and not (0 < args.ratio[0] <= args.ratio[1]):
        bad('--ratio', list(args.ratio), 'MIN MAX with 0 < MIN <= MAX')
    if args.std is not None and any(v <= 0 for v in args.std):
        bad('--std', list(args.std), 'positive')
    if args.interpolation is not None and args.interpolation not in INTERPOLATIONS:
        bad('--interpolation', args.interpolation, f'one of {", ".join(INTERPOLATIONS)}')
    if args.aa:
        from timm.data import create_transform
        try:
            create_transform(32, is_training=True, auto_augment=args.aa)
        except Exception as e:  # timm asserts / raises on unknown policies and malformed parameters
            detail = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ValueError(f'--aa {args.aa!r} is not a timm auto-augment policy ({detail}); e.g. '
                             'rand-m9-mstd0.5-inc1, augmix-m5-w4-d2, original, v0') from None


def _explicit(parser: argparse.ArgumentParser, argv: Optional[List[str]]) -> Dict[str, Any]:
    """The options given on the command line (not their defaults), as parsed values."""
    quiet = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    for action in parser._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            kw = dict(dest=action.dest, default=argparse.SUPPRESS)
            if isinstance(action, argparse._StoreTrueAction):
                kw['action'] = 'store_true'
            else:
                kw.update(nargs=action.nargs, type=action.type, const=action.const)
            quiet.add_argument(*action.option_strings, **kw)
    return vars(quiet.parse_known_args(argv)[0])


def _norm(key: str, value: Any) -> Any:
    """A comparable form of an option value (lists for tuples, nested model kwargs, absolute paths)."""
    if key == 'model_kwargs':
        return _plain(parse_model_kwargs(value))
    if key in ('data_dir', 'class_map', 'initial_checkpoint') and isinstance(value, str):
        return os.path.abspath(value)
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value



def _flag(key: str) -> str:
    return '--' + key.replace('_', '-')


def parse_train_args(argv: Optional[List[str]] = None, recorded: Optional[Dict[str, Any]] = None,
                     check_required: bool = True, default_output: Optional[str] = None,
                     parser: Optional[argparse.ArgumentParser] = None, validate=None) -> argparse.Namespace:
    """Parse ``zoo train`` options.

    Args:
        argv: command-line arguments (without the program / subcommand name).
        recorded: the options of the run being resumed: all restored; a given flag contradicting one is an error
            unless in :data:`MAY_CHANGE_ON_RESUME`.
        check_required: raise when a required option is missing and validate values (off for the first pass that
            finds the run dir).
        default_output: ``--output`` when given nowhere (``--resume PATH``: the checkpoint's folder).
        parser, validate: another subcommand's parser and value checks (``zoo train-vlm``); default ``zoo train``'s.

    Raises:
        ValueError / FileNotFoundError: bad config file, an option value out of range / of the wrong type, or a
            required option (``--model``, ``--data-dir``, ``--output``) given nowhere.
        ResumeMismatchError: with ``recorded``, a given option that contradicts the record (both values named).
    """
    parser = parser or build_train_parser()
    args = parser.parse_args(argv)
    given = _explicit(parser, argv)
    config = load_yaml_config(args.config, parser) if args.config else {}
    if recorded:
        known = {a.dest for a in parser._actions}
        base = {k: v for k, v in recorded.items() if k in known and k not in SESSION_OPTIONS}
        conflicts = []
        from_config = {k: v for k, v in config.items() if k not in given}  # the command line overrides the config
        for source, values in (('--config ' + str(args.config), from_config), ('the command line', given)):
            for key, value in values.items():
                if key in SESSION_OPTIONS or key in MAY_CHANGE_ON_RESUME:
                    continue
                old = base[key] if key in base else parser.get_default(key)
                if _norm(key, value) != _norm(key, old):
                    conflicts.append(f'{_flag(key)} {_show(value)} (from {source}) but the run recorded '
                                     f'{_show(old)}')
        if conflicts:
            raise ResumeMismatchError(
                '--resume restores the recorded options, and ' + '; '.join(conflicts) + '. Drop those flags to '
                'continue the run as recorded, or start a new run with --initial-checkpoint and a new --output; '
                f'only {", ".join(_flag(k) for k in MAY_CHANGE_ON_RESUME)} may change on --resume')
        layers = dict(base)
        layers.update({k: v for k, v in config.items() if k in MAY_CHANGE_ON_RESUME or k in SESSION_OPTIONS})
    else:
        layers = _drop_config_hold_options(config, given, args.config, log=check_required)
    if layers:
        parser.set_defaults(**layers)
        args = parser.parse_args(argv)
    if not args.output and default_output:
        args.output = default_output
    for name in ('model', 'data_dir', 'output') if check_required else ():
        if not getattr(args, name):
            raise ValueError(f'--{name.replace("_", "-")} is required (on the command line or in --config)')
    args.model_kwargs = parse_model_kwargs(args.model_kwargs)
    for name in ('scale', 'ratio', 'mean', 'std'):
        if getattr(args, name, None) is not None:
            setattr(args, name, tuple(getattr(args, name)))
    if check_required:
        (validate or _validate)(args)
    return args


def _drop_config_hold_options(config: Dict[str, Any], given: Dict[str, Any], path: str,
                              log: bool = True) -> Dict[str, Any]:
    """``config`` without its :data:`HOLD_OPTIONS` when the command line sets ``--sched`` to another schedule (they
    do not apply; one logged line when ``log``: the first pass of ``zoo train``, which only finds the run dir, is
    quiet). Hold options typed on the command line are kept (``_validate`` refuses them)."""
    if 'sched' not in given or given['sched'] == 'hold_cosine':
        return config
    dropped = [k for k in HOLD_OPTIONS if config.get(k) is not None and k not in given]
    if not dropped:
        return config
    if log:
        _logger.info('--sched %s on the command line: %s from --config %s dropped (they apply to --sched hold_cosine '
                     'only)', given['sched'], ' and '.join(f'{_flag(k)} {config[k]}' for k in dropped), path)
    return {k: v for k, v in config.items() if k not in dropped}


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ' '.join(map(str, value)) if value else '(none)'
    if isinstance(value, dict):
        return ' '.join(f'{k}={v}' for k, v in value.items()) or '(none)'
    return 'unset' if value is None else str(value)
