"""Moved (round 3): this package keeps the old import paths working as aliases of the new homes.

* :mod:`zoo.errors` (errors), :mod:`zoo.datasets.files` (atomic writes), :mod:`zoo.datasets.splits` (class folders,
  class maps, video splits, loaders);
* :mod:`zoo.runs` (run directories and locks, checkpoints, building and loading models, shared options);
* :mod:`zoo.tasks` (what differs between image, video and video-QA training and evaluation: batches, losses, counts,
  the evaluation loop).
"""
