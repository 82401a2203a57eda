"""Alias of zoo.tasks.metrics (moved in round 3); import from there."""
from zoo.tasks.metrics import *  # noqa: F401,F403
