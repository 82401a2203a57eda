"""Alias of zoo.tasks.videoqa (moved in round 3); import from there."""
from zoo.tasks.videoqa import *  # noqa: F401,F403
