"""Evaluation: ``zoo eval-resolution`` (:mod:`zoo.eval.resolution`, reports in :mod:`zoo.eval.report`). The evaluation
loop and counts shared with training live in :mod:`zoo.common`."""
from zoo.tasks.evaluate import evaluate
from zoo.tasks.metrics import EvalCounts

__all__ = ['EvalCounts', 'evaluate']
