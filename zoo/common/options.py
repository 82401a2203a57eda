"""Alias of zoo.runs.options (moved in round 3); import from there."""
from zoo.runs.options import *  # noqa: F401,F403
