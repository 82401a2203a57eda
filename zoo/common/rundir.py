"""Alias of zoo.runs.rundir (moved in round 3); import from there."""
from zoo.runs.rundir import *  # noqa: F401,F403
