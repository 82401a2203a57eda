"""Top-1 / top-5 counting over a loader built with :func:`zoo.datasets.collate_skip_bad`."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Iterable, List, Optional

import torch
import torch.nn.functional as F
from torch import nn

from zoo.datasets import BadSample

__all__ = ['EvalCounts', 'evaluate']


@dataclass
class EvalCounts:
    """Raw counts of one evaluation pass; accuracies are derived, never stored separately.

    Attributes:
        n: readable images evaluated.
        correct1: images whose label is the top-1 prediction.
        correct5: images whose label is among the top-5 predictions (top-k with k = min(5, classes)).
        loss_sum: summed cross-entropy (nats) over the ``n`` images.
        forward_s: seconds spent in the model's forward passes only (no data loading).
        bad: unreadable images (not part of ``n``).
    """
    n: int = 0
    correct1: int = 0
    correct5: int = 0
    loss_sum: float = 0.
    forward_s: float = 0.
    bad: List[BadSample] = field(default_factory=list)

    @property
    def top1(self) -> float:
        """Top-1 accuracy in percent (``100 * correct1 / n``)."""
        return 100. * self.correct1 / self.n if self.n else float('nan')

    @property
    def top5(self) -> float:
        """Top-5 accuracy in percent."""
        return 100. * self.correct5 / self.n if self.n else float('nan')

    @property
    def loss(self) -> float:
        """Mean cross-entropy per image (nats)."""
        return self.loss_sum / self.n if self.n else float('nan')

    @property
    def images_per_s(self) -> float:
        """Forward throughput: readable images per second of forward time."""
        return self.n / self.forward_s if self.forward_s > 0 else float('nan')

    def all_reduce(self, device: torch.device) -> None:
        """Sum the counts over all processes of the default process group (bad samples stay local)."""
        import torch.distributed as dist
        t = torch.tensor([self.n, self.correct1, self.correct5, self.loss_sum, self.forward_s], dtype=torch.float64,
                         device=device)
        dist.all_reduce(t)
        self.n, self.correct1, self.correct5 = int(t[0]), int(t[1]), int(t[2])
        self.loss_sum = float(t[3])
        self.forward_s = float(t[4]) / dist.get_world_size()


@torch.no_grad()
def evaluate(model: nn.Module, loader: Iterable, device: torch.device, amp: bool = False,
             progress: Optional[str] = None) -> EvalCounts:
    """Count correct predictions of ``model`` over ``loader``.

    Args:
        model: a classifier mapping ``(B, 3, H, W)`` images to ``(B, num_classes)`` logits.
        loader: yields ``(images, targets, bad_samples)`` as produced by ``collate_skip_bad``.
        device: where to run the model.
        amp: run the forward under ``torch.autocast`` (bfloat16 on CPU, float16 on CUDA).
        progress: a tqdm description, or ``None`` for no progress bar.

    Returns:
        The counts; unreadable images are listed in ``bad`` and excluded from ``n``.
    """
    from tqdm import tqdm
    model.eval()
    counts = EvalCounts()
    autocast = (torch.autocast(device.type, dtype=torch.float16 if device.type == 'cuda' else torch.bfloat16)
                if amp else contextlib.nullcontext())
    it = tqdm(loader, desc=progress, leave=False, dynamic_ncols=True) if progress else loader
    for images, targets, bad in it:
        counts.bad.extend(bad)
        if targets.numel() == 0:
            continue
        images, targets = images.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        with autocast:
            logits = model(images)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        counts.forward_s += time.perf_counter() - t0
        logits = logits.float()
        k = min(5, logits.shape[-1])
        topk = logits.topk(k, dim=-1).indices
        hits = topk == targets[:, None]
        counts.n += targets.numel()
        counts.correct1 += int(hits[:, 0].sum())
        counts.correct5 += int(hits.any(dim=-1).sum())
        counts.loss_sum += float(F.cross_entropy(logits, targets, reduction='sum'))
    return counts
