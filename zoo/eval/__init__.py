"""Evaluation: accuracy counting (:mod:`zoo.eval.accuracy`) and ``zoo eval-resolution`` (:mod:`zoo.eval.resolution`,
reports in :mod:`zoo.eval.report`)."""
from .accuracy import EvalCounts, evaluate

__all__ = ['EvalCounts', 'evaluate']
