"""The pluggable per-task part of training and evaluation: a loader batch -> model inputs -> loss / metric counts.

The training loop (:mod:`zoo.train.loop`) and the evaluation loop (:func:`zoo.tasks.evaluate.evaluate`) know nothing
about images or labels; they call a task object. A new task (video classification, a video-LLM) subclasses
:class:`Task` and changes only what differs: how a batch is unpacked and moved (:meth:`Task.to_batch`), how the model
is called (:meth:`Task.forward`), the loss and the counts.

Training metrics per epoch (``metrics.csv``: ``train_top1``, ``train_top_share``; ``train_classes.csv``: per-class
top-1 and prediction share) come from the forward passes the training loop already makes, through one hook:
:meth:`Task.train_predictions` gives the predicted and the true *outcome* (a class id, an answer letter's index) of
every sample of a training batch, and :attr:`Task.train_outcomes` names the outcomes. The loop sums a confusion
matrix ``(K, K)`` (rows: true, columns: predicted) over the epoch and every process, then derives the training
top-1, the per-outcome top-1 and the share of the most frequently predicted outcome (a model answering one class or
one letter for everything has a share near 100 %). A task that returns ``None`` (the default) logs no training
metrics; ``--sched hold_cosine`` needs them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

import torch
from torch import nn

from .metrics import EvalCounts

__all__ = ['Batch', 'Task']


@dataclass
class Batch:
    """One batch on its device.

    Attributes:
        inputs: what :meth:`Task.forward` feeds the model (images: ``(B, 3, H, W)`` float).
        targets: what the loss compares against (class ids ``(B,)`` int64, or ``(B, C)`` soft targets after mixup).
        bad: the unreadable samples of the loader batch (:class:`zoo.datasets.BadSample`), not in ``inputs``.
    """
    inputs: Any
    targets: torch.Tensor
    bad: List[Any] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Samples in the batch (0 when every sample was unreadable)."""
        return int(self.targets.shape[0])


class Task:
    """Interface of a task; the loops call only these methods.

    Attributes:
        train_outcomes: names of the outcomes :meth:`train_predictions` returns ids of (class names, answer letters),
            in id order; ``None``: the task counts no training metrics.
    """
    train_outcomes: Optional[Sequence[str]] = None

    def to_batch(self, raw: Any, device: torch.device, train: bool) -> Batch:
        """Unpack a loader batch, move it to ``device`` and (``train``) apply training-time batch augmentation."""
        raise NotImplementedError

    def forward(self, model: nn.Module, batch: Batch) -> Any:
        """Call the model on the batch's inputs."""
        return model(batch.inputs)

    def loss(self, outputs: Any, batch: Batch) -> torch.Tensor:
        """Training loss (a scalar tensor) of ``outputs`` for ``batch``."""
        raise NotImplementedError

    def new_counts(self) -> EvalCounts:
        """An empty accumulator for :meth:`update_counts`."""
        return EvalCounts()

    def update_counts(self, counts: EvalCounts, outputs: Any, batch: Batch) -> None:
        """Add the batch's evaluation counts to ``counts``."""
        raise NotImplementedError

    def train_predictions(self, outputs: Any, batch: Batch) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
        """The predicted and the true outcome ids of a training batch, for the per-epoch training metrics.

        Returns:
            ``(predicted, true)``, two int64 tensors ``(N,)`` with values in ``[0, len(train_outcomes))`` (one entry
            per scored sample; a multiple-choice task: the highest-scoring option letter and the right one), or
            ``None`` when the batch is not counted (the default; also soft targets after Mixup / CutMix).
        """
        return None
