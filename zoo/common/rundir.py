"""Alias of zoo.runs.rundir (moved in round 3); import from there. ``sweep_output_dir`` (round 2) is kept here for
code that used it; sweeps now own their output dir through :class:`zoo.sweep.engine.Sweep`."""
from contextlib import contextmanager
from typing import Iterator

from zoo.datasets.files import clean_temp_files
from zoo.errors import OutputDirError
from zoo.runs.rundir import *  # noqa: F401,F403
from zoo.runs.rundir import RunDirLock, previous_results
from zoo.runs.rundir import __all__ as _all

__all__ = list(_all) + ['sweep_output_dir']


@contextmanager
def sweep_output_dir(output: str, command: str, overwrite: bool) -> Iterator[bool]:
    """Own ``output`` for a sweep (round 2's helper, kept for compatibility): take the lock, remove temp files left
    by a killed run, and refuse a directory holding results unless ``overwrite``.

    Yields:
        True when earlier results exist (the caller then writes into ``output/incomplete`` until it is complete).

    Raises:
        OutputDirError: the directory is locked by another run, cannot be written, or holds results and
            ``overwrite`` is False.
    """
    with RunDirLock(output, command):
        clean_temp_files(output)
        old = previous_results(output)
        if old and not overwrite:
            raise OutputDirError(f'output dir {output!r} already exists; pass --overwrite to replace its results '
                                 '(the old report stays until the new one is complete) or choose another --output')
        yield bool(old)
