"""Alias of zoo.datasets.splits (moved in round 3); import from there."""
from zoo.datasets.splits import *  # noqa: F401,F403
