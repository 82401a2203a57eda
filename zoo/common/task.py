"""Alias of zoo.tasks.base and zoo.tasks.classification (moved in round 3); import from there."""
from zoo.tasks.base import *  # noqa: F401,F403
from zoo.tasks.classification import *  # noqa: F401,F403
