"""``zoo train-vlm``: train a video-LLM (``pe_vlm_*``) on multiple-choice video QA in MVBench layout.

The same loop, checkpoints, resume, EMA, locks and DDP as ``zoo train`` (:func:`zoo.train.loop.train` with this
module's options and run): only the data (video-QA records read by the decord video reader) and the task
(:class:`zoo.tasks.videoqa.VideoQATask`: loss on the answer tokens only) differ. ``metrics.csv`` keeps the image
columns: ``val_top1`` is the multiple-choice accuracy (%), ``val_top5`` the greedy exact-match rate (%).

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
import logging
import math
import os
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, Subset


from zoo.runs.checkpoints import load_checkpoint
from zoo.runs.options import check_device
from zoo.tasks.videoqa import VideoQATask
from zoo.datasets import FrameSampling, VideoReadError, read_video
from zoo.datasets.video_folder import BadVideo
from zoo.datasets.videoqa import VideoQADataset, collate_videoqa, list_benchmarks, load_benchmark
from .args import parse_train_args
from .loop import _Data, _Run, _plain, seed_epoch, train

__all__ = ['train_vlm', 'build_vlm_parser', 'parse_vlm_args']

_logger = logging.getLogger('zoo.train')


def build_vlm_parser() -> argparse.ArgumentParser:
    """The ``zoo train-vlm`` parser (options that may come from a YAML config are not marked required)."""
    p = argparse.ArgumentParser(
        prog='zoo train-vlm', formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description='Train a video-LLM (pe_vlm_{tiny,small}_{scheme}) on multiple-choice video QA in MVBench layout '
                    '(DATA/json/<task>.json + videos; `zoo make-videoqa` writes one). Loss on the answer tokens '
                    'only. Writes OUTPUT/metrics.csv (val_top1 = multiple-choice accuracy, val_top5 = greedy exact '
                    'match), checkpoint-last.pth, checkpoint-best.pth. Multi-process: torchrun --nproc-per-node N '
                    '-m zoo.cli train-vlm ...',
        epilog='Same run rules as zoo train: --resume restores every recorded option (only --epochs, --no-progress, '
               '--pin-mem and --results-file may change). Example: zoo train-vlm --model pe_vlm_tiny_videorope '
               '--data-dir data/vqa --output runs/vlm --num-frames 8 --frame-size 64 --epochs 3')
    g = p.add_argument_group('run')
    g.add_argument('--config', metavar='YAML', help='YAML file of options (keys as the flags, with underscores)')
    g.add_argument('--output', metavar='DIR', help='output directory (locked while the run lasts)')
    g.add_argument('--resume', nargs='?', const='auto', metavar='CKPT',
                   help='continue a run: no value = OUTPUT/checkpoint-last.pth')
    g.add_argument('--overwrite', action='store_true', help='allow writing into an existing output dir')
    g.add_argument('--seed', type=int, default=0, help='random seed (each epoch reseeds from seed, epoch and rank)')
    g.add_argument('-j', '--workers', type=int, default=2, help='data loader processes per rank (video decoding)')
    g.add_argument('--device', default=None, help='torch device (default: cuda if available, else cpu)')
    g.add_argument('--threads', type=int, default=None, help='torch CPU threads per process')
    g.add_argument('--amp', action='store_true', help='mixed precision (float16 + GradScaler on CUDA, bfloat16 on CPU)')
    g.add_argument('--amp-dtype', default=None, help='AMP dtype, float16 or bfloat16')
    g.add_argument('--pin-mem', action='store_true', help='pin CPU memory in the data loaders')
    g.add_argument('--no-progress', action='store_true', help='no tqdm progress bars')
    g.add_argument('--results-file', metavar='PATH', help='also write the final results to this .csv or .json file')

    g = p.add_argument_group('data')
    g.add_argument('--data-dir', metavar='DIR', help='video-QA root (MVBench layout unless --benchmark says otherwise)')
    g.add_argument('--benchmark', default='mvbench', help='reader of --data-dir (zoo.datasets.videoqa)')
    g.add_argument('--tasks', nargs='*', default=None, help='tasks (JSON stems) to train on (default: all)')
    g.add_argument('--val-data-dir', metavar='DIR', default=None,
                   help='validation root (default: --val-fraction of --data-dir)')
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

    g = p.add_argument_group('model')
    g.add_argument('--model', help='video-LLM name (zoo.list_video_llms(), e.g. pe_vlm_tiny_mrope)')
    g.add_argument('--model-kwargs', nargs='*', default=None, metavar='KEY=VALUE',
                   help='create_video_llm overrides, values parsed as YAML; dotted keys nest, e.g. dim=128 depth=2 '
                        'tower_kwargs.embed_dim=96 scheme_options.delta=2')
    g.add_argument('--initial-checkpoint', metavar='CKPT', help='start from these video-LLM weights (strict)')
    g.add_argument('--tower-checkpoint', metavar='CKPT',
                   help='load these weights into the vision tower (a zoo / timm checkpoint; a classifier is dropped)')
    g.add_argument('--grad-checkpointing', action='store_true', help='gradient checkpointing in tower and decoder')
    g.add_argument('--model-ema', action='store_true', help='keep an EMA of the weights (timm ModelEmaV3)')
    g.add_argument('--model-ema-decay', type=float, default=0.999, help='EMA decay per step')

    g = p.add_argument_group('optimisation')
    g.add_argument('--epochs', type=int, default=3, help='training epochs')
    g.add_argument('-b', '--batch-size', type=int, default=4, help='batch size per process')
    g.add_argument('--grad-accum-steps', type=int, default=1, help='accumulate gradients over N batches')
    g.add_argument('--opt', default='adamw', help='timm optimizer name')
    g.add_argument('--lr', type=float, default=3e-4, help='peak learning rate')
    g.add_argument('--weight-decay', type=float, default=0.05, help='weight decay')
    g.add_argument('--sched', default='cosine', help='timm scheduler name')
    g.add_argument('--warmup-epochs', type=float, default=0, help='linear warmup (epochs)')
    g.add_argument('--warmup-lr', type=float, default=1e-6, help='learning rate at the start of warmup')
    g.add_argument('--min-lr', type=float, default=1e-6, help='final learning rate')
    g.add_argument('--clip-grad', type=float, default=1.0, help='clip the gradient norm to this value')
    return p


def _validate(args: argparse.Namespace) -> None:
    """Ranges and choices of the options; ``ValueError`` naming the flag and what it must be."""
    def bad(flag: str, value: Any, need: str) -> None:
        raise ValueError(f'{flag} {value!r}: must be {need}')

    for flag in ('epochs', 'batch_size', 'num_frames', 'grad_accum_steps'):
        if getattr(args, flag) < 1:
            bad('--' + flag.replace('_', '-'), getattr(args, flag), 'at least 1')
    for flag in ('frame_size', 'threads', 'max_train', 'max_val'):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            bad('--' + flag.replace('_', '-'), getattr(args, flag), 'at least 1')
    if args.workers < 0:
        bad('--workers', args.workers, '0 or more')
    if args.val_data_dir is None and not 0 < args.val_fraction < 1:
        bad('--val-fraction', args.val_fraction, 'in (0, 1) (or give --val-data-dir)')
    if not args.fps > 0 or not math.isfinite(args.fps):
        bad('--fps', args.fps, 'positive')
    if not args.lr > 0:
        bad('--lr', args.lr, 'positive')
    for flag in ('weight_decay', 'warmup_epochs', 'warmup_lr', 'min_lr'):
        if getattr(args, flag) < 0:
            bad('--' + flag.replace('_', '-'), getattr(args, flag), '0 or more')
    if args.clip_grad is not None and not args.clip_grad > 0:
        bad('--clip-grad', args.clip_grad, 'positive')
    if not 0 <= args.model_ema_decay <= 1:
        bad('--model-ema-decay', args.model_ema_decay, 'in [0, 1]')
    if args.amp_dtype is not None and args.amp_dtype not in ('float16', 'bfloat16'):
        bad('--amp-dtype', args.amp_dtype, 'float16 or bfloat16')
    if args.results_file and not args.results_file.lower().endswith(('.csv', '.json')):
        bad('--results-file', args.results_file, 'a .csv or .json path')
    if args.benchmark not in list_benchmarks():
        bad('--benchmark', args.benchmark, f'one of {", ".join(list_benchmarks())}')
    check_device(args.device)


def parse_vlm_args(argv: Optional[List[str]] = None, **kwargs: Any) -> argparse.Namespace:
    """``parse_train_args`` (config layering, resume record) with the ``zoo train-vlm`` parser and checks."""
    return parse_train_args(argv, parser=build_vlm_parser(), validate=_validate, **kwargs)


class SeededVideoQADataset(VideoQADataset):
    """:class:`VideoQADataset` whose random frame offsets come from ``(torch.initial_seed(), index)``: the run
    reseeds torch every epoch (and the loader seeds each worker from it), so a resumed epoch reads the same frames."""

    def __getitem__(self, index: int) -> Any:
        if not self.sampling.random:
            return super().__getitem__(index)
        r = self.records[index]
        gen = np.random.default_rng([torch.initial_seed() % (1 << 63), index])
        try:
            clip = read_video(r.video, self.sampling, start=r.start, end=r.end, size=self.size, generator=gen,
                              on_truncated=self.on_truncated)
        except VideoReadError as e:
            self.bad_counts[e.reason] += 1
            return BadVideo(r.video, f'{e.reason}: {e.detail}', reason=e.reason)
        return {'record': r, 'frames': clip.frames, 'frame_indices': clip.indices, 'timestamps': clip.timestamps,
                'fps': clip.fps}


def _split(records: list, fraction: float):
    """Evenly spaced validation records (by sorted id), at least one; the rest for training."""
    records = sorted(records, key=lambda r: r.id)
    n_val = max(1, int(round(len(records) * fraction)))
    val_idx = set(np.linspace(0, len(records) - 1, n_val).round().astype(int).tolist())
    return [r for i, r in enumerate(records) if i not in val_idx], [r for i, r in enumerate(records) if i in val_idx]


def _load_state(model: nn.Module, path: str, what: str, drop_missing_head: bool = False) -> None:
    from zoo.models import CheckpointMismatchError, unwrap_state_dict
    state = dict(unwrap_state_dict(load_checkpoint(path)))
    if drop_missing_head:
        from zoo.runs.models import is_zoo_model
        from zoo.models import checkpoint_filter_fn
        own = model.state_dict()
        state = {k: v for k, v in state.items() if k in own or not k.startswith(('head.', 'fc_norm.'))}
        if is_zoo_model(model):
            state = checkpoint_filter_fn(state, model)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise CheckpointMismatchError(f'{what} {path!r} does not load into {type(model).__name__}: '
                                      f'{" ".join(str(e).split())[:600]}') from None


class _VLMRun(_Run):
    """A ``zoo train`` run whose model, data and task are the video-LLM's; fitting, validation, checkpoints and
    resume are inherited unchanged."""

    def __init__(self, args, ckpt: Optional[Dict[str, Any]], device: torch.device, world: int, rank: int):
        from zoo.models.vlm import create_video_llm
        self.args, self.ckpt, self.device, self.world, self.rank = args, ckpt, device, world, rank
        self.is_main = rank == 0
        self.progress = self.is_main and not args.no_progress
        self.video = False  # not a video-folder classifier: frames are seeded per epoch by SeededVideoQADataset
        seed_epoch(args.seed, -1, rank)  # model init
        self.model = create_video_llm(args.model, **args.model_kwargs)
        if args.tower_checkpoint and ckpt is None:
            _load_state(self.model.tower.model, args.tower_checkpoint, '--tower-checkpoint', drop_missing_head=True)
        if args.initial_checkpoint and ckpt is None:
            _load_state(self.model, args.initial_checkpoint, '--initial-checkpoint')
        if args.grad_checkpointing:
            self.model.set_grad_checkpointing(True)
        self.img_size = int(args.frame_size or self.model.data_config['img_size'][0])
        self.model.visual_grid(args.num_frames, self.img_size, self.img_size)  # a frame size the tower can merge
        self.data = self._vlm_loaders()
        self.model.to(device)
        self.task = VideoQATask(self.model)
        self._setup_optimization(args, ckpt, device)
        self.meta = dict(model_name=args.model, pe=self.model.pe_name, model_kwargs=_plain(args.model_kwargs),
                         img_size=self.img_size, num_frames=args.num_frames, sampling=self.sampling.key(),
                         benchmark=args.benchmark, tasks=self.data.classes, data_config=self.data.data_cfg,
                         args=_plain(vars(args)), world_size=world)

    def _records(self):
        args = self.args
        records, _ = load_benchmark(args.benchmark, args.data_dir, **({'tasks': args.tasks} if args.tasks else {}))
        if args.val_data_dir:
            tasks = args.val_tasks if args.val_tasks is not None else args.tasks
            val, _ = load_benchmark(args.benchmark, args.val_data_dir, **({'tasks': tasks} if tasks else {}))
            train_rec = sorted(records, key=lambda r: r.id)
        else:
            if len(records) < 2:
                raise ValueError(f'{args.data_dir!r} holds {len(records)} usable record(s); need at least 2 to hold '
                                 'some out for validation (or give --val-data-dir)')
            train_rec, val = _split(records, args.val_fraction)
        train_rec = train_rec[:args.max_train] if args.max_train else train_rec
        val = val[:args.max_val] if args.max_val else val
        if not train_rec or not val:
            raise ValueError(f'no {"training" if not train_rec else "validation"} records in {args.data_dir!r} '
                             f'(tasks {args.tasks or "all"}); check --data-dir, --tasks, --val-data-dir')
        return train_rec, val

    def _vlm_loaders(self) -> _Data:
        args, world, rank = self.args, self.world, self.rank
        train_rec, val_rec = self._records()
        if args.sampling == 'uniform':
            self.sampling = FrameSampling('uniform', args.num_frames)
        else:
            self.sampling = FrameSampling('fps', args.num_frames, fps=args.fps)
        train_sampling = self.sampling if args.fixed_frames else FrameSampling(
            self.sampling.mode, self.sampling.num_frames, fps=self.sampling.fps, random=True)
        train_ds = SeededVideoQADataset(train_rec, train_sampling, size=self.img_size)
        val_ds = VideoQADataset(val_rec, self.sampling, size=self.img_size, cache_dir=args.frame_cache)
        pin = args.pin_mem and self.device.type == 'cuda'
        common = dict(num_workers=args.workers, collate_fn=collate_videoqa, pin_memory=pin, persistent_workers=False)
        if world > 1:
            sampler = DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True, seed=args.seed,
                                         drop_last=True)
            generator = None
        else:
            generator = torch.Generator()
            sampler = RandomSampler(train_ds, generator=generator)
        drop_last = len(train_ds) // world > args.batch_size
        train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, generator=generator,
                                  drop_last=drop_last, **common)
        val_part = Subset(val_ds, range(rank, len(val_ds), world)) if world > 1 else val_ds
        val_loader = DataLoader(val_part, batch_size=args.batch_size, **common)
        if len(train_loader) == 0:
            raise ValueError(f'{len(train_ds)} training records are fewer than one batch per process '
                             f'({args.batch_size} x {world}); lower --batch-size')
        tasks = sorted({r.task for r in train_rec})
        data_cfg = dict(self.model.data_config, frame_size=self.img_size)
        return _Data(train_loader, val_loader, sampler, generator, tasks, len(train_ds), len(val_ds), _plain(data_cfg))

    def _start_files(self) -> None:
        args, out = self.args, self.args.output
        if args.overwrite and self.ckpt is None:
            for name in ('checkpoint-last.pth', 'checkpoint-best.pth', 'metrics.csv', 'summary.csv', 'args.yaml',
                         'model.safetensors', 'model_ema.safetensors'):
                if os.path.exists(os.path.join(out, name)):
                    os.remove(os.path.join(out, name))
        if self.ckpt is not None:
            self._write_metrics()
        n_params = sum(p.numel() for p in self.model.parameters())
        _logger.info('%s (%.2fM params, %s) | %d frames at %d px (%s) | %d train / %d val questions (%s) | %d '
                     'process(es) on %s | output %s', args.model, n_params / 1e6, self.model.pe_name,
                     args.num_frames, self.img_size, args.sampling, self.data.n_train, self.data.n_val,
                     ', '.join(self.data.classes), self.world, self.device, out)

    def _log_epoch(self, row: Dict[str, Any], stats: Dict[str, Any], val) -> None:
        bad = f' | unreadable train {row["train_unreadable"]} val {row["val_unreadable"]}' \
            if row['train_unreadable'] or row['val_unreadable'] else ''
        ema_txt = f' | ema acc {row["ema_top1"]:.2f}' if row['ema_top1'] != '' else ''
        _logger.info('epoch %d/%d | train loss %.4f | val loss %.4f mc acc %.2f exact %.2f%s | lr %.2e | %.1fs%s',
                     row['epoch'], self.args.epochs, row['train_loss'], row['val_loss'], row['val_top1'],
                     row['val_top5'], ema_txt, row['lr'], row['epoch_s'], bad)
        for sample in stats.get('bad', [])[:5]:
            _logger.warning('unreadable training video %s (%s)', sample.path, sample.error)
        for sample in val.bad[:5]:
            _logger.warning('unreadable video %s (%s)', sample.path, sample.error)


def train_vlm(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Run ``zoo train-vlm`` with command-line style arguments (see the module docstring and ``--help``).

    Returns:
        As :func:`zoo.train.loop.train`: ``output``, ``epochs``, ``best_top1`` (multiple-choice accuracy, %),
        ``best_epoch`` and ``history``.

    Raises:
        ValueError / FileNotFoundError / zoo.errors.ZooError: user errors (bad options, missing data, unknown
            model, output dir in use or holding another run, a ``--resume`` flag contradicting the record).
    """
    return train(argv, parse=parse_vlm_args, run_cls=_VLMRun, prog='zoo train-vlm')

