"""Alias of :mod:`zoo.sweep.zero_shot` (moved in round 3)."""
from zoo.sweep.zero_shot import *  # noqa: F401,F403
