"""One evaluation loop for every task (used by ``zoo train`` after each epoch and by ``zoo eval-resolution``)."""
from __future__ import annotations

import time
from typing import Iterable, Optional

import torch
from torch import nn
from tqdm import tqdm

from .metrics import EvalCounts
from zoo.runs.options import autocast
from .base import Task
from .classification import ImageClassificationTask

__all__ = ['evaluate']


@torch.no_grad()
def evaluate(model: nn.Module, loader: Iterable, device: torch.device, task: Optional[Task] = None,
             amp_dtype: Optional[torch.dtype] = None, progress: Optional[str] = None, amp: bool = False) -> EvalCounts:
    """Count ``task``'s metrics of ``model`` over ``loader``.

    Args:
        model: for the default :class:`ImageClassificationTask`, a classifier mapping ``(B, 3, H, W)`` images to
            ``(B, num_classes)`` logits.
        loader: yields what ``task.to_batch`` unpacks (images: ``(images, targets, bad_samples)`` from
            ``collate_skip_bad``).
        device: where to run the model.
        task: the task (default: image classification).
        amp_dtype: autocast dtype of the forward (``None``: no AMP); ``amp=True`` without a dtype means float16 on
            CUDA and bfloat16 elsewhere.
        progress: a tqdm description, or ``None`` for no progress bar.

    Returns:
        The counts; unreadable samples are listed in ``bad`` and excluded from ``n``. ``forward_s`` times only the
        model forward (synchronised on CUDA).
    """
    task = task or ImageClassificationTask(num_classes=0)
    if amp and amp_dtype is None:
        amp_dtype = torch.float16 if device.type == 'cuda' else torch.bfloat16
    model.eval()
    counts = task.new_counts()
    it = tqdm(loader, desc=progress, leave=False, dynamic_ncols=True) if progress else loader
    for raw in it:
        batch = task.to_batch(raw, device, train=False)
        counts.bad.extend(batch.bad)
        if batch.size == 0:
            continue
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        with autocast(device.type, amp_dtype):
            outputs = task.forward(model, batch)
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        counts.forward_s += time.perf_counter() - t0
        task.update_counts(counts, outputs, batch)
    return counts
