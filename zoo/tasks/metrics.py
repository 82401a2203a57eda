"""Evaluation counts of a classification task (top-1 / top-5 / loss), summed over batches and processes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

import torch

from zoo.datasets import BadSample

__all__ = ['EvalCounts']


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
