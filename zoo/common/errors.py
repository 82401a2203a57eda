"""Errors the command line prints as one line (exit status 2), without a traceback."""
from __future__ import annotations

__all__ = ['ZooError', 'OutputDirError', 'OutputWriteError', 'ResumeMismatchError']


class ZooError(Exception):
    """Base class of the project's user-facing errors; the message names the problem and the fix."""


class OutputDirError(ZooError):
    """The output directory cannot be used: a file, owned by another run (locked), or holding another run."""


class OutputWriteError(ZooError, OSError):
    """Writing a result file failed (read-only file system, disk full, no permission)."""


class ResumeMismatchError(ZooError, ValueError):
    """A flag given with ``--resume`` contradicts the option recorded in the run being resumed."""
