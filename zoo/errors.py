"""User-facing errors (the command line prints each as one line, exit status 2) and the check for optional packages.

This module imports nothing of the project, so every floor (encodings, models, data, application) can raise these.
"""
from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ['ZooError', 'OutputDirError', 'OutputWriteError', 'ResumeMismatchError', 'MissingDependencyError',
           'require', 'install_hint', 'EXTRAS']


class ZooError(Exception):
    """Base class of the project's user-facing errors; the message names the problem and the fix."""


class OutputDirError(ZooError):
    """The output directory cannot be used: a file, owned by another run (locked), or holding another run."""


class OutputWriteError(ZooError, OSError):
    """Writing a result file failed (read-only file system, disk full, no permission)."""


class ResumeMismatchError(ZooError, ValueError):
    """A flag given with ``--resume`` contradicts the option recorded in the run being resumed."""


class MissingDependencyError(ZooError, ImportError):
    """An optional package is not installed; the message names the ``pip install`` command (the extra) that adds it."""


#: Import name of each optional package -> the extra of ``pyproject.toml`` that installs it.
EXTRAS = {'transformers': 'hf', 'lmms_eval': 'lmms', 'pytest': 'test'}


def require(module: str, purpose: str) -> ModuleType:
    """Import an optional package or raise one clear error.

    Args:
        module: import name (``'transformers'``).
        purpose: what needs it, for the message (``'zoo.hf.patch_rope_index'``).

    Raises:
        MissingDependencyError: not installed; the message names the extra (``pip install 'zoo[hf]'``), or, for a
            package that is a core dependency, says to reinstall zoo.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(f'{purpose} needs the package {module!r}, which is not installed ({e}); '
                                     f'{install_hint(module)}') from None


def install_hint(module: str) -> str:
    """How to install the package of an import name: its extra, or a reinstall for a core dependency."""
    top = module.split('.')[0]
    if top in EXTRAS:
        return f"install it with: pip install 'zoo[{EXTRAS[top]}]' (or pip install -e '.[{EXTRAS[top]}]' in a checkout)"
    return 'it is a core dependency of zoo: reinstall zoo (pip install -e . in a checkout) to install it'
