"""The one training loop (``zoo train``, ``zoo train-vlm``) on timm's factories and utilities.

What is trained on what is a training task (:class:`zoo.tasks.training.TrainingTask`): it builds the model, opens
the data and gives the :class:`zoo.tasks.base.Task` that batches, scores and counts. Image classification, video
classification (:func:`zoo.tasks.classification.classification_training` picks one by the model) and video QA
(:class:`zoo.tasks.videoqa.VideoQATraining`, ``zoo train-vlm``) differ in nothing else: samplers, loaders, DDP,
AMP, EMA, checkpoints, resume, locks and the files below are this module's, once. The loop never looks inside a
batch.

One epoch = one pass over the training split; after it, rank 0 validates and writes ``checkpoint-best.pth`` (when
top-1 improved) and ``checkpoint-last.pth``, each replaced atomically, then ``metrics.csv``. A run killed mid-epoch
loses at most that epoch, and ``--resume`` repeats it exactly: every recorded option is restored (see
:mod:`zoo.train.args`), every epoch reseeds Python, NumPy and torch from ``(seed, epoch, rank)`` and the sampler from
``(seed, epoch)``, so the data order, augmentations, mixup draws and dropout of a resumed run are those of an
uninterrupted one and ``metrics.csv`` comes out byte for byte the same. Wall times go to ``summary.csv`` (timm's
``update_summary`` format, appended per session) instead.

Training metrics per epoch, from the training forward passes (train mode: augmentation and dropout on), where the
task gives them (:meth:`zoo.tasks.base.Task.train_predictions`): ``train_top1`` and ``train_top_share`` (the share,
in percent, of the most frequently predicted class or letter) in ``metrics.csv``, and per class (or letter) the
training top-1 and prediction share in ``train_classes.csv`` (``epoch``, ``outcome``, ``samples``, ``top1``,
``predicted_share``). ``--sched hold_cosine`` (:class:`zoo.train.schedule.HoldCosineScheduler`) reads
``train_top1`` to end its hold; its release point is in the checkpoint.

The output directory is locked for the run (:class:`zoo.runs.rundir.RunDirLock`); temp files of an interrupted
write are removed when the next run takes it. A finished run exports ``model.safetensors`` (and
``model_ema.safetensors``) next to its checkpoints.

Multi-process: launch with ``torchrun --nproc-per-node N -m zoo.train ...`` (DDP; ``gloo`` on CPU, ``nccl`` on CUDA,
set up by timm's ``init_distributed_device_so``). ``--batch-size`` is per process; only rank 0 writes files.
"""
from __future__ import annotations

import contextlib
import csv
import io
import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed as dist
import yaml
from torch import nn
from torch.utils.data import DistributedSampler, RandomSampler, Subset
from tqdm import tqdm

from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2
from timm.utils import ModelEmaV3, NativeScaler, dispatch_clip_grad, random_seed, update_summary
from timm.utils.distributed import init_distributed_device_so

from zoo.datasets.files import TMP_PREFIX, clean_temp_files, write_text_atomic
from zoo.datasets.splits import make_loader
from zoo.encodings import pe_aux_loss
from zoo.errors import OutputDirError
from zoo.runs.checkpoints import (checkpoint_meta, load_checkpoint, save_checkpoint_files, save_safetensors,
                                  write_results_file)
from zoo.runs.models import check_model_identity
from zoo.runs.options import amp_dtype, autocast, resolve_device
from zoo.runs.rundir import LOCK_NAME, RunDirLock, sweep_command
from zoo.tasks.base import Task
from zoo.tasks.classification import classification_training
from zoo.tasks.evaluate import evaluate
from zoo.tasks.training import TrainingData, TrainingTask
from .args import _plain, parse_train_args
from .schedule import HoldCosineScheduler

__all__ = ['train', 'train_one_epoch', 'seed_epoch', 'train_metrics', 'METRIC_FIELDS', 'CLASS_FIELDS',
           'TrainingRun']

_logger = logging.getLogger('zoo.train')

# metrics.csv: results only (no wall times), so a resumed run's file equals an uninterrupted run's byte for byte.
METRIC_FIELDS = ['epoch', 'lr', 'train_loss', 'train_top1', 'train_top_share', 'val_loss', 'val_top1', 'val_top5',
                 'ema_top1', 'train_unreadable', 'val_unreadable']
# train_classes.csv: per epoch and class (or answer letter), from the training forward passes.
CLASS_FIELDS = ['epoch', 'outcome', 'samples', 'top1', 'predicted_share']


def train_metrics(confusion: torch.Tensor) -> Dict[str, Any]:
    """Training metrics of one epoch from its confusion matrix.

    Args:
        confusion: ``(K, K)`` counts, rows the true outcome, columns the predicted one.

    Returns:
        ``top1`` (percent of samples predicted right), ``top_share`` (percent of samples given the most frequently
        predicted outcome), and per outcome ``samples``, ``top1`` (percent of that outcome's samples predicted right;
        NaN without samples) and ``predicted_share`` (percent of all samples predicted as it); NaN when empty.
    """
    c = confusion.to(torch.float64)
    n = float(c.sum())
    rows, cols = c.sum(dim=1), c.sum(dim=0)
    nan = float('nan')
    return dict(top1=100. * float(c.diagonal().sum()) / n if n else nan,
                top_share=100. * float(cols.max()) / n if n else nan,
                samples=[int(v) for v in rows],
                class_top1=[100. * float(d) / float(r) if r else nan for d, r in zip(c.diagonal(), rows)],
                predicted_share=[100. * float(v) / n if n else nan for v in cols])


def seed_epoch(seed: int, epoch: int, rank: int = 0) -> None:
    """Seed Python, NumPy and torch (timm's ``random_seed``) from ``(seed, epoch, rank)``; called every epoch."""
    random_seed((seed * 1_000_003 + epoch * 10_007) % 2 ** 31, rank * 101)


# ---- options and the output directory ---------------------------------------------------------------------------

# Files a run writes before its first checkpoint (older versions wrote args.yaml at start): a dir holding only these
# is a run that crashed before saving anything, which the same command may start again.
_PRE_CHECKPOINT_FILES = ('args.yaml', 'args.yaml.tmp', 'metrics.csv.tmp', LOCK_NAME)


def _has_checkpoint(out: str) -> bool:
    return any(os.path.isfile(os.path.join(out, n)) for n in ('checkpoint-last.pth', 'checkpoint-best.pth'))


def _check_output(args, resuming: bool) -> None:
    """Refuse an output dir holding another run unless resuming or ``--overwrite`` (called while holding its lock).

    A dir holding only what a run writes before its first checkpoint (``args.yaml``), the lock and temp files counts
    as empty.
    """
    out = args.output
    if resuming or not os.path.isdir(out):
        return
    if all(n in _PRE_CHECKPOINT_FILES or n.startswith(TMP_PREFIX) for n in os.listdir(out)):
        return
    if not args.overwrite:
        raise OutputDirError(f'output dir {out!r} already exists; pass --resume to continue that run, --overwrite to '
                             'replace its files, or choose another --output')


def _parse(argv: Optional[List[str]], parse=parse_train_args):
    """Options, plus the checkpoint to resume from (or ``None``)."""
    first = parse(argv, check_required=False)
    if first.output and os.path.exists(first.output) and not os.path.isdir(first.output):
        raise OutputDirError(f'--output {first.output!r} is a file, not a directory; choose another --output')
    if not first.resume:
        return parse(argv), None
    if first.resume == 'auto':
        if not first.output:
            raise ValueError('--resume without a path needs --output (the run dir holding checkpoint-last.pth)')
        path = os.path.join(first.output, 'checkpoint-last.pth')
        sweep = sweep_command(first.output) if not os.path.isfile(path) else None
        if sweep:
            raise OutputDirError(f'--resume: {first.output!r} holds the result set of {sweep}, not a training run; '
                                 f'continue that sweep with {sweep} --resume --output {first.output}, or give zoo '
                                 'train the output dir of a training run')
        if not os.path.isfile(path):
            if os.path.isdir(first.output) and not _has_checkpoint(first.output):
                # a run that stopped before its first checkpoint: start it from scratch
                args = parse(argv)
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
    args = parse(argv, recorded=recorded, default_output=os.path.dirname(os.path.abspath(path)))
    _check_not_older(args, ckpt, path)
    return args, ckpt


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


# ---- entry point ----------------------------------------------------------------------------------------------------

def train(argv: Optional[List[str]] = None, parse=parse_train_args,
          training: Callable[[Any], TrainingTask] = classification_training, prog: str = 'zoo train') -> Dict[str, Any]:
    """Run ``zoo train`` with command-line style arguments.

    Args:
        argv: the options (without the program / subcommand name).
        parse: the subcommand's option parser (:func:`zoo.train.args.parse_train_args`).
        training: makes the training task from the parsed options: what is trained on what (default: image or
            video classification, by the model; ``zoo train-vlm``: :class:`zoo.tasks.videoqa.VideoQATraining`).
        prog: the subcommand, for the lock and messages.

    Returns:
        ``output`` (dir), ``epochs`` (completed), ``best_top1``, ``best_epoch`` and ``history`` (per-epoch metrics).

    Raises:
        ValueError / FileNotFoundError / zoo.errors.ZooError: user errors (bad options, missing data, unknown
            model, output dir in use or holding another run, incompatible checkpoint, a ``--resume`` flag that
            contradicts the record); the CLI prints them as one line.
    """
    args, ckpt = _parse(argv, parse)
    training_task = training(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    dist_info = init_distributed_device_so(device=resolve_device(args.device, int(os.environ.get('LOCAL_RANK', 0))))
    device, world, rank = torch.device(dist_info['device']), dist_info['world_size'], dist_info['global_rank']
    lock = RunDirLock(args.output, prog)
    try:
        error = None
        if rank == 0:
            try:
                lock.acquire()
                _check_output(args, resuming=ckpt is not None)
                clean_temp_files(args.output)
            except Exception as e:  # every rank must learn of it, or the others would wait for rank 0 forever
                error = e
        if world > 1:
            message = [None if error is None else f'{type(error).__name__}: {error}']
            dist.broadcast_object_list(message, src=0)
            if message[0] is not None and error is None:
                raise OutputDirError(f'rank 0 could not take the output dir: {message[0]}')
        if error is not None:
            raise error
        return TrainingRun(args, training_task, ckpt, device, world, rank).fit()
    finally:
        lock.release()
        if world > 1 and dist.is_initialized():
            dist.destroy_process_group()


# ---- one training step, one epoch -----------------------------------------------------------------------------------

def train_one_epoch(model: nn.Module, loader, optimizer: torch.optim.Optimizer, scheduler, task: Task,
                    device: torch.device, epoch: int, num_updates: int, scaler: Optional[NativeScaler] = None,
                    ema: Optional[ModelEmaV3] = None, amp_dtype: Optional[torch.dtype] = None,
                    clip_grad: Optional[float] = None, accum_steps: int = 1, progress: bool = True,
                    pe_aux_weight: float = 0.) -> Dict[str, Any]:
    """One pass over ``loader``, one optimizer update every ``accum_steps`` batches (and at the end). With
    ``pe_aux_weight`` > 0 each batch's loss gets ``pe_aux_weight * pe_aux_loss(model)`` (the position encoding's
    regulariser, SeqPE's; ``--pe-aux-loss``); a model whose encoding has none is a ValueError.

    Returns:
        ``loss`` (mean per sample), ``num_updates`` (total so far), ``unreadable`` (count), ``bad`` (the
        unreadable :class:`zoo.datasets.BadSample` s) and ``confusion`` (``(K, K)`` int64 counts of true x predicted
        outcome from :meth:`Task.train_predictions`, or ``None`` when the task gives none).

    Raises:
        FloatingPointError: a non-finite loss.
    """
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_sum, seen, unreadable, bad_samples, pending = 0., 0, 0, [], 0
    n_batches = len(loader)
    params = [p for p in model.parameters() if p.requires_grad]
    outcomes = task.train_outcomes
    confusion = torch.zeros(len(outcomes), len(outcomes), dtype=torch.int64) if outcomes else None
    bar = tqdm(loader, desc=f'epoch {epoch + 1}', leave=False, dynamic_ncols=True, disable=not progress)
    for idx, raw in enumerate(bar):
        need_update = idx + 1 == n_batches or (idx + 1) % accum_steps == 0
        batch = task.to_batch(raw, device, train=True)
        unreadable += len(batch.bad)
        bad_samples.extend(batch.bad)
        if batch.size:
            sync = contextlib.nullcontext() if need_update or not hasattr(model, 'no_sync') else model.no_sync()
            with sync:
                with autocast(device.type, amp_dtype):
                    outputs = task.forward(model, batch)
                    loss = task.loss(outputs, batch)
                    if pe_aux_weight:
                        aux = pe_aux_loss(model)
                        if aux is None:
                            raise ValueError('--pe-aux-loss adds the position encoding\'s regulariser, but this '
                                             'model\'s encoding has none (seqpe has one); drop --pe-aux-loss')
                        loss = loss + pe_aux_weight * aux
                if confusion is not None:
                    pairs = task.train_predictions(outputs, batch)
                    if pairs is not None:
                        k = len(outcomes)
                        flat = pairs[1].detach().to('cpu', torch.int64) * k + pairs[0].detach().to('cpu', torch.int64)
                        confusion += torch.bincount(flat, minlength=k * k).view(k, k)
                if not math.isfinite(loss.item()):
                    raise FloatingPointError(f'loss is {loss.item()} at epoch {epoch + 1}; lower --lr or drop --amp')
                if scaler is not None:
                    scaler(loss / accum_steps, optimizer, clip_grad=clip_grad, parameters=params,
                           need_update=need_update)
                else:
                    (loss / accum_steps).backward()
            pending += 1
            loss_sum += loss.item() * batch.size
            seen += batch.size
        if need_update and pending:
            if scaler is None:
                if clip_grad:
                    dispatch_clip_grad(params, clip_grad)
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            pending = 0
            num_updates += 1
            scheduler.step_update(num_updates=num_updates)
            if ema is not None:
                ema.update(getattr(model, 'module', model), step=num_updates)  # unwrap DDP
        bar.set_postfix(loss=f'{loss_sum / max(seen, 1):.3f}', lr=f'{optimizer.param_groups[0]["lr"]:.2e}')
    return dict(loss=loss_sum / max(seen, 1), num_updates=num_updates, unreadable=unreadable, bad=bad_samples,
                confusion=confusion)


# ---- a run ----------------------------------------------------------------------------------------------------------

@dataclass
class _Loaders:
    train: Any
    val: Any
    sampler: Any                          # DistributedSampler (set_epoch) or RandomSampler over ``generator``
    generator: Optional[torch.Generator]


class TrainingRun:
    """The state of one training session (``zoo train``, ``zoo train-vlm``): built in ``__init__``, trained by
    :meth:`fit`. Everything that depends on what is trained is asked of ``training_task``
    (:class:`zoo.tasks.training.TrainingTask`)."""

    def __init__(self, args, training_task: TrainingTask, ckpt: Optional[Dict[str, Any]], device: torch.device,
                 world: int, rank: int):
        self.args, self.training_task, self.ckpt = args, training_task, ckpt
        self.device, self.world, self.rank = device, world, rank
        self.is_main = rank == 0
        self.progress = self.is_main and not args.no_progress
        seed_epoch(args.seed, -1, rank)  # model init
        self.model = training_task.create_model(resuming=ckpt is not None)
        self.data = training_task.open_data(self.model)
        self.loaders = self._loaders(self.data)
        self.model.to(device)
        self.task = training_task.create_task(self.model, self.data)
        self.amp_dtype = amp_dtype(args.amp, args.amp_dtype, device.type)
        self.optimizer = create_optimizer_v2(self.model, opt=args.opt, lr=args.lr, weight_decay=args.weight_decay)
        self.updates_per_epoch = math.ceil(len(self.loaders.train) / args.grad_accum_steps)
        self.scheduler = self._scheduler()
        self.scaler = NativeScaler(device=device.type) \
            if self.amp_dtype == torch.float16 and device.type == 'cuda' else None
        self.ema = ModelEmaV3(self.model, decay=args.model_ema_decay) if args.model_ema else None
        self.meta = dict(model_name=args.model, pe=getattr(self.model, 'pe_name', None),
                         model_kwargs=_plain(args.model_kwargs), **training_task.meta(self.data),
                         data_config=_plain(self.data.data_config), args=_plain(vars(args)), world_size=world)
        self.start_epoch, self.history, self.best_top1, self.best_epoch = 0, [], -1., -1
        if ckpt is not None:
            self._restore(ckpt)

    def _scheduler(self):
        """timm's scheduler ``--sched``, or :class:`HoldCosineScheduler` for ``hold_cosine`` (released at
        ``--hold-until``, by default halfway between chance and 100 %)."""
        args = self.args
        if args.sched != 'hold_cosine':
            scheduler, _ = create_scheduler_v2(
                self.optimizer, sched=args.sched, num_epochs=args.epochs, warmup_epochs=args.warmup_epochs,
                warmup_lr=args.warmup_lr, min_lr=args.min_lr, step_on_epochs=False,
                updates_per_epoch=self.updates_per_epoch)
            return scheduler
        outcomes = self.task.train_outcomes
        if not outcomes:
            raise ValueError(f'--sched hold_cosine needs training accuracy, which {type(self.task).__name__} does not '
                             'count; use --sched cosine')
        release = args.hold_until if args.hold_until is not None else (100. / len(outcomes) + 100.) / 2
        total = args.epochs * self.updates_per_epoch
        by = getattr(args, 'hold_release_by', None)
        return HoldCosineScheduler(self.optimizer, total_updates=total, release_at=release,
                                   release_by=None if by is None else round(by * total),
                                   warmup_updates=round(args.warmup_epochs * self.updates_per_epoch),
                                   warmup_lr=args.warmup_lr, min_lr=args.min_lr)

    def _loaders(self, data: TrainingData) -> _Loaders:
        """A seeded sampler over the training split (distributed: each rank its share), a strided share of the
        validation split per rank."""
        args, world, rank = self.args, self.world, self.rank
        pin = args.pin_mem and self.device.type == 'cuda'
        if world > 1:
            sampler = DistributedSampler(data.train, num_replicas=world, rank=rank, shuffle=True, seed=args.seed,
                                         drop_last=True)
            generator = None
        else:
            generator = torch.Generator()
            sampler = RandomSampler(data.train, generator=generator)
        drop_last = len(data.train) // world > args.batch_size
        train_loader = make_loader(data.train, args.batch_size, args.workers, pin, sampler=sampler,
                                   generator=generator, drop_last=drop_last, collate_fn=data.collate_fn)
        val_part = Subset(data.val, range(rank, len(data.val), world)) if world > 1 else data.val
        val_loader = make_loader(val_part, args.batch_size, args.workers, pin, collate_fn=data.collate_fn)
        if len(train_loader) == 0:
            raise ValueError(f'{data.source!r} has {len(data.train)} training {self.training_task.samples}, fewer '
                             f'than one batch per process ({args.batch_size} x {world}); lower --batch-size')
        return _Loaders(train_loader, val_loader, sampler, generator)

    def _restore(self, ckpt: Dict[str, Any]) -> None:
        args = self.args
        meta = checkpoint_meta(ckpt)
        check_model_identity('--resume checkpoint', meta, args.model, getattr(self.model, 'pe_name', None), False)
        try:
            self.model.load_state_dict(ckpt['model'], strict=True)
        except RuntimeError as e:
            from zoo.models import CheckpointMismatchError
            raise CheckpointMismatchError(f'--resume checkpoint does not load into {args.model}: '
                                          f'{str(e).strip().splitlines()[0]}') from None
        self.optimizer.load_state_dict(ckpt['optimizer'])
        if int(meta['args']['epochs']) == args.epochs or isinstance(self.scheduler, HoldCosineScheduler):
            self.scheduler.load_state_dict(ckpt['scheduler'])  # hold_cosine: its release point, kept at any length
        else:  # a longer / shorter schedule: timm schedulers are functions of the update count, so start anew
            _logger.info('--epochs changed from %s to %d: the LR schedule is rebuilt for the new length',
                         meta['args']['epochs'], args.epochs)
        if self.scaler is not None and ckpt.get('scaler'):
            self.scaler.load_state_dict(ckpt['scaler'])
        if self.ema is not None and ckpt.get('model_ema'):
            self.ema.module.load_state_dict(ckpt['model_ema'])
        self.start_epoch, self.history = int(ckpt['epoch']), list(ckpt.get('history', []))
        self.best_top1, self.best_epoch = float(ckpt.get('best_top1', -1.)), int(ckpt.get('best_epoch', -1))
        _logger.info('resumed %s after epoch %d', args.output, self.start_epoch)

    def fit(self) -> Dict[str, Any]:
        args, loaders = self.args, self.loaders
        distributed = self.world > 1
        train_model = nn.parallel.DistributedDataParallel(self.model) if distributed else self.model
        if self.is_main:
            self._start_files()
        if distributed:
            dist.barrier()
        num_updates = self.start_epoch * self.updates_per_epoch
        if self.start_epoch:
            self.scheduler.step_update(num_updates=num_updates)
            if self.start_epoch >= args.epochs and self.is_main:
                _logger.info('%s already completed %d of %d epochs; nothing to do (raise --epochs to continue)',
                             args.output, self.start_epoch, args.epochs)
        for epoch in range(self.start_epoch, args.epochs):
            t0 = time.time()
            seed_epoch(args.seed, epoch, self.rank)
            self.training_task.set_epoch(self.data, epoch)
            if distributed:
                loaders.sampler.set_epoch(epoch)
            else:
                loaders.generator.manual_seed(args.seed * 1_000_003 + epoch)
            stats = train_one_epoch(train_model, loaders.train, self.optimizer, self.scheduler, self.task,
                                    self.device, epoch=epoch, num_updates=num_updates, scaler=self.scaler,
                                    ema=self.ema, amp_dtype=self.amp_dtype, clip_grad=args.clip_grad,
                                    accum_steps=args.grad_accum_steps, progress=self.progress,
                                    pe_aux_weight=getattr(args, 'pe_aux_loss', 0.))
            num_updates = stats['num_updates']
            self.scheduler.step(epoch + 1)
            row, val = self._validate(epoch, stats)
            if isinstance(self.scheduler, HoldCosineScheduler) and row['train_top1'] != '':
                if not getattr(self, '_decay_logged', False) and self.scheduler.observe(
                        epoch + 1, row['train_top1'], num_updates) and self.is_main:
                    self._decay_logged = True
                    if self.scheduler.released_at is not None:
                        _logger.info('train top1 %.2f >= %.2f: the LR decays from update %d of %d', row['train_top1'],
                                     self.scheduler.release_at, num_updates, self.scheduler.total_updates)
                    else:
                        _logger.info('train top1 %.2f < %.2f at --hold-release-by: the LR decays from update %d of %d',
                                     row['train_top1'], self.scheduler.release_at, self.scheduler.release_by,
                                     self.scheduler.total_updates)
            row['epoch_s'] = round(time.time() - t0, 2)
            self.history.append(row)
            if val.top1 > self.best_top1:
                self.best_top1, self.best_epoch = val.top1, epoch + 1
            if self.is_main:
                self._save_epoch(epoch + 1, write_args=epoch == self.start_epoch)
                self._log_epoch(row, stats, val)
            if distributed:
                dist.barrier()
        if self.is_main and self.start_epoch < args.epochs:
            self._finish()
        return dict(output=args.output, epochs=len(self.history), best_top1=self.best_top1,
                    best_epoch=self.best_epoch, history=self.history)

    def _validate(self, epoch: int, stats: Dict[str, Any]):
        progress = 'validate' if self.progress else None
        val = evaluate(self.model, self.loaders.val, self.device, self.task, self.amp_dtype, progress=progress)
        ema_val = None
        if self.ema is not None:
            ema_val = evaluate(self.ema.module, self.loaders.val, self.device, self.task, self.amp_dtype,
                               progress='validate EMA' if self.progress else None)
        train_loss = torch.tensor([stats['loss'], stats['unreadable']], dtype=torch.float64, device=self.device)
        confusion = stats.get('confusion')
        if self.world > 1:
            val.all_reduce(self.device)
            if ema_val is not None:
                ema_val.all_reduce(self.device)
            dist.all_reduce(train_loss)
            train_loss[0] /= self.world
            if confusion is not None:
                confusion = confusion.to(self.device)
                dist.all_reduce(confusion)
                confusion = confusion.cpu()
        # no counted sample (Mixup / CutMix soft targets): no training metrics ('' in metrics.csv)
        tm = train_metrics(confusion) if confusion is not None and int(confusion.sum()) else None
        row = dict(epoch=epoch + 1, lr=self.optimizer.param_groups[0]['lr'],
                   train_loss=round(float(train_loss[0]), 5),
                   train_top1=round(tm['top1'], 4) if tm else '',
                   train_top_share=round(tm['top_share'], 4) if tm else '',
                   val_loss=round(val.loss, 5),
                   val_top1=round(val.top1, 4), val_top5=round(val.top5, 4),
                   ema_top1=round(ema_val.top1, 4) if ema_val is not None else '',
                   train_unreadable=int(train_loss[1]), val_unreadable=len(val.bad))
        if tm:
            row['train_classes'] = [dict(outcome=name, samples=n, top1=round(a, 4), predicted_share=round(p, 4))
                                    for name, n, a, p in zip(self.task.train_outcomes, tm['samples'],
                                                             tm['class_top1'], tm['predicted_share'])]
        return row, val

    def _log_epoch(self, row: Dict[str, Any], stats: Dict[str, Any], val) -> None:
        (top1, top5), files = self.training_task.metric_names, self.training_task.files
        bad = f' | unreadable train {row["train_unreadable"]} val {row["val_unreadable"]}' \
            if row['train_unreadable'] or row['val_unreadable'] else ''
        ema_txt = f' | ema {top1} {row["ema_top1"]:.2f}' if row['ema_top1'] != '' else ''
        train_txt = f' top1 {row["train_top1"]:.2f} (top share {row["train_top_share"]:.1f})' \
            if row['train_top1'] != '' else ''
        _logger.info('epoch %d/%d | train loss %.4f%s | val loss %.4f %s %.2f %s %.2f%s | lr %.2e | %.1fs%s',
                     row['epoch'], self.args.epochs, row['train_loss'], train_txt, row['val_loss'], top1,
                     row['val_top1'], top5, row['val_top5'], ema_txt, row['lr'], row['epoch_s'], bad)
        for sample in stats.get('bad', [])[:5]:
            _logger.warning('unreadable training %s %s (%s)', files, sample.path, sample.error)
        for sample in val.bad[:5]:
            _logger.warning('unreadable %s %s (%s)', files, sample.path, sample.error)

    # ---- files (rank 0) ---------------------------------------------------------------------------------------------

    def _start_files(self) -> None:
        args, out = self.args, self.args.output
        if args.overwrite and self.ckpt is None:
            for name in ('checkpoint-last.pth', 'checkpoint-best.pth', 'metrics.csv', 'train_classes.csv',
                         'summary.csv', 'args.yaml', 'model.safetensors', 'model_ema.safetensors'):
                if os.path.exists(os.path.join(out, name)):
                    os.remove(os.path.join(out, name))
        if self.ckpt is not None:  # a kill between the checkpoint and metrics.csv: the checkpoint's history rules
            self._write_metrics()
        n_params = sum(p.numel() for p in self.model.parameters())
        _logger.info('%s (%.2fM params, pe %s) | %s | %d process(es) on %s | output %s', args.model, n_params / 1e6,
                     getattr(self.model, 'pe_name', 'timm'), self.training_task.describe(self.data), self.world,
                     self.device, out)

    def _write_metrics(self) -> None:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=METRIC_FIELDS, extrasaction='ignore', lineterminator='\n')
        writer.writeheader()
        writer.writerows(self.history)
        write_text_atomic(os.path.join(self.args.output, 'metrics.csv'), buf.getvalue())
        per_class = [dict(epoch=r['epoch'], **c) for r in self.history for c in r.get('train_classes', [])]
        if per_class:
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=CLASS_FIELDS, lineterminator='\n')
            writer.writeheader()
            writer.writerows(per_class)
            write_text_atomic(os.path.join(self.args.output, 'train_classes.csv'), buf.getvalue())

    def _save_epoch(self, epoch: int, write_args: bool = False) -> None:
        """Write checkpoint-best (when this epoch is the best) and checkpoint-last, metrics.csv, summary.csv and, with
        ``write_args`` (the session's first save), args.yaml: a run dir gets args.yaml with its first checkpoint."""
        out = self.args.output
        state = dict(model=self.model.state_dict(), optimizer=self.optimizer.state_dict(),
                     scheduler=self.scheduler.state_dict(), epoch=epoch, history=self.history,
                     best_top1=self.best_top1, best_epoch=self.best_epoch, meta=self.meta)
        if self.scaler is not None:
            state['scaler'] = self.scaler.state_dict()
        if self.ema is not None:
            state['model_ema'] = self.ema.module.state_dict()
        best = os.path.join(out, 'checkpoint-best.pth') if self.best_epoch == epoch else None
        save_checkpoint_files(state, os.path.join(out, 'checkpoint-last.pth'), best)
        self._write_metrics()
        row = self.history[-1]
        update_summary(epoch, dict(loss=row['train_loss'], unreadable=row['train_unreadable'],
                                   seconds=row['epoch_s']),
                       dict(loss=row['val_loss'], top1=row['val_top1'], top5=row['val_top5'],
                            ema_top1=row['ema_top1']),
                       os.path.join(out, 'summary.csv'), lr=row['lr'])
        if write_args:
            write_text_atomic(os.path.join(out, 'args.yaml'), yaml.safe_dump(self.meta['args'], sort_keys=True))

    def _finish(self) -> None:
        """Export the final weights as safetensors and write ``--results-file``."""
        out = self.args.output
        save_safetensors(self.model.state_dict(), os.path.join(out, 'model.safetensors'), self.meta)
        if self.ema is not None:
            save_safetensors(self.ema.module.state_dict(), os.path.join(out, 'model_ema.safetensors'),
                             dict(self.meta, weights='ema'))
        if self.args.results_file:
            last = self.history[-1]
            result = dict(model=self.args.model, pe=self.meta['pe'] or '', output=out, epochs=last['epoch'],
                          val_top1=last['val_top1'], val_top5=last['val_top5'], ema_top1=last['ema_top1'],
                          best_top1=round(self.best_top1, 4), best_epoch=self.best_epoch)
            write_results_file(self.args.results_file, [result])

