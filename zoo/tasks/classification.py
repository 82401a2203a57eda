"""Classification tasks: images ``(B, 3, H, W)`` and clips ``(B, C, T, H, W)`` with class ids."""
from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .base import Batch, Task
from .metrics import EvalCounts

__all__ = ['ImageClassificationTask', 'VideoClassificationTask']


class ImageClassificationTask(Task):
    """Images ``(B, 3, H, W)`` and class ids: cross-entropy (label smoothing, Mixup / CutMix), top-1 / top-5.

    Args:
        num_classes: classifier size.
        smoothing: label smoothing of the training loss.
        mixup / cutmix: timm ``Mixup`` alphas (0 = off); ``mixup_prob``: probability of applying either.
        channels_last: move images in ``torch.channels_last`` memory format.
    """

    def __init__(self, num_classes: int, smoothing: float = 0., mixup: float = 0., cutmix: float = 0.,
                 mixup_prob: float = 1., channels_last: bool = False):
        from timm.data import Mixup
        from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
        self.num_classes, self.channels_last = num_classes, channels_last
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
    """

    def __init__(self, num_classes: int, smoothing: float = 0.):
        super().__init__(num_classes, smoothing=smoothing)

    def to_batch(self, raw: Any, device: torch.device, train: bool) -> Batch:
        clips, targets, bad = raw[0], raw[1], raw[2]
        if targets.numel() == 0:
            return Batch(clips, targets, bad)
        return Batch(clips.to(device, non_blocking=True), targets.to(device, non_blocking=True), bad)
