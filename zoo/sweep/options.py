"""Options every sweep shares: where the models come from, where the results go, how the models run.

The same flag means the same thing in ``zoo eval-resolution``, ``eval-frames`` and ``eval-video``; each front end
adds only what is its own (``--sizes`` / ``--frames`` / ``--benchmark`` ...).
"""
from __future__ import annotations

import argparse
import functools
import inspect
import math
import os
import shutil
import tempfile
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from zoo.encodings.extrapolation import strategy_argument
from zoo.datasets.files import remove_quietly, temp_path
from zoo.errors import OutputDirError
from zoo.runs.options import amp_dtype, check_device, command_parser
from .engine import Evaluate, Sweep, SweepModel

__all__ = ['sweep_parser', 'run_sweep', 'frame_cache_dir', 'add_model_options', 'add_output_options', 'add_run_options',
           'add_extrapolation_option', 'add_allow_root_option', 'clip_memory_check', 'check_common',
           'check_results_file', 'device_of', 'amp_dtype_of']


def sweep_parser(prog: str, doc: str, output: str,
                 add_own: Callable[[argparse.ArgumentParser], None], command: str = 'zoo train',
                 classifiers: bool = True, amp: bool = True, workers: int = 2,
                 extrapolation: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser of a sweep: the shared model, run and output options around the sweep's own (``add_own``).

    Args:
        doc: the help text: its first paragraph is the description, the rest the epilog (the front end's
            ``build_*_parser.__doc__``).
        output: default ``--output``.
        command: what writes the runs ``--run`` takes (for the help text).
        classifiers: the models are classifiers (``--model`` pairs, ``--model-kwargs``, ``--force``).
        amp: offer ``--amp`` / ``--amp-dtype``.
        workers: default ``--workers``.
        extrapolation: offer ``--extrapolation``; the text names the training grid the factors divide by.
    """
    description, _, epilog = (' '.join(part.split()) for part in inspect.cleandoc(doc).partition('\n\n'))
    p = command_parser(prog, description, epilog)
    add_model_options(p, command, checkpoint_models=classifiers)
    add_own(p)
    if extrapolation:
        add_extrapolation_option(p, extrapolation)
    add_run_options(p, amp=amp, workers=workers)
    add_output_options(p, output)
    return p


def add_model_options(p: argparse.ArgumentParser, command: str = 'zoo train', checkpoint_models: bool = True) -> None:
    """``--run``, ``--checkpoint`` (``--model`` pairs), ``--label``, ``--use-ema`` (and ``--force``,
    ``--model-kwargs`` for classifiers)."""
    p.add_argument('--run', action='append', default=[], metavar='DIR', help=f'{command} output dir (repeatable)')
    p.add_argument('--checkpoint', action='append', default=[], metavar='PATH', help='checkpoint file (repeatable)')
    if checkpoint_models:
        p.add_argument('--model', action='append', default=[], metavar='NAME',
                       help='model name for the --checkpoint at the same position (repeatable)')
        p.add_argument('--model-kwargs', nargs='*', default=None, metavar='KEY=VALUE',
                       help='constructor overrides applied to every model, over those recorded in the checkpoint')
        p.add_argument('--force', action='store_true',
                       help='evaluate a checkpoint as another --model / PE than it records')
    p.add_argument('--label', action='append', default=[], metavar='TEXT',
                   help='display names, one per model in the order runs then checkpoints (default: the PE name)')
    p.add_argument('--use-ema', action='store_true', help='evaluate the checkpoints\' EMA weights (--model-ema runs)')


def add_output_options(p: argparse.ArgumentParser, default: str) -> None:
    """``--output``, ``--overwrite``, ``--resume``, ``--note``, ``--no-progress``."""
    p.add_argument('--output', default=default, metavar='DIR', help='output dir (locked while running)')
    p.add_argument('--overwrite', action='store_true',
                   help='replace an existing report in the output dir (only once the new one is complete)')
    p.add_argument('--resume', action='store_true',
                   help='continue an interrupted sweep in --output from its finished cells (same options; also in a '
                        'later session); failed cells run again')
    p.add_argument('--note', action='append', default=[], metavar='TEXT', help='paragraph added to report.md')
    p.add_argument('--no-progress', action='store_true', help='no tqdm progress bars')


def add_run_options(p: argparse.ArgumentParser, amp: bool = True, workers: int = 2) -> None:
    """``--device``, ``--threads``, ``-j/--workers`` and (``amp``) ``--amp``, ``--amp-dtype``."""
    p.add_argument('-j', '--workers', type=int, default=workers, help='data loader processes')
    p.add_argument('--device', default=None, help='torch device (default: cuda if available, else cpu)')
    p.add_argument('--threads', type=int, default=None, help='torch CPU threads (default: torch\'s)')
    if amp:
        p.add_argument('--amp', action='store_true', help='autocast the forward (bfloat16 on CPU, float16 on CUDA)')
        p.add_argument('--amp-dtype', default=None, help='AMP dtype, float16 or bfloat16 (default: as --amp)')


def add_allow_root_option(p: argparse.ArgumentParser) -> None:
    """``--allow-root DIR`` (repeatable): folders that symlinks inside the data root may lead into."""
    p.add_argument('--allow-root', action='append', default=[], metavar='DIR',
                   help='a folder that symlinks inside the data root may lead into (repeatable; e.g. where a '
                        'benchmark\'s videos really are); any other symlink out of the data root is skipped and named')


def clip_memory_check(what: str, clips: int, frames: int, native: Tuple[int, int], sizes: Sequence[int],
                      fix: str) -> None:
    """Refuse, before any model loads or lock is taken, a sweep whose batches of decoded clips would not fit in the
    available memory: per clip ``frames`` distinct frames at the ``native`` (height, width) at most, plus the
    frames at the largest of ``sizes`` as uint8 and float32. ``fix`` (naming the frame count) is replaced by one
    naming ``--sizes`` when the same frames would fit at the videos' own size.

    Raises:
        zoo.datasets.video.VideoMemoryError: the estimate is above the available memory (the message gives both).
    """
    from zoo.datasets.video import VideoMemoryError, check_memory
    h, w = native

    def need(s: int) -> int:
        return clips * frames * (h * w * 3 + s * s * 3 + s * s * 3 * 4)

    s = max(sizes)
    try:
        check_memory(need(s), what, fix)
        return
    except VideoMemoryError:
        if s <= max(h, w):
            raise
    check_memory(need(max(h, w)), what, fix)  # the same frames at the videos' own size do not fit either: --frames
    # they fit at the videos' own size: the size is the cause
    check_memory(need(s), what, f'lower --sizes (the largest, {s} px, is above the videos\' {h}x{w} px) or '
                 '--batch-size')


def add_extrapolation_option(p: argparse.ArgumentParser, grid: str = 'size') -> None:
    """``--extrapolation STRATEGY ...``: every model under each training-free strategy, a report dimension."""
    p.add_argument('--extrapolation', nargs='+', default=None, type=strategy_argument, metavar='STRATEGY',
                   help='evaluate every model under each training-free extrapolation strategy (none pi ntk yarn '
                        'mspoe longrope=FILE; zoo.encodings.extrapolation), a report dimension: RoPE-family '
                        'encodings take all of them (longrope: the factors file of zoo search-longrope; mspoe: '
                        'per-head position scales), sincos/fourier none and pi, other encodings only none. '
                        f'Factors: evaluated grid / the training grid recorded in the checkpoint (its {grid}), per '
                        'axis')


def check_common(args: argparse.Namespace) -> None:
    """Ranges of the shared options; ``ValueError`` naming the flag, ``OutputDirError`` for a file as ``--output``."""
    for flag in ('batch_size', 'threads', 'max_per_class', 'max_items', 'max_new_tokens'):
        v = getattr(args, flag, None)
        if v is not None and v < 1:
            raise ValueError(f'--{flag.replace("_", "-")} {v}: must be at least 1')
    if getattr(args, 'workers', 0) < 0:
        raise ValueError(f'--workers {args.workers}: must be 0 or more')
    for flag in ('sizes', 'frames'):
        values = getattr(args, flag, None) or []
        if any(v < 1 for v in values):
            raise ValueError(f'--{flag} {values}: must be at least 1 (e.g. --{flag} 8 16 32)')
    fps = getattr(args, 'fps', None)
    if fps is not None and not (fps > 0 and math.isfinite(fps)):
        raise ValueError(f'--fps {fps}: must be a positive number of frames per second')
    results_file = getattr(args, 'results_file', None)
    if results_file:
        check_results_file(results_file)
    model_count = len(args.run) + len(args.checkpoint)
    if args.label and len(args.label) != model_count:
        raise ValueError(f'{len(args.label)} --label for {model_count} models; give one per model (runs first, then '
                         'checkpoints)')
    check_device(args.device)
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise OutputDirError(f'--output {args.output!r} is a file, not a directory; choose another --output')
    if args.overwrite and args.resume:
        raise ValueError('--overwrite and --resume contradict each other: --resume continues the sweep in --output, '
                         '--overwrite starts it again')
    if args.threads:
        torch.set_num_threads(args.threads)


def check_results_file(path: str) -> None:
    """Refuse, before the sweep, a ``--results-file`` that could not be written at its end: another extension than
    .csv / .json, a directory, or a folder where no file can be created (read-only, no permission, full). A missing
    folder is created.

    Raises:
        ValueError: the extension. OutputDirError: the path cannot be written (naming the reason).
    """
    if not path.lower().endswith(('.csv', '.json')):
        raise ValueError(f'--results-file {path!r}: must be a .csv or .json path')
    if os.path.isdir(path):
        example = os.path.join(path, 'results.csv')
        raise OutputDirError(f'--results-file {path!r} is a directory; give a file path (e.g. {example!r})')
    tmp = None
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = temp_path(path)
    except OSError as e:
        raise OutputDirError(f'--results-file {path!r} cannot be written ({e.strerror or e}); choose another path') \
            from None
    finally:
        remove_quietly(tmp)


def device_of(args: argparse.Namespace) -> torch.device:
    """``--device``, else CUDA when available, else the CPU."""
    return torch.device(args.device or ('cuda' if torch.cuda.is_available() else 'cpu'))


def amp_dtype_of(args: argparse.Namespace, device: torch.device) -> Optional[torch.dtype]:
    """The autocast dtype of ``--amp`` / ``--amp-dtype`` on ``device`` (``None``: no AMP)."""
    return amp_dtype(getattr(args, 'amp', False) or getattr(args, 'amp_dtype', None) is not None,
                     getattr(args, 'amp_dtype', None), device.type)


def run_sweep(command: str, args: argparse.Namespace, models: List[SweepModel], plan: Sequence[Tuple[int, Dict]],
              evaluate: Evaluate, page: Callable[..., Dict[str, Any]], protocol: Dict[str, Any],
              base_row: Callable[[SweepModel, Dict[str, Any]], Dict[str, Any]],
              failed_row: Dict[str, Any], inputs: Sequence[Optional[str]] = ()) -> Dict[str, Any]:
    """Run a :class:`~zoo.sweep.engine.Sweep` with the shared options (``--output``, ``--overwrite``, ``--resume``,
    ``--no-progress``, ``--note``); ``page(state, models, protocol=, notes=)`` lays out the report. The device and the
    batch size may change when a sweep is resumed; ``inputs`` (the data folder, a class map ...; ``None`` entries
    skipped) may not (``--frame-cache`` inside a data folder is left out). The reasons of variants marked
    ``not_applicable`` are added to the report's notes. Returns :meth:`Sweep.run`'s result."""
    notes = list(args.note) + [f'Not applicable (not evaluated, empty cells): {m.info["not_applicable"]}.'
                               for m in models if m.info.get('not_applicable')]
    return Sweep(command, args.output, models, plan, evaluate,
                 functools.partial(page, protocol=protocol, notes=notes), protocol, overwrite=args.overwrite,
                 resume=args.resume, progress=not args.no_progress, base_row=base_row, failed_row=failed_row,
                 volatile=('device', 'batch_size'), inputs=[p for p in inputs if p],
                 exclude_inputs=[getattr(args, 'frame_cache', None)]).run()


@contextmanager
def frame_cache_dir(args: argparse.Namespace, prefix: str) -> Iterator[str]:
    """``--frame-cache`` (kept), or a temporary folder removed at the end."""
    path = args.frame_cache or tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        if not args.frame_cache:
            shutil.rmtree(path, ignore_errors=True)
