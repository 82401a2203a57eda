"""Alias of :mod:`zoo.sweep.resolution` (``zoo eval-resolution``; moved in round 3)."""
from zoo.sweep.resolution import *  # noqa: F401,F403
