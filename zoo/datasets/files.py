"""Atomic file writes for every floor: a write goes to a ``.tmp-*`` file in the destination folder and is
``os.replace``-d onto its name, so a crash leaves the previous file or the new one, never a truncated one;
:func:`clean_temp_files` removes the ``.tmp-*`` files a killed process left behind (called when the next run takes
the directory). The data floor (frame cache, synthetic sets) and the application floor (checkpoints, sweep results)
both write through here.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import math
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence

from zoo.errors import OutputWriteError

__all__ = ['write_atomic', 'write_text_atomic', 'clean_temp_files', 'TMP_PREFIX', 'temp_path', 'remove_quietly',
           'write_error', 'output_mode', 'json_safe', 'strict_json', 'file_fingerprint', 'tree_fingerprint']

_logger = logging.getLogger('zoo.io')

TMP_PREFIX = '.tmp-'


def _output_mode() -> int:
    """``0o666`` less the process umask: the mode ``open()`` gives other output files (mkstemp uses ``0o600``)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _write_error(path: str, e: OSError) -> OutputWriteError:
    if isinstance(e, OutputWriteError):  # already names the file and the fix: never wrapped twice
        return e
    hint = {errno.ENOSPC: 'free some space or choose another --output',
            errno.EROFS: 'the file system is read-only; choose another --output',
            errno.EACCES: 'no write permission; choose another --output',
            errno.EPERM: 'no write permission; choose another --output',
            errno.EDQUOT: 'disk quota exceeded; free some space or choose another --output'}.get(
        e.errno, 'check the disk and choose another --output if needed')
    return OutputWriteError(f'cannot write {path!r}: {e.strerror or e} ({hint})')


def _tmp_path(path: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=os.path.splitext(path)[1], dir=folder)
    os.close(fd)
    return tmp


def write_atomic(path: str, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` on a temporary file next to ``path``, then ``os.replace`` it onto ``path``.

    Raises:
        OutputWriteError: the folder is read-only, the disk full, ... (the temporary file is removed).
    """
    tmp = None
    try:
        tmp = _tmp_path(path)
        write(tmp)
        os.chmod(tmp, _output_mode())
        os.replace(tmp, path)
    except OSError as e:
        _remove_quietly(tmp)
        if isinstance(e, OutputWriteError):
            raise
        raise _write_error(path, e) from None
    except BaseException:
        _remove_quietly(tmp)
        raise


def _remove_quietly(path: Optional[str]) -> None:
    if path and os.path.exists(path):
        try:
            os.remove(path)
        except OSError:
            pass


def write_text_atomic(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    def write(tmp: str) -> None:
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write(text)
    write_atomic(path, write)


def clean_temp_files(folder: str) -> List[str]:
    """Remove the ``.tmp-*`` files a killed writer left in ``folder`` (call only while holding its lock).

    Returns:
        The removed paths (logged).
    """
    removed = []
    if not os.path.isdir(folder):
        return removed
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith(TMP_PREFIX) and os.path.isfile(path):
            size = os.path.getsize(path)
            os.remove(path)
            removed.append(path)
            _logger.info('removed %s (%.1f MB) left by an interrupted write', path, size / 2 ** 20)
    return removed


# public names for the checkpoint writer (zoo.runs.checkpoints), which links one temp file under two names
temp_path = _tmp_path
remove_quietly = _remove_quietly
write_error = _write_error
output_mode = _output_mode


def json_safe(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, inf) as ``None`` and NumPy scalars as Python numbers, through dicts,
    lists and tuples: what strict JSON parsers (JavaScript's ``JSON.parse``, ``jq``) accept."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    item = getattr(obj, 'item', None)
    if item is not None and type(obj).__module__ == 'numpy' and getattr(obj, 'ndim', None) == 0:
        return json_safe(item())
    return obj


def strict_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that writes ``null`` for NaN / inf (:func:`json_safe`) and never the non-standard ``NaN``;
    objects JSON has no type for become their ``str``. ``kwargs`` go to ``json.dumps`` (``indent`` ...)."""
    return json.dumps(json_safe(obj), allow_nan=False, default=str, **kwargs)


def file_fingerprint(path: str) -> Dict[str, Any]:
    """What identifies a file's content: ``bytes``, ``sha256`` (hex) and ``mtime`` (seconds, for information: two
    files with the same size and hash have the same content whatever their times).

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    st = os.stat(path)
    return dict(bytes=st.st_size, sha256=h.hexdigest(), mtime=round(st.st_mtime, 3))


def tree_fingerprint(root: str, exclude: Sequence[str] = ()) -> Dict[str, Any]:
    """A cheap fingerprint of a folder's files without reading them: ``files`` (count), ``bytes`` (total) and
    ``sha256`` of the sorted listing (relative path, size, modification time in ns). Symlinked folders are followed
    once; hidden files and names starting with :data:`TMP_PREFIX` count like any other file. Adding, removing,
    renaming, resizing or rewriting (a new mtime) any file changes it; reading the folder does not.

    Args:
        exclude: folders left out (by real path): a sweep's output or frame cache inside the data folder.

    Returns:
        The fingerprint (``files`` 0 and the hash of an empty listing for a missing or empty folder).
    """
    lines, total, seen = [], 0, {os.path.realpath(p) for p in exclude}
    for folder, dirs, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # excluded, a symlink loop, or the same folder reached twice
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:  # a dangling symlink: part of the listing, without a size
                lines.append(f'{os.path.relpath(path, root)}\t-\t-')
                continue
            total += st.st_size
            lines.append(f'{os.path.relpath(path, root)}\t{st.st_size}\t{st.st_mtime_ns}')
    digest = hashlib.sha256('\n'.join(lines).encode('utf-8', 'surrogateescape')).hexdigest()
    return dict(files=len(lines), bytes=total, sha256=digest)
