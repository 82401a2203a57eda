"""A learning-rate schedule that holds the peak LR until the model leaves its plateau, then decays (``--sched
hold_cosine``).

Tiny transformers trained on classes that differ only in *where or when* something happens (mirror classes such as
red-then-blue vs blue-then-red) sit at chance for hundreds to thousands of updates, then rise fast; a cosine schedule
over a fixed number of updates can decay the LR before that jump (measured: ``../shared/notes/video-learning.md``,
"Where the time goes"). This schedule keeps the LR at its peak (after the linear warm-up) until an epoch's training
top-1 reaches ``release_at`` percent, then follows a half cosine from the peak to ``min_lr`` over the updates that are
left. ``release_by`` (``--hold-release-by``, a fraction of the run's updates) caps the hold: a run that has not reached
``release_at`` by then starts the decay there, so a late learner still gets the decay; without it, a run that never
reaches ``release_at`` trains at the peak LR to the end.

The update count at which the decay started (``released_at``) is the schedule's only state; it is saved in the
checkpoint (``state_dict``), so a resumed run follows the same LRs as an uninterrupted one.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import torch
from timm.scheduler.scheduler import Scheduler

__all__ = ['HoldCosineScheduler']


class HoldCosineScheduler(Scheduler):
    """Linear warm-up, then the peak LR until released, then cosine decay to ``min_lr`` (per update).

    A timm :class:`~timm.scheduler.scheduler.Scheduler` stepped per update (``step_update(num_updates)``); the loop
    calls :meth:`observe` once per epoch with the epoch's training top-1.

    Args:
        optimizer: the optimizer whose param groups' ``lr`` is set (their ``initial_lr`` is the peak).
        total_updates: updates of the whole run (epochs x updates per epoch).
        release_at: training top-1 in percent at which the decay starts (e.g. chance + a margin).
        warmup_updates: linear warm-up length in updates (0: none).
        warmup_lr: LR at update 0 of the warm-up.
        min_lr: LR at the last update.
        release_by: update count at which the decay starts at the latest, whatever the accuracy (``None``: no cap).

    Raises:
        ValueError: ``total_updates`` < 1, ``release_at`` outside (0, 100], a negative ``warmup_updates``, or
            ``release_by`` outside [0, ``total_updates``].
    """

    def __init__(self, optimizer: torch.optim.Optimizer, total_updates: int, release_at: float,
                 warmup_updates: int = 0, warmup_lr: float = 0., min_lr: float = 0.,
                 release_by: Optional[int] = None):
        if total_updates < 1:
            raise ValueError(f'total_updates must be at least 1, got {total_updates}')
        if not 0 < release_at <= 100:
            raise ValueError(f'--hold-until {release_at}: must be a training top-1 in (0, 100] percent')
        if warmup_updates < 0:
            raise ValueError(f'warmup_updates must be 0 or more, got {warmup_updates}')
        if release_by is not None and not 0 <= release_by <= total_updates:
            raise ValueError(f'release_by must be an update count in [0, {total_updates}], got {release_by}')
        super().__init__(optimizer, param_group_field='lr', t_in_epochs=False, initialize=True)
        self.total_updates, self.release_at = int(total_updates), float(release_at)
        self.warmup_updates, self.warmup_lr, self.min_lr = int(warmup_updates), float(warmup_lr), float(min_lr)
        self.release_by = None if release_by is None else int(release_by)
        self.released_at: Optional[int] = None     # update count at which the decay started
        self.released_epoch: Optional[int] = None  # the epoch (1-based) whose training top-1 released it
        self.step_update(0)

    def observe(self, epoch: int, train_top1: float, num_updates: int) -> bool:
        """Record epoch ``epoch`` (1-based)'s training top-1 (percent); start the decay at ``num_updates`` when it
        reaches ``release_at`` (once), unless the cap ``release_by`` came first (the decay then started there).
        Returns whether the decay has started."""
        if self.capped(num_updates):
            return True
        if self.released_at is None and math.isfinite(train_top1) and train_top1 >= self.release_at:
            self.released_at, self.released_epoch = int(num_updates), int(epoch)
        return self.released_at is not None

    def capped(self, num_updates: int) -> bool:
        """Whether the decay started at the cap ``release_by`` (reached by ``num_updates`` before any release)."""
        return self.released_at is None and self.release_by is not None and num_updates >= self.release_by

    def decay_start(self) -> Optional[int]:
        """The update count the decay starts from: the release point, else the cap (``None``: held to the end)."""
        return self.released_at if self.released_at is not None else self.release_by

    def lr_at(self, num_updates: int, base_lr: float) -> float:
        """The LR of a param group with peak ``base_lr`` after ``num_updates`` updates."""
        t = num_updates
        if t < self.warmup_updates:
            return self.warmup_lr + (base_lr - self.warmup_lr) * t / self.warmup_updates
        decay = self.decay_start()
        if decay is None or t < decay:
            return base_lr
        start = max(decay, self.warmup_updates)
        span = self.total_updates - start
        if span <= 0:
            return base_lr
        frac = min(1., max(0., (t - start) / span))
        return self.min_lr + 0.5 * (base_lr - self.min_lr) * (1 + math.cos(math.pi * frac))

    def _get_lr(self, t: int) -> List[float]:
        return [self.lr_at(t, v) for v in self.base_values]

    def step(self, epoch: int, metric: Optional[float] = None) -> None:
        """Per-epoch step: nothing (the LR is set per update)."""

    def state_dict(self) -> Dict[str, Any]:
        """The release point only (the rest comes from the options)."""
        return dict(released_at=self.released_at, released_epoch=self.released_epoch)

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restore the release point of :meth:`state_dict` (a run resumed with another ``--epochs`` keeps it).

        Raises:
            ValueError: a state without ``released_at`` (another scheduler's).
        """
        if 'released_at' not in state_dict:
            raise ValueError('the checkpoint holds another LR schedule\'s state, not --sched hold_cosine\'s; resume '
                             'with the recorded --sched')
        r, e = state_dict['released_at'], state_dict.get('released_epoch')
        self.released_at = None if r is None else int(r)
        self.released_epoch = None if e is None else int(e)
