"""Alias of zoo.tasks.evaluate (moved in round 3); import from there."""
from zoo.tasks.evaluate import *  # noqa: F401,F403
