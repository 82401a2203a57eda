"""``zoo search-longrope``: LongRoPE's evolutionary search of per-frequency rescale factors, small enough for a CPU.

Ding et al. 2024, "LongRoPE" (arXiv:2402.13753), Sec. 3.2; the loop and its sizes are in
:func:`zoo.encodings.longrope_search.evolution_search`. Two kinds of checkpoint:

* an image classifier with a rotary encoding (``rope_axial``, ``rope_mixed``, ``rope_mixed_ape``; a ``zoo train``
  run or checkpoint, e.g. the CIFAR recipes): the fitness is the mean cross-entropy at ``--scale`` times the training
  size (``2``: twice the side, so the grid's rows and columns are both extended by 2) on a validation split carved
  from the training folder (``--split train``; ``--val-size`` images drawn with ``--seed``, preloaded once);
* a video-LLM (``pe_vlm_*``, ``zoo train-vlm``): the fitness is the cross-entropy of the answer tokens of V-NIAH
  items (``--tasks vniah`` of ``--benchmark``, default mvbench, as ``zoo make-videoqa`` writes them) at ``--frames``
  frames; the training span of the position ids per axis is measured on the same items at the checkpoint's training
  frame count.

The best factors go to ``--output`` (JSON, written atomically; :mod:`zoo.encodings.longrope` has the format), which
``--extrapolation longrope=FILE`` (``zoo eval-resolution`` / ``eval-frames``) or
``pe.set_extrapolation('longrope=FILE')`` take. The best candidate is compared with the best of none / PI / NTK /
YaRN by the paired per-sample loss difference: better by more than two standard errors, the file is written (exit 0);
within two standard errors, the command says the validation set is too small to decide (the file is still written,
with ``search.decided = false``, exit 0); worse by more than two, the command names the baseline that wins and
writes no file (exit 1). Fewer than 8 samples are refused up front.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from zoo.encodings.longrope import factors_document
from zoo.encodings.longrope_search import evolution_search, ladder_of
from zoo.runs.options import command_parser
from zoo.sweep.options import add_allow_root_option

__all__ = ['build_parser', 'search_longrope', 'main', 'MIN_SAMPLES', 'MemoryEstimateError']

_logger = logging.getLogger(__name__)
MIN_SAMPLES = 8


class MemoryEstimateError(ValueError):
    """A search whose images and activations would not fit in the available memory (estimated before reading)."""


def build_parser(prog: str = 'zoo search-longrope') -> argparse.ArgumentParser:
    p = command_parser(prog, __doc__.split('\n\n')[0].replace('``', ''),
                       'Sizes of the search (Sec. 3.2 of the paper, which uses 64 / 32 / 16 / 16 / 40): a first '
                       'generation of --population candidates that starts from the none, PI, NTK and YaRN factors, '
                       'then --iterations rounds that keep the best --parents and add --mutations mutated and '
                       '--crossovers crossed candidates; each new candidate costs one pass over the --val-size '
                       'samples.')
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument('--run', metavar='DIR', help='a zoo train / train-vlm run folder (its final checkpoint)')
    src.add_argument('--checkpoint', metavar='PATH', help='a zoo train / train-vlm checkpoint file')
    p.add_argument('--data-dir', required=True, metavar='DIR',
                   help='image classifier: the training folder root (class folders under --split); video-LLM: the '
                        'video-QA root holding the V-NIAH task')
    p.add_argument('--output', required=True, metavar='FILE', help='the factors file to write (JSON)')
    p.add_argument('--split', default='train', help='image folder split the validation images are carved from')
    add_allow_root_option(p)
    p.add_argument('--val-size', type=int, default=64, help='validation samples (images / V-NIAH items)')
    p.add_argument('--scale', type=float, default=2.0, help='image classifier: target side / training side')
    p.add_argument('--frames', type=int, default=None,
                   help='video-LLM: frames of the V-NIAH clips searched at (default: twice the training frames)')
    p.add_argument('--benchmark', default='mvbench', help='video-LLM: reader of --data-dir')
    p.add_argument('--tasks', nargs='+', default=['vniah'], help='video-LLM: tasks (JSON stems) searched on')
    p.add_argument('--population', type=int, default=8, help='candidates in the first generation')
    p.add_argument('--mutations', type=int, default=4, help='mutated candidates added per iteration')
    p.add_argument('--crossovers', type=int, default=4, help='crossed candidates added per iteration')
    p.add_argument('--parents', type=int, default=4, help='best candidates kept as parents')
    p.add_argument('--iterations', type=int, default=3, help='rounds of mutation and crossover')
    p.add_argument('--seed', type=int, default=0, help='seed of the validation split and the search (default 0)')
    p.add_argument('--batch-size', type=int, default=32, help='samples per forward')
    p.add_argument('--device', default='cpu', help='torch device')
    p.add_argument('--threads', type=int, default=None, help='torch CPU threads')
    return p


def _checkpoint(args) -> str:
    from zoo.runs.models import run_checkpoint
    return run_checkpoint(args.run, 'zoo search-longrope') if args.run else args.checkpoint


def search_longrope(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run ``zoo search-longrope``; returns ``{'path', 'decided', 'message', 'result'}``.

    Raises:
        ValueError / FileNotFoundError: user errors (no such checkpoint or folder, an encoding that does not take
            longrope, a validation set below :data:`MIN_SAMPLES`, bad sizes), before the search.
    """
    args = build_parser().parse_args(argv)
    for flag in ('val_size', 'batch_size', 'population', 'parents', 'iterations'):
        if getattr(args, flag) < 1:
            raise ValueError(f'--{flag.replace("_", "-")} {getattr(args, flag)}: must be at least 1')
    if args.val_size < MIN_SAMPLES:
        raise ValueError(f'--val-size {args.val_size}: a validation set this small is too small to decide between '
                         f'candidates; use at least {MIN_SAMPLES} (64 or more for a decision you can trust)')
    if not args.scale > 1.0:
        raise ValueError(f'--scale {args.scale}: the target must be larger than the training size (e.g. 2)')
    if args.threads:
        torch.set_num_threads(args.threads)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir):
        raise FileNotFoundError(f'--output {args.output!r}: folder {out_dir!r} does not exist')
    from zoo.runs.models import is_video_llm, load_model, recorded_model_name
    path = _checkpoint(args)
    device = torch.device(args.device)
    model, meta = load_model(dict(model=None, checkpoint=path))
    model = model.to(device).eval()
    if is_video_llm(recorded_model_name(path)):
        pe, losses, plain, scale, target, what = _vlm_fitness(args, model, meta, device)
    else:
        pe, losses, plain, scale, target, what = _image_fitness(args, model, meta, device)
    ladder = ladder_of(pe)
    _logger.info('searching LongRoPE factors for %s (%s) at %s: %d axes x %d frequencies, population %d, %d '
                 'iterations', meta.get('model_name'), ladder.encoding, what, len(ladder.axes), ladder.num,
                 args.population, args.iterations)
    res = evolution_search(ladder, scale, losses, population=args.population, mutations=args.mutations,
                           crossovers=args.crossovers, parents=args.parents, iterations=args.iterations,
                           seed=args.seed, plain=plain, log=_logger.info)
    grid = pe.extrapolation.train_grid
    pe.set_extrapolation('none')
    if res.verdict == 'worse':  # factors that lose are not written: the baseline is what to use
        _logger.warning('%s; no factors file written', res.message)
        return dict(path=None, decided=False, verdict=res.verdict, message=res.message + '; no factors file written',
                    result=res)
    doc = factors_document(ladder.encoding, ladder.axes, res.factors, res.n_hat, grid, target, dict(
        checkpoint=os.path.abspath(path), model=meta.get('model_name'), target=what, loss=res.loss,
        baselines=res.baselines, best_baseline=res.best_baseline, decided=res.decided, verdict=res.verdict,
        message=res.message,
        history=res.history, evaluations=res.evaluations, samples=args.val_size, seed=args.seed,
        sizes=dict(population=args.population, mutations=args.mutations, crossovers=args.crossovers,
                   parents=args.parents, iterations=args.iterations)))
    from zoo.datasets.files import write_text_atomic
    write_text_atomic(args.output, json.dumps(doc, indent=1) + '\n')
    return dict(path=args.output, decided=res.decided, verdict=res.verdict, message=res.message, result=res)


# ----------------------------------------------------------------------------------------- image classifier

def _fitness(pe: Any, run: Callable[[], torch.Tensor]) -> Tuple[Callable, Callable]:
    """``(losses(factors, n_hat), plain())``: the per-sample losses of ``run`` with ``pe`` switched to those LongRoPE
    factors, and with no strategy (the search's fitness and its ``none`` baseline)."""
    def losses(factors: List[List[float]], n_hat: List[float]) -> torch.Tensor:
        pe.set_extrapolation(dict(strategy='longrope', factors=factors, n_hat=n_hat))
        return run()

    def plain() -> torch.Tensor:
        pe.set_extrapolation('none')
        return run()
    return losses, plain

def _image_fitness(args, model, meta, device):
    from timm.data import create_transform, resolve_data_config
    from zoo.datasets.image_folder import open_image_folder
    from zoo.runs.models import is_video_model, patch_size_of
    pe = getattr(model, 'pe', None)
    if is_video_model(model):
        raise ValueError('zoo search-longrope takes image classifiers and video-LLMs; a video classifier is not '
                         'supported yet (its frames and size would both be searched)')
    if pe is None or 'longrope' not in getattr(pe, 'extrapolation_strategies', ()):
        raise ValueError(f'{meta.get("model_name")}: its encoding does not take longrope; the rotary encodings '
                         'rope_axial, rope_mixed, rope_mixed_ape, rope3d and multimodal_rope do')
    if args.frames is not None:
        raise ValueError(f'--frames {args.frames}: an image classifier has no frames (--frames is for video-LLMs); '
                         'fix: drop --frames and set the target size with --scale')
    train = int(meta.get('img_size') or model.patch_embed.img_size[0])
    patch = patch_size_of(model)
    target = int(round(train * args.scale / patch)) * patch
    if target <= train:
        raise ValueError(f'--scale {args.scale} at {train} px with {patch} px patches gives {target} px: no larger '
                         'grid')
    _check_image_memory(args, model, target, patch)
    cfg = dict(meta.get('data_config') or resolve_data_config({}, model=model))
    tf = create_transform((3, target, target), is_training=False, interpolation=cfg['interpolation'],
                          mean=tuple(cfg['mean']), std=tuple(cfg['std']), crop_pct=cfg['crop_pct'])
    ds = open_image_folder(args.data_dir, args.split, tf, allow_roots=args.allow_root)
    if len(ds) < MIN_SAMPLES:
        raise ValueError(f'{args.data_dir!r} ({args.split}) holds {len(ds)} images: too small to decide between '
                         f'candidates; need at least {MIN_SAMPLES}')
    g = torch.Generator().manual_seed(args.seed)
    idx = torch.randperm(len(ds), generator=g)[:args.val_size].tolist()
    xs, ys = zip(*(ds[i] for i in idx))
    x, y = torch.stack(xs), torch.tensor(ys)
    if meta.get('class_names') and list(meta['class_names']) != list(ds.classes):
        raise ValueError(f'{args.data_dir!r} has classes {ds.classes[:5]}..., the checkpoint was trained on '
                         f'{meta["class_names"][:5]}...; search on its training folder')
    model.set_input_size(img_size=target)
    _logger.info('validation split: %d images of %s carved from %r (seed %d) at %d px (trained at %d px)', len(idx),
                 args.split, args.data_dir, args.seed, target, train)

    def run() -> torch.Tensor:
        out = []
        with torch.no_grad():
            for i in range(0, len(x), args.batch_size):
                logits = model(x[i:i + args.batch_size].to(device)).float()
                out.append(F.cross_entropy(logits, y[i:i + args.batch_size].to(device), reduction='none').cpu())
        return torch.cat(out)

    losses, plain = _fitness(pe, run)

    s = target / train
    return pe, losses, plain, (s, s), (pe.extrapolation.train_grid[0] * s, pe.extrapolation.train_grid[1] * s), \
        f'{target} px ({s:g}x the training side)'


def _check_image_memory(args, model, target: int, patch: int) -> None:
    """Refuse a search whose preloaded validation images plus one batch's activations would not fit in memory, before
    any image is read (against :func:`zoo.datasets.video.available_memory`, as eval-frames' check: ``MemAvailable``).

    The estimate (float32): ``val_size * 3 * target**2`` for the images, and per batch ``tokens * embed_dim * 16``
    (a block's activations) plus ``heads * tokens**2`` (an attention matrix where SDPA falls back to the math path).

    Raises:
        MemoryEstimateError (a ValueError): the estimate is above the available memory.
    """
    from zoo.datasets.video import available_memory
    tokens = (target // patch) ** 2
    heads = max([getattr(m, 'num_heads', 1) for m in model.modules() if hasattr(m, 'num_heads')] or [1])
    dim = int(getattr(model, 'embed_dim', 0) or getattr(model, 'num_features', 0) or 0)
    batch = min(args.batch_size, args.val_size)
    need = 4 * (args.val_size * 3 * target ** 2 + batch * (tokens * dim * 16 + heads * tokens ** 2))
    avail = available_memory()
    if avail is not None and need > avail:
        raise MemoryEstimateError(f'--scale {args.scale:g} ({target} px images, {tokens} tokens) with --val-size '
                                  f'{args.val_size} and --batch-size {args.batch_size} needs about '
                                  f'{need / 2 ** 30:.3g} GiB of memory for the images and one batch\'s activations, '
                                  f'more than the {avail / 2 ** 30:.3g} GiB available; fix: lower --scale, --val-size '
                                  'or --batch-size')


# ---------------------------------------------------------------------------------------------------- video-LLM
def _vlm_fitness(args, model, meta, device):
    from zoo.datasets.video import FrameSampling
    from zoo.datasets.videoqa import load_benchmark
    from zoo.datasets.videoqa.dataset import VideoQADataset
    from zoo.tasks.videoqa import VideoQATask
    pe = model.decoder.pe
    train_frames = int(meta.get('num_frames') or 8)
    frames = int(args.frames or 2 * train_frames)
    if frames <= train_frames:
        raise ValueError(f'--frames {frames}: the target must be longer than the training clip ({train_frames} '
                         'frames)')
    size = int(meta.get('img_size') or model.data_config['img_size'][0])
    records, _ = load_benchmark(args.benchmark, args.data_dir, tasks=list(args.tasks), allow_roots=args.allow_root)
    records = sorted(records, key=lambda r: r.id)
    g = torch.Generator().manual_seed(args.seed)
    records = [records[i] for i in torch.randperm(len(records), generator=g)[:args.val_size].tolist()]
    if len(records) < MIN_SAMPLES:
        raise ValueError(f'{args.data_dir!r} holds {len(records)} items of {args.tasks}: too small to decide between '
                         f'candidates; need at least {MIN_SAMPLES} (zoo make-videoqa writes V-NIAH items)')
    task = VideoQATask(model)

    def batches(t: int) -> list:
        ds = VideoQADataset(records, FrameSampling('uniform', t), size)
        items = [ds[i] for i in range(len(ds))]
        bad = [it for it in items if not isinstance(it, dict)]
        if bad:
            raise ValueError(f'{len(bad)} V-NIAH clip(s) could not be read at {t} frames; check --data-dir')
        return [task.to_batch({'items': items[i:i + args.batch_size], 'bad': []}, device, False)
                for i in range(0, len(items), args.batch_size)]

    def span(bs: list) -> Tuple[float, ...]:
        lo, hi = None, None
        for b in bs:
            i = b.inputs
            ids, _ = model.position_ids(i['input_ids'], i['attention_mask'], video_grid_thw=i['video_grid_thw'],
                                        second_per_grid_ts=i['second_per_grid_ts'])
            keep = i['attention_mask'].bool()[None].expand_as(ids)
            a = torch.where(keep, ids.double(), torch.full_like(ids.double(), float('inf'))).flatten(1).amin(1)
            z = torch.where(keep, ids.double(), torch.full_like(ids.double(), -float('inf'))).flatten(1).amax(1)
            lo = a if lo is None else torch.minimum(lo, a)
            hi = z if hi is None else torch.maximum(hi, z)
        return tuple(float(v) for v in (hi - lo + 1))

    train_span = pe.extrapolation.train_grid or span(batches(train_frames))
    pe.set_extrapolation(dict(strategy='none', train_grid=train_span))
    data = batches(frames)
    target = span(data)
    scale = max(t / s for t, s in zip(target, train_span))
    _logger.info('V-NIAH: %d items at %d frames (trained at %d); id span per axis %s (training %s)', len(records),
                 frames, train_frames, target, train_span)

    def run() -> torch.Tensor:
        out = []
        with torch.no_grad():
            for b in data:
                logits = task.forward(model, b).float()
                start = 0
                for n in b.answer_counts:
                    out.append(F.cross_entropy(logits[start:start + n], b.targets[start:start + n]).cpu())
                    start += n
        return torch.stack(out)

    losses, plain = _fitness(pe, run)

    return pe, losses, plain, (scale,), target, f'V-NIAH at {frames} frames (trained at {train_frames})'


def main(argv: List[str]) -> int:
    """The CLI entry: prints the file written and the decision; status 0 when the file is written (the factors beat
    the best baseline, or the validation set is too small to decide), 1 when a baseline beats them (no file)."""
    out = search_longrope(argv)
    if out['path'] is None:
        print(out['message'])
        return 1
    print(f'factors: {out["path"]}')
    print(out['message'])
    return 0
