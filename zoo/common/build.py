"""Alias of zoo.runs.models (moved in round 3); import from there."""
from zoo.runs.models import *  # noqa: F401,F403
