"""Moved: atomic writes to :mod:`zoo.datasets.files`, checkpoints to :mod:`zoo.runs.checkpoints`; this name stays
as an alias."""
from zoo.datasets.files import *  # noqa: F401,F403
from zoo.runs.checkpoints import *  # noqa: F401,F403
