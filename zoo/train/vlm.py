"""``zoo train-vlm``: train a video-LLM (``pe_vlm_*``) on multiple-choice video QA in MVBench layout.

The same loop, checkpoints, resume, EMA, locks and DDP as ``zoo train`` (:func:`zoo.train.loop.train` with this
module's options): only the training task differs (:class:`zoo.tasks.videoqa.VideoQATraining`: the video-LLM,
video-QA records read by the video reader, :class:`zoo.tasks.videoqa.VideoQATask`'s loss on the answer tokens only).
``metrics.csv`` keeps the image columns: ``val_top1`` is the multiple-choice accuracy (%), ``val_top5`` the greedy
exact-match rate (%), ``train_top1`` the multiple-choice accuracy of the epoch's training forward passes and
``train_top_share`` the share (%) of its most frequent answer letter (near 100 %: the one-letter plateau); per right
letter in ``train_classes.csv``. ``--sched hold_cosine`` holds the peak LR until ``train_top1`` reaches
``--hold-until`` (default halfway between chance, 100 / options, and 100), as the ``configs/vlm_*.yaml`` recipes do.

Data: ``--data-dir`` holds ``json/<task>.json`` (lists of ``{video, question, candidates, answer}``) and the videos
(``zoo make-videoqa`` writes such a set); any reader of :mod:`zoo.datasets.videoqa` can be chosen with
``--benchmark``. Validation uses ``--val-data-dir`` or a fixed, evenly spaced ``--val-fraction`` of the records.
Frames: ``--num-frames`` sampled uniformly (segment midpoints, as MVBench) or at ``--fps``; training draws random
offsets inside the segments (seeded from the run seed, epoch and sample: a resumed run reads the same frames) unless
``--fixed-frames``. HoPE's gamma and V2PE's stride are drawn per sample in training only (the model does it in
training mode).
"""
from __future__ import annotations

import argparse
import math
from typing import Any, Dict, List, Optional

from zoo.datasets.videoqa import list_benchmarks
from zoo.runs.options import DefaultsOnceHelpFormatter
from zoo.tasks.videoqa import SeededVideoQADataset, VideoQATraining
from .args import (add_ema_options, add_model_group, add_optimisation_options, add_run_options, bad_option,
                   check_counts, check_run_options, may_change_on_resume, parse_train_args)
from .loop import train

__all__ = ['train_vlm', 'build_vlm_parser', 'parse_vlm_args', 'SeededVideoQADataset']


def build_vlm_parser() -> argparse.ArgumentParser:
    """The ``zoo train-vlm`` parser (options that may come from a YAML config are not marked required)."""
    p = argparse.ArgumentParser(
        prog='zoo train-vlm', formatter_class=DefaultsOnceHelpFormatter,
        description='Train a video-LLM (pe_vlm_{tiny,small}_{scheme}) on multiple-choice video QA in MVBench layout '
                    '(DATA/json/<task>.json + videos; `zoo make-videoqa` writes one). Loss on the answer tokens '
                    'only. Writes OUTPUT/metrics.csv (val_top1 = multiple-choice accuracy, val_top5 = greedy exact '
                    'match), checkpoint-last.pth, checkpoint-best.pth. Multi-process: torchrun --nproc-per-node N '
                    '-m zoo.cli train-vlm ...',
        epilog='Same run rules as zoo train: --resume restores every recorded option (only ' + may_change_on_resume()
               + ' may change). Example: zoo train-vlm --model pe_vlm_tiny_videorope '
               '--data-dir data/vqa --output runs/vlm --num-frames 8 --frame-size 64 --epochs 3')
    add_run_options(p)

    g = p.add_argument_group('data')
    g.add_argument('--data-dir', metavar='DIR', help='video-QA root (MVBench layout unless --benchmark says otherwise)')
    g.add_argument('--benchmark', default='mvbench', help='reader of --data-dir (zoo.datasets.videoqa)')
    g.add_argument('--tasks', nargs='*', default=None, help='tasks (JSON stems) to train on (default: all)')
    g.add_argument('--val-data-dir', metavar='DIR', default=None,
                   help='validation root (default: --val-fraction of --data-dir)')
    g.add_argument('--allow-root', action='append', default=[], metavar='DIR',
                   help='a folder that symlinks inside --data-dir may lead into (repeatable; e.g. where the videos or '
                        'images really are); any other symlink out of --data-dir is skipped and named')
    g.add_argument('--val-tasks', nargs='*', default=None, help='validation tasks (default: --tasks)')
    g.add_argument('--val-fraction', type=float, default=0.2,
                   help='share of --data-dir records held out for validation (evenly spaced by record id)')
    g.add_argument('--num-frames', type=int, default=8, help='frames per clip (the cap with --sampling fps)')
    g.add_argument('--sampling', default='uniform', choices=('uniform', 'fps'), help='frame sampling')
    g.add_argument('--fps', type=float, default=1.0, help='frames per second for --sampling fps')
    g.add_argument('--frame-size', type=int, default=None,
                   help='frame size in px (short side, then centre crop; default: the tower\'s input size)')
    g.add_argument('--fixed-frames', action='store_true', help='train on the evaluation frames (no random offsets)')
    g.add_argument('--frame-cache', metavar='DIR', default=None, help='on-disk cache of decoded validation frames')
    g.add_argument('--max-train', type=int, default=None, help='use only the first N training records')
    g.add_argument('--max-val', type=int, default=None, help='validate on only the first N records')

    g = add_model_group(p, 'video-LLM name (zoo.list_video_llms(), e.g. pe_vlm_tiny_mrope)',
                        'create_video_llm overrides, values parsed as YAML; dotted keys nest, e.g. dim=128 depth=2 '
                        'tower_kwargs.embed_dim=96 scheme_options.delta=2')
    g.add_argument('--initial-checkpoint', metavar='CKPT', help='start from these video-LLM weights (strict)')
    g.add_argument('--tower-checkpoint', metavar='CKPT',
                   help='load these weights into the vision tower (a zoo / timm checkpoint; a classifier is dropped)')
    g.add_argument('--grad-checkpointing', action='store_true', help='gradient checkpointing in tower and decoder')
    add_ema_options(g)
    add_optimisation_options(p, epochs=3, batch_size=4, lr=3e-4, warmup_epochs=0, warmup_lr=1e-6, min_lr=1e-6,
                             clip_grad=1.0)
    return p


def _validate(args: argparse.Namespace) -> None:
    """Ranges and choices of the options; ``ValueError`` naming the flag and what it must be."""
    check_run_options(args)
    check_counts(args, ('num_frames',))
    check_counts(args, ('frame_size', 'max_train', 'max_val'), optional=True)
    if args.val_data_dir is None and not 0 < args.val_fraction < 1:
        bad_option('--val-fraction', args.val_fraction, 'in (0, 1) (or give --val-data-dir)')
    if not args.fps > 0 or not math.isfinite(args.fps):
        bad_option('--fps', args.fps, 'positive')
    if args.benchmark not in list_benchmarks():
        bad_option('--benchmark', args.benchmark, f'one of {", ".join(list_benchmarks())}')


def parse_vlm_args(argv: Optional[List[str]] = None, **kwargs: Any) -> argparse.Namespace:
    """``parse_train_args`` (config layering, resume record) with the ``zoo train-vlm`` parser and checks."""
    return parse_train_args(argv, parser=build_vlm_parser(), validate=_validate, **kwargs)


def train_vlm(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Run ``zoo train-vlm`` with command-line style arguments (see the module docstring and ``--help``).

    Returns:
        As :func:`zoo.train.loop.train`: ``output``, ``epochs``, ``best_top1`` (multiple-choice accuracy, %),
        ``best_epoch`` and ``history``.

    Raises:
        ValueError / FileNotFoundError / zoo.errors.ZooError: user errors (bad options, missing data, unknown
            model, output dir in use or holding another run, a ``--resume`` flag contradicting the record).
    """
    from zoo.tasks.imageqa import vlm_training  # --benchmark imageqa: tiled images (ImageQATraining)
    return train(argv, parse=parse_vlm_args, training=vlm_training, prog='zoo train-vlm')

