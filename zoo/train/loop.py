"""``zoo train``: the training loop on timm's factories.

One epoch = one pass over the training split; after it, rank 0 validates, writes ``checkpoint-last.pth`` atomically,
updates ``metrics.csv`` and copies the checkpoint to ``checkpoint-best.pth`` when top-1 improves. A run killed
mid-epoch therefore loses at most that epoch, and ``--resume`` repeats it exactly: every epoch reseeds Python, NumPy
and torch from ``(seed, epoch, rank)`` and the sampler from ``(seed, epoch)``, so the data order, augmentations,
mixup draws and dropout of a resumed run are those of an uninterrupted one.

Multi-process: launch with ``torchrun --nproc-per-node N -m zoo.train ...`` (DDP; ``gloo`` on CPU, ``nccl`` on CUDA).
``--batch-size`` is per process; only rank 0 writes files.
"""
from __future__ import annotations

import contextlib
import csv
import logging
import math
import os
import random
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch
import torch.distributed as dist
import yaml
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, Subset
from tqdm import tqdm

from timm.data import Mixup, create_transform, resolve_data_config
from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2
from timm.utils import ModelEmaV3

from zoo.datasets import SafeImageFolder, collate_skip_bad, find_split
from zoo.eval.accuracy import evaluate
from .args import parse_train_args
from .build import create_zoo_model, load_weights
from .checkpoint import checkpoint_meta, copy_atomic, load_checkpoint, save_atomic

__all__ = ['train', 'train_one_epoch', 'seed_epoch']

_logger = logging.getLogger('zoo.train')

METRIC_FIELDS = ['epoch', 'lr', 'train_loss', 'val_loss', 'val_top1', 'val_top5', 'ema_top1', 'train_unreadable',
                 'val_unreadable', 'epoch_s']


def seed_epoch(seed: int, epoch: int, rank: int = 0) -> None:
    """Seed Python, NumPy and torch from ``(seed, epoch, rank)``; called at the start of every epoch."""
    s = (seed * 1_000_003 + epoch * 10_007 + rank * 101) % 2 ** 32
    random.seed(s)
    np.random.seed(s)
    torch.manual_seed(s)


# Files a run writes before its first checkpoint (older versions wrote args.yaml at start): a dir holding only these
# is a run that crashed before saving anything, which the same command may start again.
_PRE_CHECKPOINT_FILES = ('args.yaml', 'args.yaml.tmp', 'metrics.csv.tmp')


def _has_checkpoint(out: str) -> bool:
    return any(os.path.isfile(os.path.join(out, n)) for n in ('checkpoint-last.pth', 'checkpoint-best.pth'))


def _only_pre_checkpoint_files(out: str) -> bool:
    return all(n in _PRE_CHECKPOINT_FILES or n.startswith('.tmp-') for n in os.listdir(out))


def _prepare_output(args, resuming: bool) -> None:
    """Refuse an existing, non-empty output dir unless resuming or ``--overwrite`` (checked on every rank).

    A dir holding only what a run writes before its first checkpoint (``args.yaml``) counts as empty.
    """
    out = args.output
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f'--output {out!r} is a file, not a directory')
    if resuming or not os.path.isdir(out) or not os.listdir(out):
        return
    if not _has_checkpoint(out) and _only_pre_checkpoint_files(out):
        return
    if not args.overwrite:
        raise ValueError(f'output dir {out!r} already exists; pass --resume to continue that run, --overwrite to '
                         'replace its files, or choose another --output')


def _dist_info() -> tuple:
    world = int(os.environ.get('WORLD_SIZE', '1'))
    rank = int(os.environ.get('RANK', '0'))
    local_rank = int(os.environ.get('LOCAL_RANK', '0'))
    return world, rank, local_rank


def _write_metrics(path: str, history: List[Dict[str, Any]]) -> None:
    tmp = path + '.tmp'
    with open(tmp, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=METRIC_FIELDS, extrasaction='ignore')
        writer.writeheader()
        writer.writerows(history)
    os.replace(tmp, path)


def _plain(value: Any) -> Any:
    """Options as YAML/torch-safe primitives (tuples become lists)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _autocast(device: torch.device, enabled: bool):
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.float16 if device.type == 'cuda' else torch.bfloat16)


def train_one_epoch(model: nn.Module, loader: DataLoader, optimizer: torch.optim.Optimizer, scheduler, loss_fn,
                    device: torch.device, epoch: int, num_updates: int, mixup: Optional[Mixup] = None,
                    scaler=None, ema: Optional[ModelEmaV3] = None, amp: bool = False,
                    clip_grad: Optional[float] = None, progress: bool = True) -> Dict[str, Any]:
    """One pass over ``loader``. Returns ``loss`` (mean per image), ``num_updates`` (total so far), ``unreadable``
    (count) and ``bad`` (the unreadable :class:`zoo.datasets.BadSample` s)."""
    model.train()
    loss_sum, seen, unreadable, bad_samples = 0., 0, 0, []
    bar = tqdm(loader, desc=f'epoch {epoch + 1}', leave=False, dynamic_ncols=True, disable=not progress)
    for images, targets, bad in bar:
        unreadable += len(bad)
        bad_samples.extend(bad)
        if mixup is not None and targets.numel() % 2:
            images, targets = images[:-1], targets[:-1]  # mixup pairs samples: keep the batch even
        if targets.numel() == 0:
            continue
        images, targets = images.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        if mixup is not None:
            images, targets = mixup(images, targets)
        with _autocast(device, amp):
            loss = loss_fn(model(images), targets)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f'loss is {loss.item()} at epoch {epoch + 1}; lower --lr or disable --amp')
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            if clip_grad:
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            if clip_grad:
                nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
            optimizer.step()
        num_updates += 1
        scheduler.step_update(num_updates=num_updates)
        if ema is not None:
            ema.update(getattr(model, 'module', model), step=num_updates)  # unwrap DDP
        loss_sum += loss.item() * targets.shape[0]
        seen += targets.shape[0]
        bar.set_postfix(loss=f'{loss_sum / seen:.3f}', lr=f'{optimizer.param_groups[0]["lr"]:.2e}')
    return dict(loss=loss_sum / max(seen, 1), num_updates=num_updates, unreadable=unreadable, bad=bad_samples)


def _parse(argv: Optional[List[str]]):
    """Options, plus the checkpoint to resume from (or ``None``)."""
    first = parse_train_args(argv, check_required=False)
    if not first.resume:
        return parse_train_args(argv), None
    if first.resume == 'auto':
        if not first.output:
            raise ValueError('--resume without a path needs --output (the run dir holding checkpoint-last.pth)')
        path = os.path.join(first.output, 'checkpoint-last.pth')
        if not os.path.isfile(path):
            if os.path.isdir(first.output) and not _has_checkpoint(first.output):
                # a run that stopped before its first checkpoint: start it from scratch
                args = parse_train_args(argv)
                _logger.info('%s holds no checkpoint yet: starting the run from scratch', first.output)
                return args, None
            raise FileNotFoundError(f'nothing to resume: {path!r} does not exist')
    else:
        path = first.resume
    ckpt = load_checkpoint(path)
    recorded = checkpoint_meta(ckpt).get('args')
    if not isinstance(recorded, dict) or not recorded or 'optimizer' not in ckpt:
        raise ValueError(f'{path!r} is not a zoo training checkpoint (no recorded options or optimizer state); use '
                         '--initial-checkpoint to start a new run from its weights')
    args = parse_train_args(argv, recorded=recorded, default_output=os.path.dirname(os.path.abspath(path)))
    _check_same_model(args, recorded, checkpoint_meta(ckpt), path)
    _check_not_older(args, ckpt, path)
    return args, ckpt


def _check_same_model(args, recorded: Dict[str, Any], meta: Dict[str, Any], path: str) -> None:
    """``--resume`` continues the recorded model: a changed ``--model`` / ``--model-kwargs`` / ``--img-size`` is
    refused (fine-tuning into another model is ``--initial-checkpoint``)."""
    from .args import parse_model_kwargs
    changes = []
    if args.model != recorded.get('model'):
        changes.append(f'--model {args.model} (recorded {recorded.get("model")})')
    old_kwargs = parse_model_kwargs(recorded.get('model_kwargs'))
    if _plain(args.model_kwargs) != _plain(old_kwargs):
        changes.append(f'--model-kwargs {args.model_kwargs} (recorded {old_kwargs})')
    old_size = meta.get('img_size') if meta.get('img_size') is not None else recorded.get('img_size')
    if args.img_size is not None and old_size is not None and int(args.img_size) != int(old_size):
        changes.append(f'--img-size {args.img_size} (recorded {old_size})')
    if changes:
        raise ValueError(f'--resume {path!r} continues the recorded model, but {"; ".join(changes)}; to fine-tune '
                         'its weights into another model or size, start a new run with --initial-checkpoint '
                         f'{path} and a new --output')


def _check_not_older(args, ckpt: Dict[str, Any], path: str) -> None:
    """Refuse to resume from a checkpoint older than ``OUTPUT/checkpoint-last.pth`` (it would drop the later epochs
    from metrics.csv and overwrite checkpoint-last) unless ``--overwrite``."""
    last = os.path.join(args.output, 'checkpoint-last.pth')
    if args.overwrite or not os.path.isfile(last) or os.path.realpath(last) == os.path.realpath(path):
        return
    try:
        last_epoch = int(load_checkpoint(last).get('epoch', 0))
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f'{last!r} is not a readable zoo checkpoint; resuming from {path!r} into {args.output!r} '
                         'would overwrite it: pass --overwrite to do so, or choose another --output') from None
    epoch = int(ckpt.get('epoch', 0))
    if epoch < last_epoch:
        raise ValueError(f'{path!r} is after epoch {epoch} but {last!r} is after epoch {last_epoch}: resuming from '
                         f'it would drop epochs {epoch + 1}-{last_epoch} from metrics.csv and overwrite '
                         'checkpoint-last.pth; pass --overwrite to do that, resume from checkpoint-last.pth, or '
                         'choose another --output')


def train(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Run ``zoo train`` with command-line style arguments.

    Returns:
        ``output`` (dir), ``epochs`` (completed), ``best_top1``, ``best_epoch`` and ``history`` (per-epoch metrics).

    Raises:
        ValueError / FileNotFoundError: user errors (bad options, missing data, unknown model, existing output dir,
            incompatible checkpoint); the CLI prints them as one line.
    """
    args, ckpt = _parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    world, rank, local_rank = _dist_info()
    _prepare_output(args, resuming=ckpt is not None)
    if args.max_train_per_class is not None and args.max_train_per_class < 1:
        raise ValueError(f'--max-train-per-class {args.max_train_per_class}: must be at least 1')
    train_dir = find_split(args.data_dir, [args.train_split], 'training')
    val_dir = find_split(args.data_dir, [args.val_split] if args.val_split else ['val', 'test'], 'validation')

    if args.device:
        device = torch.device(args.device)
    else:
        device = torch.device(f'cuda:{local_rank}' if torch.cuda.is_available() else 'cpu')
    distributed = world > 1
    if distributed:
        if device.type == 'cuda':
            torch.cuda.set_device(device)
        dist.init_process_group(backend='nccl' if device.type == 'cuda' else 'gloo')
    try:
        return _train(args, ckpt, train_dir, val_dir, device, world, rank)
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


def _train(args, ckpt, train_dir: str, val_dir: str, device: torch.device, world: int, rank: int) -> Dict[str, Any]:
    distributed, is_main = world > 1, rank == 0
    seed_epoch(args.seed, -1, rank)  # model init
    train_ds = SafeImageFolder(train_dir, max_per_class=args.max_train_per_class, data_root=args.data_dir)
    val_ds = SafeImageFolder(val_dir, data_root=args.data_dir)
    if train_ds.classes != val_ds.classes:
        raise ValueError(f'class folders differ between {train_dir!r} ({len(train_ds.classes)}) and {val_dir!r} '
                         f'({len(val_ds.classes)}): {sorted(set(train_ds.classes) ^ set(val_ds.classes))[:10]}')

    model = create_zoo_model(args.model, args.model_kwargs, img_size=args.img_size, num_classes=len(train_ds.classes),
                             pretrained=args.pretrained, drop_path_rate=args.drop_path)
    img_size = int(model.patch_embed.img_size[0]) if args.img_size is None else args.img_size
    data_cfg = resolve_data_config(dict(input_size=(3, img_size, img_size), crop_pct=args.crop_pct,
                                        interpolation=args.interpolation, mean=args.mean, std=args.std), model=model)
    data_cfg = _plain(data_cfg)
    train_ds.transform = create_transform(
        data_cfg['input_size'], is_training=True, scale=args.scale, ratio=args.ratio, hflip=args.hflip,
        color_jitter=args.color_jitter or None, auto_augment=args.aa, interpolation=data_cfg['interpolation'],
        mean=data_cfg['mean'], std=data_cfg['std'], re_prob=args.reprob)
    val_ds.transform = create_transform(data_cfg['input_size'], is_training=False,
                                        interpolation=data_cfg['interpolation'], mean=data_cfg['mean'],
                                        std=data_cfg['std'], crop_pct=data_cfg['crop_pct'])

    if args.initial_checkpoint and ckpt is None:
        load_weights(model, args.initial_checkpoint)
        _logger.info('initial weights: %s', args.initial_checkpoint)
    model.to(device)

    optimizer = create_optimizer_v2(model, opt=args.opt, lr=args.lr, weight_decay=args.weight_decay)
    per_rank = len(train_ds) // world
    drop_last = per_rank > args.batch_size
    if distributed:
        sampler = DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True, seed=args.seed,
                                     drop_last=True)
        generator = None
    else:
        generator = torch.Generator()
        sampler = RandomSampler(train_ds, generator=generator)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                              collate_fn=collate_skip_bad, drop_last=drop_last, pin_memory=device.type == 'cuda')
    val_part = Subset(val_ds, range(rank, len(val_ds), world)) if distributed else val_ds
    val_loader = DataLoader(val_part, batch_size=args.batch_size, shuffle=False, num_workers=args.workers,
                            collate_fn=collate_skip_bad, pin_memory=device.type == 'cuda')
    if len(train_loader) == 0:
        raise ValueError(f'{train_dir!r} has {len(train_ds)} images, fewer than one batch per process '
                         f'({args.batch_size} x {world}); lower --batch-size')
    scheduler, _ = create_scheduler_v2(optimizer, sched=args.sched, num_epochs=args.epochs,
                                       warmup_epochs=args.warmup_epochs, warmup_lr=args.warmup_lr,
                                       min_lr=args.min_lr, step_on_epochs=False, updates_per_epoch=len(train_loader))

    mixup = None
    if args.mixup > 0 or args.cutmix > 0:
        mixup = Mixup(mixup_alpha=args.mixup, cutmix_alpha=args.cutmix, prob=args.mixup_prob,
                      label_smoothing=args.smoothing, num_classes=len(train_ds.classes))
        loss_fn = SoftTargetCrossEntropy()
    elif args.smoothing > 0:
        loss_fn = LabelSmoothingCrossEntropy(smoothing=args.smoothing)
    else:
        loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler('cuda') if args.amp and device.type == 'cuda' else None
    ema = ModelEmaV3(model, decay=args.model_ema_decay) if args.model_ema else None

    start_epoch, history, best_top1, best_epoch = 0, [], -1., -1
    if ckpt is not None:
        try:
            model.load_state_dict(ckpt['model'], strict=True)
        except RuntimeError as e:
            from zoo.models import CheckpointMismatchError
            raise CheckpointMismatchError(f'--resume checkpoint does not load into {args.model}: '
                                          f'{str(e).strip().splitlines()[0]}') from None
        optimizer.load_state_dict(ckpt['optimizer'])
        if int(checkpoint_meta(ckpt)['args']['epochs']) == args.epochs:
            scheduler.load_state_dict(ckpt['scheduler'])
        else:  # a longer / shorter schedule: timm schedulers are functions of the update count, so start anew
            _logger.info('--epochs changed from %s to %d: the LR schedule is rebuilt for the new length',
                         checkpoint_meta(ckpt)['args']['epochs'], args.epochs)
        if scaler is not None and ckpt.get('scaler'):
            scaler.load_state_dict(ckpt['scaler'])
        if ema is not None and ckpt.get('model_ema'):
            ema.module.load_state_dict(ckpt['model_ema'])
        start_epoch, history = int(ckpt['epoch']), list(ckpt.get('history', []))
        best_top1, best_epoch = float(ckpt.get('best_top1', -1.)), int(ckpt.get('best_epoch', -1))
        _logger.info('resumed %s after epoch %d', args.output, start_epoch)
    train_model = nn.parallel.DistributedDataParallel(model) if distributed else model

    meta = dict(model_name=args.model, model_kwargs=_plain(args.model_kwargs), img_size=img_size,
                num_classes=len(train_ds.classes), class_names=list(train_ds.classes), data_config=data_cfg,
                args=_plain(vars(args)), world_size=world)
    if is_main:
        os.makedirs(args.output, exist_ok=True)
        if args.overwrite and ckpt is None:
            for name in ('checkpoint-last.pth', 'checkpoint-best.pth', 'metrics.csv', 'args.yaml'):
                if os.path.exists(os.path.join(args.output, name)):
                    os.remove(os.path.join(args.output, name))
        n_params = sum(p.numel() for p in model.parameters())
        _logger.info('%s (%.2fM params, pe %s) at %d px | %d train / %d val images, %d classes | %d process(es) on '
                     '%s | output %s', args.model, n_params / 1e6, getattr(model, 'pe_name', '?'), img_size,
                     len(train_ds), len(val_ds), len(train_ds.classes), world, device, args.output)
    if distributed:
        dist.barrier()

    num_updates = start_epoch * len(train_loader)
    if start_epoch:
        scheduler.step_update(num_updates=num_updates)
        if start_epoch >= args.epochs and is_main:
            _logger.info('%s already completed %d of %d epochs; nothing to do (raise --epochs to continue)',
                         args.output, start_epoch, args.epochs)
    for epoch in range(start_epoch, args.epochs):
        t0 = time.time()
        seed_epoch(args.seed, epoch, rank)
        if distributed:
            sampler.set_epoch(epoch)
        else:
            generator.manual_seed(args.seed * 1_000_003 + epoch)
        stats = train_one_epoch(train_model, train_loader, optimizer, scheduler, loss_fn, device, epoch, num_updates,
                                mixup=mixup, scaler=scaler, ema=ema, amp=args.amp, clip_grad=args.clip_grad,
                                progress=is_main and not args.no_progress)
        num_updates = stats['num_updates']
        scheduler.step(epoch + 1)
        val = evaluate(model, val_loader, device, amp=args.amp)
        ema_val = evaluate(ema.module, val_loader, device, amp=args.amp) if ema is not None else None
        train_loss = torch.tensor([stats['loss'], stats['unreadable']], dtype=torch.float64, device=device)
        if distributed:
            val.all_reduce(device)
            if ema_val is not None:
                ema_val.all_reduce(device)
            dist.all_reduce(train_loss)
            train_loss[0] /= world
        row = dict(epoch=epoch + 1, lr=optimizer.param_groups[0]['lr'], train_loss=round(float(train_loss[0]), 5),
                   val_loss=round(val.loss, 5), val_top1=round(val.top1, 4), val_top5=round(val.top5, 4),
                   ema_top1=round(ema_val.top1, 4) if ema_val is not None else '',
                   train_unreadable=int(train_loss[1]), val_unreadable=len(val.bad),
                   epoch_s=round(time.time() - t0, 2))
        history.append(row)
        if val.top1 > best_top1:
            best_top1, best_epoch = val.top1, epoch + 1
        if is_main:
            _save_epoch(args.output, model, optimizer, scheduler, scaler, ema, epoch + 1, history, best_top1,
                        best_epoch, meta, write_args=epoch == start_epoch)
            bad = f' | unreadable train {row["train_unreadable"]} val {row["val_unreadable"]}' \
                if row['train_unreadable'] or row['val_unreadable'] else ''
            ema_txt = f' | ema top1 {row["ema_top1"]:.2f}' if ema_val is not None else ''
            _logger.info('epoch %d/%d | train loss %.4f | val loss %.4f top1 %.2f top5 %.2f%s | lr %.2e | %.1fs%s',
                         epoch + 1, args.epochs, row['train_loss'], row['val_loss'], row['val_top1'], row['val_top5'],
                         ema_txt, row['lr'], row['epoch_s'], bad)
            for sample in stats.get('bad', [])[:5]:
                _logger.warning('unreadable training image %s (%s)', sample.path, sample.error)
            for sample in val.bad[:5]:
                _logger.warning('unreadable image %s (%s)', sample.path, sample.error)
        if distributed:
            dist.barrier()
    return dict(output=args.output, epochs=len(history), best_top1=best_top1, best_epoch=best_epoch, history=history)


def _save_epoch(output: str, model, optimizer, scheduler, scaler, ema, epoch: int, history, best_top1: float,
                best_epoch: int, meta: Dict[str, Any], write_args: bool = False) -> None:
    """Write checkpoint-last (and -best), metrics.csv and, with ``write_args`` (the session's first save),
    args.yaml: a run dir gets args.yaml together with its first checkpoint, never before."""
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), scheduler=scheduler.state_dict(),
                 epoch=epoch, history=history, best_top1=best_top1, best_epoch=best_epoch, meta=meta)
    if scaler is not None:
        state['scaler'] = scaler.state_dict()
    if ema is not None:
        state['model_ema'] = ema.module.state_dict()
    last = os.path.join(output, 'checkpoint-last.pth')
    save_atomic(state, last)
    if best_epoch == epoch:
        copy_atomic(last, os.path.join(output, 'checkpoint-best.pth'))
    _write_metrics(os.path.join(output, 'metrics.csv'), history)
    if write_args:
        tmp = os.path.join(output, 'args.yaml.tmp')
        with open(tmp, 'w') as f:
            yaml.safe_dump(meta['args'], f, sort_keys=True)
        os.replace(tmp, os.path.join(output, 'args.yaml'))
