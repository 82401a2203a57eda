"""``zoo demo``: the whole job in one to three minutes on two CPU cores, on images shipped with the package.

Trains three tiny ViTs that differ only in their position encoding (learned APE, PEG and RoPE-Mixed) on 400 CIFAR-10
images (``zoo/assets/cifar10_sample``, 32 px), then evaluates them zero-shot at 24, 32, 40 and 48 px on the 100 held-out
sample images and writes / prints the report (table and plot). The run is deliberately tiny, so its numbers show that
the pipeline works, not how the encodings compare; ``docs/results/cifar10.md`` has the full-data comparison.

Then a video part that learns: the ranking task of ``zoo make-videos --task ranking`` in two blocks (a red and a blue
square flashed in tubelet-aligned blocks, red-then-blue vs blue-then-red, and one flash in the first vs the last
block: classes that only the time of events separates, so a model without positions stays at 50 %), training clips
rendered in memory with a fixed seed (``zoo train --in-memory-clips``), a tiny video ViT with the 1D sin-cos PE
(``pe_video_vit_tiny_patch16_sincos_224``: it left the plateau fastest in the trials behind this recipe) trained at 4
frames of 16 px for 768 updates with the LR held until it leaves chance (``--sched hold_cosine``), and
``zoo eval-frames`` on the written validation clips, zero-shot over frames and sizes (``docs/results/video.md`` has
the real comparison). Last, a video-QA part that only shows the mechanics (far too short to learn anything):
``zoo make-videoqa`` writes 36 questions, a tiny video-LLM (``pe_vlm_tiny_mrope``, 1-block decoder) trains on them at
4 frames and ``zoo eval-video`` scores it at 4 and 8 frames (``docs/results/video_qa.md`` has the real job).
``--no-video`` skips both video parts.
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
    parser = argparse.ArgumentParser(prog='zoo demo', description=__doc__.splitlines()[0].replace('``', ''))
    parser.add_argument('--output', default='zoo-demo-output', help='output dir (its previous demo output is replaced)')
    parser.add_argument('--no-video', action='store_true', help='skip both video parts (the video classifier and the video-QA mechanics)')
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
        print(f'video QA report (mechanics only, chance by design): {os.path.abspath(videoqa["paths"]["md"])}')
    print(f'demo finished in {seconds:.0f} s')
    return dict(output=args.output, report=result['paths']['md'], plot=result['paths']['png'], rows=result['rows'],
                seconds=seconds, video=video, videoqa=videoqa)


# The video part: the ranking task in 2 blocks (one 2-frame tubelet each at 4 frames), 16 px (2 x 2 patches of 8 px),
# training clips rendered in memory, a fixed seed: 12 epochs x 64 updates.
VIDEO_MODEL = 'pe_video_vit_tiny_patch16_sincos_224'
VIDEO_TRAIN_PER_CLASS, VIDEO_VAL_PER_CLASS, VIDEO_EPOCHS = 256, 32, 12
VIDEO_FRAMES, VIDEO_SIZE = 4, 16


def _video_demo(output: str, threads, epochs: Optional[int]) -> dict:
    """The ranking task in memory -> a tiny sincos video ViT at 4 frames of 16 px -> zoo eval-frames over frames x
    size on the written validation clips; prints the table and whether it learned (>= 75 % at its training clip).

    Returns ``eval_frames``' result (``rows``, ``paths``) with ``top1`` (at the training clip) added.
    """
    from zoo.datasets.synthetic_video import make_videos
    data = os.path.join(output, 'videos')
    run = os.path.join(output, 'runs', 'video_sincos')
    n_epochs = str(epochs if epochs is not None else VIDEO_EPOCHS)
    n_train = 4 * VIDEO_TRAIN_PER_CLASS
    _logger.info('--- video: the ranking task (red-then-blue vs blue-then-red flashes, one flash first vs last), %d '
                 'training clips rendered in memory; training %s at %d frames of %d px', n_train, VIDEO_MODEL,
                 VIDEO_FRAMES, VIDEO_SIZE)
    make_videos(data, task='ranking', num_per_class=VIDEO_TRAIN_PER_CLASS, val_per_class=VIDEO_VAL_PER_CLASS,
                num_frames=32, size=VIDEO_SIZE, seed=0, blocks=VIDEO_FRAMES // 2, write_splits=('val',),
                progress=False)
    thread_args = list(threads)  # ['--threads', N] or []
    train(['--model', VIDEO_MODEL, '--data-dir', data, '--in-memory-clips', '--output', run, '--num-frames',
           str(VIDEO_FRAMES), '--img-size', str(VIDEO_SIZE), '--model-kwargs', 'patch_size=8', 'embed_dim=32',
           'depth=2', 'num_heads=2', '--epochs', n_epochs, '--batch-size', '16', '--lr', '3e-3', '--sched',
           'hold_cosine', '--hold-until', '80', '--warmup-epochs', '1', '--mean', '0.5', '0.5', '0.5', '--std', '0.5',
           '0.5', '0.5', '--smoothing', '0', '--workers', '0',
           '--seed', '0', '--no-progress', *thread_args])
    updates = int(n_epochs) * (n_train // 16)
    note = (f'**How small this run was:** {n_train} training clips of the ranking task (4 classes, rendered in '
            f'memory), {n_epochs} epochs = {updates} updates of a 2-block video ViT of width 32 at {VIDEO_FRAMES} '
            f'frames of {VIDEO_SIZE} px; {4 * VIDEO_VAL_PER_CLASS} validation clips, so one clip is '
            f'{100 / (4 * VIDEO_VAL_PER_CLASS):.2f} points. Chance is 25 %; a model without positions can reach '
            '50 % (it tells the pairs apart, not the order). It shows the pipeline and that a PE model learns the '
            'order of events; see docs/results/video.md for the comparison.')
    result = eval_frames(['--run', run, '--data-dir', data, '--frames', '4', '8', '16', '--sizes', '16', '24', '32',
                          '--batch-size', '32', '--workers', '0', '--output', os.path.join(output, 'video_report'),
                          '--overwrite', '--no-progress', '--note', note, *thread_args])
    with open(result['paths']['md']) as f:
        print('\n' + f.read().split('## Per model', 1)[0])
    at = [r['top1'] for r in result['rows'] if r['frames'] == VIDEO_FRAMES and r['size'] == VIDEO_SIZE]
    result['top1'] = float(at[0]) if at else float('nan')
    if epochs is not None:
        verdict = f'a reduced run ({n_epochs} epochs), not the demo\'s recipe'
    elif result['top1'] >= 75:
        verdict = 'it learned the order and time of events'
    else:
        verdict = 'it did NOT reach 75 % (the recipe is meant to; please report this)'
    print(f'video part: {result["top1"]:.1f} % at the training clip ({VIDEO_FRAMES} frames, {VIDEO_SIZE} px, on the '
          f'MP4 files; training validated on clips rendered in memory; chance 25 %, no-position level 50 %): {verdict}')
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
    _logger.info('--- video QA (mechanics only: far too short to learn; expect chance): writing a small synthetic '
                 'video-QA set, then training pe_vlm_tiny_mrope at 4 frames')
    make_videoqa(data, num_per_task=8, num_frames=16, size=32, seed=0, clips_dir=None, niah_lengths=(16,),
                 niah_depths=(0.0, 1.0), niah_per_cell=2, needle_span=2, progress=False)
    n_epochs = str(epochs if epochs is not None else 3)
    train_vlm(['--model', 'pe_vlm_tiny_mrope', '--data-dir', data, '--output', run, '--num-frames', '4',
               '--frame-size', '32', '--model-kwargs', 'dim=64', 'depth=1', 'num_heads=2', 'num_kv_heads=1',
               'mlp_hidden=128', 'tower_kwargs.img_size=32', 'tower_kwargs.patch_size=8', 'tower_kwargs.embed_dim=32',
               'tower_kwargs.depth=1', 'tower_kwargs.num_heads=2', '--epochs', n_epochs, '-b', '8', '--lr', '3e-3',
               '--workers', '0', '--seed', '0', '--no-progress', *threads])
    note = (f'**This part only shows the mechanics; it does not learn.** {n_epochs} epochs on about 30 questions '
            'with a 1-block decoder is far below the ~2000 updates a tiny video-LLM needs to leave chance, so the '
            'accuracies below are chance level by design. It exercises the pipeline (frames, prompt, generation, '
            'letter parsing, V-NIAH cells); see docs/results/video_qa.md for models that learn.')
    result = eval_video(['--benchmark', 'mvbench', '--data-root', data, '--run', run, '--frames', '4', '8',
                         '-b', '8', '--workers', '0', '--output', os.path.join(output, 'videoqa_report'),
                         '--overwrite', '--no-progress', '--note', note, *threads])
    with open(result['paths']['md']) as f:
        print('\n' + f.read().split('### Per task', 1)[0])
    return result
