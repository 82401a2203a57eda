"""Running a subcommand for the command line: user errors become one line on stderr and exit status 2.

Used by :mod:`zoo.cli` and by ``python -m zoo.train`` (``torchrun``'s entry point), so that nothing imports the CLI.
Set ``ZOO_DEBUG=1`` to see the traceback instead.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Callable, List

__all__ = ['run_command', 'user_errors']


def user_errors() -> tuple:
    """The exception types that are the user's to fix (bad options, missing files, incompatible checkpoints ...)."""
    from zoo.errors import ZooError
    from zoo.models import CheckpointMismatchError
    return (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError, PermissionError,
            CheckpointMismatchError, ZooError)


class _StdoutHandler(logging.StreamHandler):
    """Logs to whatever ``sys.stdout`` is when a record is written (a redirected or captured stdout included)."""

    def __init__(self):
        super().__init__(sys.stdout)

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, value) -> None:
        pass


def run_command(name: str, func: Callable[[List[str]], int], argv: List[str]) -> int:
    """Run ``func(argv)`` as ``zoo <name>``: INFO logging to stdout, user errors as one line (status 2), a missing
    package as one line naming the install command (status 2), Ctrl-C as status 130.

    Returns:
        The exit status.
    """
    from timm.utils.log import FormatterNoInfo
    root = logging.getLogger('zoo')
    if not root.handlers:
        handler = _StdoutHandler()
        handler.setFormatter(FormatterNoInfo())  # timm's: INFO lines as is, others prefixed with their level
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        return func(argv)
    except user_errors() as e:
        if os.environ.get('ZOO_DEBUG'):
            raise
        print(f'zoo {name}: error: {" ".join(str(e).split())}', file=sys.stderr)  # one line
        return 2
    except ModuleNotFoundError as e:  # a package zoo needs is missing: name it and the install command
        if os.environ.get('ZOO_DEBUG') or not e.name:
            raise
        from zoo.errors import install_hint
        print(f'zoo {name}: error: the package {e.name!r} is not installed; {install_hint(e.name)}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f'zoo {name}: interrupted', file=sys.stderr)
        return 130
