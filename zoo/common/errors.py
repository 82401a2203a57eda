"""Moved to :mod:`zoo.errors` (importable from every floor); this name stays as an alias."""
from zoo.errors import *  # noqa: F401,F403
from zoo.errors import __all__  # noqa: F401
