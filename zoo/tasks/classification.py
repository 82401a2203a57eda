"""Classification tasks: images ``(B, 3, H, W)`` and clips ``(B, C, T, H, W)`` with class ids; how ``zoo train``
opens their class folders and builds their models (:class:`ImageClassificationTraining`,
:class:`VideoClassificationTraining`)."""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from timm.data import resolve_data_config
from torch import nn

from zoo.datasets import find_split
from zoo.datasets.splits import configure_clips, open_folder, open_video_split
from zoo.datasets.video_folder import collate_video_skip_bad
from zoo.runs.models import create_zoo_model, is_video_model, load_weights, video_num_frames
from .base import Batch, Task
from .metrics import EvalCounts
from .training import TrainingData, TrainingTask

__all__ = ['ImageClassificationTask', 'VideoClassificationTask', 'ImageClassificationTraining',
           'VideoClassificationTraining', 'classification_training']

_logger = logging.getLogger('zoo.train')


class ImageClassificationTask(Task):
    """Images ``(B, 3, H, W)`` and class ids: cross-entropy (label smoothing, Mixup / CutMix), top-1 / top-5.

    Args:
        num_classes: classifier size.
        smoothing: label smoothing of the training loss.
        mixup / cutmix: timm ``Mixup`` alphas (0 = off); ``mixup_prob``: probability of applying either.
        channels_last: move images in ``torch.channels_last`` memory format.
        class_names: names of the classes for the training metrics (default ``'0'``, ``'1'``, ...).
    """

    def __init__(self, num_classes: int, smoothing: float = 0., mixup: float = 0., cutmix: float = 0.,
                 mixup_prob: float = 1., channels_last: bool = False, class_names: Optional[Sequence[str]] = None):
        from timm.data import Mixup
        from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
        self.num_classes, self.channels_last = num_classes, channels_last
        self.train_outcomes = list(class_names) if class_names is not None else [str(i) for i in range(num_classes)]
        self.mixup: Optional[Mixup] = None
        if mixup > 0 or cutmix > 0:
            self.mixup = Mixup(mixup_alpha=mixup, cutmix_alpha=cutmix, prob=mixup_prob, label_smoothing=smoothing,
                               num_classes=num_classes)
            self.loss_fn: nn.Module = SoftTargetCrossEntropy()
        elif smoothing > 0:
            self.loss_fn = LabelSmoothingCrossEntropy(smoothing=smoothing)
        else:
            self.loss_fn = nn.CrossEntropyLoss()

    def to_batch(self, raw: Any, device: torch.device, train: bool) -> Batch:
        images, targets, bad = raw
        if train and self.mixup is not None and targets.numel() % 2:
            images, targets = images[:-1], targets[:-1]  # mixup pairs samples: keep the batch even
        if targets.numel() == 0:
            return Batch(images, targets, bad)
        images, targets = images.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        if train and self.mixup is not None:
            images, targets = self.mixup(images, targets)
        return Batch(images, targets, bad)

    def loss(self, outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self.loss_fn(outputs, batch.targets)

    def train_predictions(self, outputs: torch.Tensor, batch: Batch) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        """Top-1 class and label of every sample; ``None`` for soft (Mixup / CutMix) targets."""
        if batch.targets.ndim != 1:
            return None
        return outputs.detach().argmax(dim=-1), batch.targets

    def update_counts(self, counts: EvalCounts, outputs: torch.Tensor, batch: Batch) -> None:
        logits, targets = outputs.float(), batch.targets
        k = min(5, logits.shape[-1])
        hits = logits.topk(k, dim=-1).indices == targets[:, None]
        counts.n += targets.numel()
        counts.correct1 += int(hits[:, 0].sum())
        counts.correct5 += int(hits.any(dim=-1).sum())
        counts.loss_sum += float(F.cross_entropy(logits, targets, reduction='sum'))


class VideoClassificationTask(ImageClassificationTask):
    """Clips ``(B, C, T, H, W)`` and class ids: cross-entropy with label smoothing, top-1 / top-5.

    Differs from :class:`ImageClassificationTask` only in the batch (``collate_video_skip_bad``'s
    ``(clips, targets, bad, info)``) and the loss (no Mixup / CutMix: mixing clips of motion classes would blend two
    directions into an undefined label).

    Args:
        num_classes: classifier size.
        smoothing: label smoothing of the training loss.
        class_names: names of the classes for the training metrics.
    """

    def __init__(self, num_classes: int, smoothing: float = 0., class_names: Optional[Sequence[str]] = None):
        super().__init__(num_classes, smoothing=smoothing, class_names=class_names)

    def to_batch(self, raw: Any, device: torch.device, train: bool) -> Batch:
        clips, targets, bad = raw[0], raw[1], raw[2]
        if targets.numel() == 0:
            return Batch(clips, targets, bad)
        return Batch(clips.to(device, non_blocking=True), targets.to(device, non_blocking=True), bad)


# ---- training (zoo train) -------------------------------------------------------------------------------------------

def classification_training(args: Any) -> TrainingTask:
    """The ``zoo train`` task for ``args.model``: :class:`VideoClassificationTraining` for a video model
    (:func:`zoo.runs.models.is_video_model`, decided here only), else :class:`ImageClassificationTraining`."""
    return (VideoClassificationTraining if is_video_model(args.model) else ImageClassificationTraining)(args)


class _FolderTraining(TrainingTask):
    """What image and video classification share: class folders (``DATA/train``, ``DATA/val`` or ``test``), a zoo /
    timm classifier sized to them, ``--initial-checkpoint``, the timm data config and the recorded class names.

    Subclasses say how a split is opened (:meth:`_open_split`), what else the model is built with
    (:meth:`_model_kwargs`) and how the opened splits are made to return tensors (:meth:`open_data`).
    """
    num_frames: Optional[int] = None

    def _open_split(self, root: str, max_per_class: Optional[int]) -> Any:
        raise NotImplementedError

    def _model_kwargs(self) -> Dict[str, Any]:
        return {}

    def _open_splits(self) -> Tuple[Any, Any]:
        args = self.args
        if args.max_train_per_class is not None and args.max_train_per_class < 1:
            raise ValueError(f'--max-train-per-class {args.max_train_per_class}: must be at least 1')
        self.train_dir = find_split(args.data_dir, [args.train_split], 'training')
        val_dir = find_split(args.data_dir, [args.val_split] if args.val_split else ['val', 'test'], 'validation')
        train_ds = self._open_split(self.train_dir, args.max_train_per_class)
        val_ds = self._open_split(val_dir, args.max_val_per_class)
        if train_ds.classes != val_ds.classes:
            raise ValueError(f'class folders differ between {self.train_dir!r} ({len(train_ds.classes)}) and '
                             f'{val_dir!r} ({len(val_ds.classes)}): '
                             f'{sorted(set(train_ds.classes) ^ set(val_ds.classes))[:10]}; give both splits the same '
                             'class folders (or a --class-map)')
        return train_ds, val_ds

    def create_model(self, resuming: bool) -> nn.Module:
        """Open the class folders (the classifier's size), then build the model and load ``--initial-checkpoint``."""
        args = self.args
        self.splits = self._open_splits()
        model = create_zoo_model(args.model, args.model_kwargs, img_size=args.img_size,
                                 num_classes=len(self.splits[0].classes), pretrained=args.pretrained,
                                 drop_path_rate=args.drop_path, **self._model_kwargs())
        self.img_size = int(model.patch_embed.img_size[0]) if args.img_size is None else args.img_size
        if args.initial_checkpoint and not resuming:
            load_weights(model, args.initial_checkpoint)
            _logger.info('initial weights: %s', args.initial_checkpoint)
        if args.channels_last:
            model.to(memory_format=torch.channels_last)
        return model

    def _data_config(self, model: nn.Module) -> Dict[str, Any]:
        args = self.args
        return resolve_data_config(dict(input_size=(3, self.img_size, self.img_size), crop_pct=args.crop_pct,
                                        interpolation=args.interpolation, mean=args.mean, std=args.std), model=model)

    def meta(self, data: TrainingData) -> Dict[str, Any]:
        return dict(img_size=self.img_size, num_frames=self.num_frames, num_classes=len(data.classes),
                    class_names=list(data.classes))


class ImageClassificationTraining(_FolderTraining):
    """``zoo train`` of an image model on an image folder: timm's train / eval transforms, label smoothing,
    Mixup / CutMix (:class:`ImageClassificationTask`).

    Raises:
        ValueError: ``--num-frames`` or ``--in-memory-clips`` (the model takes images).
    """

    def __init__(self, args: Any):
        super().__init__(args)
        if args.num_frames is not None:
            raise ValueError(f'--num-frames {args.num_frames}: {args.model} takes images; use a video model '
                             '(pe_video_vit_*, `zoo list pe_video_vit_*`) or drop --num-frames')
        if getattr(args, 'in_memory_clips', False):
            raise ValueError(f'--in-memory-clips renders video clips; {args.model} takes images: use a video model '
                             '(pe_video_vit_*) or drop --in-memory-clips')

    def _open_split(self, root: str, max_per_class: Optional[int]) -> Any:
        return open_folder(root, self.args.data_dir, max_per_class, self.args.class_map, self.args.allow_root)

    def open_data(self, model: nn.Module) -> TrainingData:
        from timm.data import create_transform
        args, (train_ds, val_ds) = self.args, self.splits
        cfg = self._data_config(model)
        train_ds.transform = create_transform(
            cfg['input_size'], is_training=True, scale=args.scale, ratio=args.ratio, hflip=args.hflip,
            color_jitter=args.color_jitter or None, auto_augment=args.aa, interpolation=cfg['interpolation'],
            mean=cfg['mean'], std=cfg['std'], re_prob=args.reprob)
        val_ds.transform = create_transform(cfg['input_size'], is_training=False, interpolation=cfg['interpolation'],
                                            mean=cfg['mean'], std=cfg['std'], crop_pct=cfg['crop_pct'])
        return TrainingData(train_ds, val_ds, None, list(train_ds.classes), cfg, self.train_dir)

    def create_task(self, model: nn.Module, data: TrainingData) -> Task:
        args = self.args
        return ImageClassificationTask(len(data.classes), smoothing=args.smoothing, mixup=args.mixup,
                                       cutmix=args.cutmix, mixup_prob=args.mixup_prob,
                                       channels_last=args.channels_last, class_names=data.classes)

    def describe(self, data: TrainingData) -> str:
        return f'{self.img_size} px | {super().describe(data)}'


class VideoClassificationTraining(_FolderTraining):
    """``zoo train`` of a video model (``pe_video_vit_*``) on a video folder (``DATA/train/<class>/*.mp4``).

    Clips of ``--num-frames`` frames (the only home of the frame count: the model is built with it, the clips are
    sampled with it, the checkpoint records it): random-offset uniform frames in training (new offsets every epoch,
    drawn from ``(seed, epoch, index)``), segment midpoints in validation; resized and normalised by the folder
    itself, no image transforms. Label smoothing, no Mixup / CutMix (:class:`VideoClassificationTask`).

    Raises:
        ValueError: ``--mixup`` / ``--cutmix`` (they blend two motions into an undefined label).
    """
    samples, files = 'clips', 'video'

    def __init__(self, args: Any):
        super().__init__(args)
        if args.mixup or args.cutmix:
            raise ValueError(f'--mixup / --cutmix apply to images; {args.model} takes clips, train it without them')

    def _open_split(self, root: str, max_per_class: Optional[int]) -> Any:
        return open_video_split(root, self.args.data_dir, max_per_class, self.args.class_map, self.args.allow_root)

    def _open_splits(self) -> Tuple[Any, Any]:
        """The video folders, or with ``--in-memory-clips`` the set's clips rendered in memory
        (:meth:`zoo.datasets.diagnostic_video.DiagnosticClips.from_set`)."""
        args = self.args
        if not getattr(args, 'in_memory_clips', False):
            return super()._open_splits()
        from zoo.datasets.diagnostic_video import DiagnosticClips
        if args.class_map or args.train_split != 'train' or args.val_split not in (None, 'val'):
            raise ValueError('--in-memory-clips renders the train and val splits of a zoo make-videos set; drop '
                             '--class-map / --train-split / --val-split, or drop --in-memory-clips')
        self.train_dir = args.data_dir
        return (DiagnosticClips.from_set(args.data_dir, 'train', args.max_train_per_class),
                DiagnosticClips.from_set(args.data_dir, 'val', args.max_val_per_class))

    def _model_kwargs(self) -> Dict[str, Any]:
        return dict(num_frames=self.args.num_frames) if self.args.num_frames else {}

    def create_model(self, resuming: bool) -> nn.Module:
        model = super().create_model(resuming)
        # without --num-frames the model's default clip length is the run's: resolved here, once
        self.num_frames = self.args.num_frames or video_num_frames(model)
        return model

    def open_data(self, model: nn.Module) -> TrainingData:
        args, (train_ds, val_ds) = self.args, self.splits
        cfg = dict(self._data_config(model), num_frames=self.num_frames)
        configure_clips(train_ds, self.num_frames, self.img_size, cfg['mean'], cfg['std'], True, args.seed)
        configure_clips(val_ds, self.num_frames, self.img_size, cfg['mean'], cfg['std'], False, args.seed)
        return TrainingData(train_ds, val_ds, collate_video_skip_bad, list(train_ds.classes), cfg, self.train_dir)

    def create_task(self, model: nn.Module, data: TrainingData) -> Task:
        return VideoClassificationTask(len(data.classes), smoothing=self.args.smoothing, class_names=data.classes)

    def set_epoch(self, data: TrainingData, epoch: int) -> None:
        data.train.set_epoch(epoch)  # new random frame offsets

    def describe(self, data: TrainingData) -> str:
        return f'{self.num_frames} frames at {self.img_size} px | {super().describe(data)}'
