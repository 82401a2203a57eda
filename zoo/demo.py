"""``zoo demo``: the whole job in about two minutes on two CPU cores, on images shipped with the package.

Trains three tiny ViTs that differ only in their position encoding (learned APE, PEG and RoPE-Mixed) on 400 CIFAR-10
images (``zoo/assets/cifar10_sample``, 32 px), then evaluates them zero-shot at 24, 32, 40 and 48 px on the 100 held-out
sample images and writes / prints the report (table and plot). The run is deliberately tiny, so its numbers show that
the pipeline works, not how the encodings compare; ``docs/results/cifar10.md`` has the full-data comparison.

Then a short video part: ``zoo.datasets.synthetic_video`` writes 48 small MP4 clips (4 classes: motion left / right,
slow / fast swing), a tiny video ViT with 3D RoPE (``pe_video_vit_tiny_patch16_rope3d_224``) trains on them at 4
frames of 32 px, and ``zoo eval-frames`` evaluates it zero-shot at 2, 4 and 8 frames and 24, 32 and 48 px
(``docs/results/video.md`` has the real comparison). Last, a video-QA part: ``zoo make-videoqa`` writes 36 questions,
a tiny video-LLM (``pe_vlm_tiny_mrope``, 1-block decoder) trains on them at 4 frames and ``zoo eval-video`` scores it at
4 and 8 frames (``docs/results/video_qa.md`` has the seven-scheme job). ``--no-video`` skips both video parts.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import time
from importlib import resources
from typing import Optional, Sequence

from zoo.sweep.frames import eval_frames
from zoo.sweep.resolution import eval_resolution
from zoo.train.loop import train

__all__ = ['demo', 'sample_dir', 'DEMO_PES']

_logger = logging.getLogger('zoo.demo')

DEMO_PES = ('ape', 'peg', 'rope_mixed')
DEMO_SIZES = (24, 32, 40, 48)
_MARKER = '.zoo-demo'
# One recipe for the three models: 32 px input, 4 px patches (8 x 8 grid), width 64, 2 blocks.
_MODEL_KWARGS = ['patch_size=4', 'embed_dim=64', 'depth=2', 'num_heads=2']
_RECIPE = ['--img-size', '32', '--epochs', '6', '--batch-size', '32', '--lr', '3e-3', '--warmup-epochs', '1',
           '--weight-decay', '0.05', '--scale', '0.6', '1.0', '--color-jitter', '0', '--crop-pct', '1.0',
           '--workers', '0', '--seed', '0']


def sample_dir() -> str:
    """Path of the bundled CIFAR-10 sample (``train/`` and ``test/`` class folders)."""
    return str(resources.files('zoo') / 'assets' / 'cifar10_sample')


def _prepare(output: str) -> None:
    if os.path.isdir(output) and os.listdir(output):
        if not os.path.exists(os.path.join(output, _MARKER)):
            raise ValueError(f'{output!r} exists and is not a zoo demo output; pass another --output')
        shutil.rmtree(output)  # our own previous demo output
    os.makedirs(output, exist_ok=True)
    open(os.path.join(output, _MARKER), 'w').close()


def demo(argv: Optional[Sequence[str]] = None, pes: Sequence[str] = DEMO_PES, sizes: Sequence[int] = DEMO_SIZES,
         epochs: Optional[int] = None) -> dict:
    """Train tiny models of ``pes`` on the bundled sample, evaluate them at ``sizes`` and print the report.

    Args:
        argv: command-line options (``--output DIR``, default ``./zoo-demo-output``, replaced on every run).
        pes: model suffixes (``pe_vit_tiny_patch16_<pe>_224``).
        sizes: evaluation sizes in px (multiples of the 4 px patch).
        epochs: override the recipe's epochs (tests use 1).

    Returns:
        ``output`` dir, ``report`` / ``plot`` paths, ``rows`` (results) and ``seconds`` (wall time).
    """
    parser = argparse.ArgumentParser(prog='zoo demo', description=__doc__.splitlines()[0])
    parser.add_argument('--output', default='zoo-demo-output', help='output dir (its previous demo output is replaced)')
    parser.add_argument('--no-video', action='store_true', help='skip the short video part')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch CPU threads (the demo models are too small to gain from more; 1 also keeps a '
                             'busy machine from thrashing)')
    args = parser.parse_args(argv)
    t0 = time.time()
    _prepare(args.output)
    data = sample_dir()
    recipe = list(_RECIPE)
    if epochs is not None:
        recipe[recipe.index('--epochs') + 1] = str(epochs)
    if args.threads:
        recipe += ['--threads', str(args.threads)]
    n_epochs = recipe[recipe.index('--epochs') + 1]
    runs = []
    for pe in pes:
        run = os.path.join(args.output, 'runs', pe)
        _logger.info('--- training pe_vit_tiny_patch16_%s_224 (tiny: width 64, 2 blocks, %s epochs on 400 images)',
                     pe, n_epochs)
        train(['--model', f'pe_vit_tiny_patch16_{pe}_224', '--data-dir', data, '--val-split', 'test', '--output', run,
               '--model-kwargs', *_MODEL_KWARGS, '--no-progress', *recipe])
        runs += ['--run', run]
    train_s = time.time() - t0
    note = (f'**How small this run was:** `zoo demo` trained each model for {n_epochs} epochs on 400 CIFAR-10 images '
            f'(40 per class, 32 px; ViT with 4 px patches, width 64, 2 blocks, about 0.1M parameters) in '
            f'{train_s:.0f} s in total, and evaluates on 100 held-out images (10 per class), so one image is one '
            'percentage point and differences of a few points are noise. It shows the pipeline, not a ranking; '
            'see docs/results/cifar10.md for full CIFAR-10.')
    threads = ['--threads', str(args.threads)] if args.threads else []
    result = eval_resolution([*runs, '--data-dir', data, '--split', 'test', '--sizes', *map(str, sizes),
                              '--batch-size', '100', '--workers', '0', '--output', os.path.join(args.output, 'report'),
                              '--overwrite', '--no-progress', '--note', note, *threads])
    with open(result['paths']['md']) as f:
        print('\n' + f.read())
    video = None if args.no_video else _video_demo(args.output, threads, epochs)
    videoqa = None if args.no_video else _videoqa_demo(args.output, threads, epochs)
    seconds = time.time() - t0
    print(f'report: {os.path.abspath(result["paths"]["md"])}\nplot:   {os.path.abspath(result["paths"]["png"])}')
    if video is not None:
        print(f'video report: {os.path.abspath(video["paths"]["md"])}')
    if videoqa is not None:
        print(f'video QA report: {os.path.abspath(videoqa["paths"]["md"])}')
    print(f'demo finished in {seconds:.0f} s')
    return dict(output=args.output, report=result['paths']['md'], plot=result['paths']['png'], rows=result['rows'],
                seconds=seconds, video=video, videoqa=videoqa)


VIDEO_CLASSES = ('motion_left', 'motion_right', 'speed_fast', 'speed_slow')


def _video_demo(output: str, threads, epochs: Optional[int]) -> dict:
    """Synthetic clips -> a tiny rope3d video ViT at 4 frames -> zoo eval-frames over frames x size; prints the table.

    Returns ``eval_frames``' result (``rows``, ``paths``).
    """
    from zoo.datasets.synthetic_video import make_videos
    data = os.path.join(output, 'videos')
    run = os.path.join(output, 'runs', 'video_rope3d')
    _logger.info('--- video: writing 48 synthetic clips (%s), then training pe_video_vit_tiny_patch16_rope3d_224 at 4 '
                 'frames of 32 px', ', '.join(VIDEO_CLASSES))
    make_videos(data, num_per_class=8, val_per_class=4, num_frames=8, size=32, seed=0, classes=VIDEO_CLASSES,
                progress=False)
    n_epochs = str(epochs if epochs is not None else 4)
    thread_args = list(threads)  # ['--threads', N] or []
    train(['--model', 'pe_video_vit_tiny_patch16_rope3d_224', '--data-dir', data, '--output', run, '--num-frames',
           '4', '--img-size', '32', '--model-kwargs', 'patch_size=8', 'embed_dim=32', 'depth=2', 'num_heads=2',
           '--epochs', n_epochs, '--batch-size', '8', '--lr', '3e-3', '--warmup-epochs', '1', '--smoothing', '0',
           '--workers', '0', '--seed', '0', '--no-progress', *thread_args])
    note = (f'**How small this run was:** 32 training clips of 8 frames (4 classes), {n_epochs} epochs of a 2-block '
            'video ViT; 16 validation clips, so one clip is 6.25 points. It shows the pipeline, not a ranking; see '
            'docs/results/video.md.')
    result = eval_frames(['--run', run, '--data-dir', data, '--frames', '2', '4', '8', '--sizes', '24', '32', '48',
                          '--batch-size', '16', '--workers', '0', '--output', os.path.join(output, 'video_report'),
                          '--overwrite', '--no-progress', '--note', note, *thread_args])
    with open(result['paths']['md']) as f:
        print('\n' + f.read().split('## Per model', 1)[0])
    return result


def _videoqa_demo(output: str, threads, epochs: Optional[int]) -> dict:
    """Synthetic video QA -> a tiny video-LLM (M-RoPE) at 4 frames -> ``zoo eval-video`` at 4 and 8 frames.

    ``zoo make-videoqa`` writes 8 questions per temporal task (generated backgrounds) and 4 V-NIAH items;
    ``zoo train-vlm`` trains ``pe_vlm_tiny_mrope`` (1-block decoder of width 64) on them, and ``zoo eval-video``
    scores the option letter it writes. Returns ``eval_video``'s result (``rows``, ``paths``).
    """
    from zoo.datasets.synthetic_videoqa import make_videoqa
    from zoo.sweep.videoqa import eval_video
    from zoo.train.vlm import train_vlm
    data = os.path.join(output, 'videoqa')
    run = os.path.join(output, 'runs', 'vlm_mrope')
    _logger.info('--- video QA: writing a small synthetic video-QA set, then training pe_vlm_tiny_mrope at 4 frames')
    make_videoqa(data, num_per_task=8, num_frames=16, size=32, seed=0, clips_dir=None, niah_lengths=(16,),
                 niah_depths=(0.0, 1.0), niah_per_cell=2, needle_span=2, progress=False)
    n_epochs = str(epochs if epochs is not None else 3)
    train_vlm(['--model', 'pe_vlm_tiny_mrope', '--data-dir', data, '--output', run, '--num-frames', '4',
               '--frame-size', '32', '--model-kwargs', 'dim=64', 'depth=1', 'num_heads=2', 'num_kv_heads=1',
               'mlp_hidden=128', 'tower_kwargs.img_size=32', 'tower_kwargs.patch_size=8', 'tower_kwargs.embed_dim=32',
               'tower_kwargs.depth=1', 'tower_kwargs.num_heads=2', '--epochs', n_epochs, '-b', '8', '--lr', '3e-3',
               '--workers', '0', '--seed', '0', '--no-progress', *threads])
    note = (f'**How small this run was:** {n_epochs} epochs on about 30 questions with a 1-block decoder: expect '
            'chance-level accuracy. It shows the pipeline (frames, prompt, generation, letter parsing, V-NIAH '
            'cells), not a ranking; see docs/results/video_qa.md.')
    result = eval_video(['--benchmark', 'mvbench', '--data-root', data, '--run', run, '--frames', '4', '8',
                         '-b', '8', '--workers', '0', '--output', os.path.join(output, 'videoqa_report'),
                         '--overwrite', '--no-progress', '--note', note, *threads])
    with open(result['paths']['md']) as f:
        print('\n' + f.read().split('### Per task', 1)[0])
    return result
