"""Moved (round 3): the sweeps live in :mod:`zoo.sweep` (one engine, one report module), the evaluation loop and
counts in :mod:`zoo.tasks`; these names stay as aliases."""
from zoo.tasks import EvalCounts, evaluate

__all__ = ['EvalCounts', 'evaluate']
