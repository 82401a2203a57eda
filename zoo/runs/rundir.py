"""One owner per output directory: ``OUTPUT/.zoo.lock``, taken at start and removed at exit.

The lock file is created with ``O_CREAT | O_EXCL`` (atomic, also on NFS v3+) and records the owner's host, process id
and process start time. A second run into the directory fails at once naming the owner. A lock whose process is gone
(same host, and no process with that id, or one started at another time: the id was reused) is stale: it is reported
(a warning naming the dead process) and replaced. A lock from another host cannot be checked and is never replaced:
the message says which file to remove once that run is known to be over.
"""
from __future__ import annotations

import datetime
import errno
import json
import logging
import os
import socket
from typing import Any, Dict, List, Optional

from zoo.datasets.files import TMP_PREFIX
from zoo.errors import OutputDirError

__all__ = ['RunDirLock', 'LOCK_NAME', 'STAGING', 'previous_results', 'sweep_command']

_logger = logging.getLogger('zoo.rundir')

LOCK_NAME = '.zoo.lock'
STAGING = 'incomplete'  # where an --overwrite sweep writes until its report is complete


def _start_time(pid: int) -> Optional[str]:
    """The process start time in clock ticks since boot (field 22 of ``/proc/PID/stat``), or ``None``."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: Optional[str]) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    now = _start_time(pid)
    return started is None or now is None or now == started


class RunDirLock:
    """Context manager owning ``folder`` for one process.

    Args:
        folder: the output directory (created if missing).
        command: what holds the lock, for messages (``zoo train``).

    Raises:
        OutputDirError: ``folder`` is a file, cannot be created or written (read-only, no permission, a full disk:
            no empty lock is left behind), or another live process (or one on another host) holds the lock.
    """

    def __init__(self, folder: str, command: str):
        self.folder, self.command = folder, command
        self.path = os.path.join(folder, LOCK_NAME)
        self.held = False
        self.created = False

    def _record(self) -> Dict[str, Any]:
        return dict(host=socket.gethostname(), pid=os.getpid(), start=_start_time(os.getpid()), command=self.command,
                    since=datetime.datetime.now().isoformat(timespec='seconds'))

    def _read(self) -> Dict[str, Any]:
        try:
            with open(self.path) as f:
                data = json.load(f)
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def acquire(self) -> 'RunDirLock':
        if os.path.exists(self.folder) and not os.path.isdir(self.folder):
            raise OutputDirError(f'--output {self.folder!r} is a file, not a directory; choose another --output')
        if not os.path.isdir(self.folder):
            try:
                os.makedirs(self.folder)
            except OSError as e:
                raise self._unwritable(self.folder, e) from None
            self.created = True
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._handle_existing()
                continue
            except OSError as e:
                self._remove_created_folder()
                raise self._unwritable(self.folder, e) from None
            try:
                with os.fdopen(fd, 'w') as f:
                    f.write(json.dumps(self._record()))
                    f.flush()
                    os.fsync(f.fileno())  # a full disk shows here, not after the lock is taken
            except OSError as e:  # never leave an empty lock behind: the next run would call it unreadable
                try:
                    os.remove(self.path)
                except OSError:
                    pass
                self._remove_created_folder()
                raise self._unwritable(self.folder, e) from None
            self.held = True
            return self
        raise OutputDirError(f'could not take the lock {self.path!r} (another run keeps taking it)')

    def _unwritable(self, path: str, e: OSError) -> OutputDirError:
        """The one-line error for an output dir that cannot be created or written (read-only, no permission, full)."""
        hint = {errno.ENOSPC: 'the disk is full: free some space or choose another --output',
                errno.EDQUOT: 'the disk quota is exceeded: free some space or choose another --output',
                errno.EROFS: 'the file system is read-only: choose another --output',
                errno.EACCES: 'no write permission there: choose another --output (or fix its permissions)',
                errno.EPERM: 'no write permission there: choose another --output (or fix its permissions)'}.get(
            e.errno, 'choose another --output')
        return OutputDirError(f'output dir {path!r} cannot be written ({e.strerror or e}); {hint}')

    def _remove_created_folder(self) -> None:
        if self.created:
            try:
                os.rmdir(self.folder)
            except OSError:
                pass
            self.created = False

    def _handle_existing(self) -> None:
        owner = self._read()
        who = (f'{owner.get("command", "a zoo run")} (process {owner.get("pid", "?")} on {owner.get("host", "?")}, '
               f'since {owner.get("since", "?")})')
        pid = owner.get('pid')
        if owner.get('host') != socket.gethostname() or not isinstance(pid, int):
            if not owner:  # being written right now, or garbage: let the owner finish, then judge again
                raise OutputDirError(f'output dir {self.folder!r} is locked ({self.path} exists but is unreadable); '
                                     'if no run uses it, delete that file, or choose another --output')
            raise OutputDirError(f'output dir {self.folder!r} is in use by {who}; wait for it or choose another '
                                 f'--output (if that run is over, delete {self.path})')
        if _alive(pid, owner.get('start')):
            raise OutputDirError(f'output dir {self.folder!r} is in use by {who}; wait for it to finish or choose '
                                 'another --output')
        _logger.warning('output dir %s: stale lock of %s, which is no longer running: taking it over', self.folder,
                        who)
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def release(self) -> None:
        """Remove the lock (if still ours), and the folder when this lock created it and nothing was written."""
        if self.held:
            self.held = False
            if self._read().get('pid') == os.getpid():
                try:
                    os.remove(self.path)
                except FileNotFoundError:
                    pass
            if self.created:
                try:
                    os.rmdir(self.folder)  # only if empty: a run that failed before writing anything
                except OSError:
                    pass

    def __enter__(self) -> 'RunDirLock':
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def previous_results(out: str) -> List[str]:
    """Files in ``out`` other than the lock, temp files and the staging folder of an interrupted ``--overwrite``."""
    if not os.path.isdir(out):
        return []
    return [n for n in os.listdir(out) if n not in (LOCK_NAME, STAGING) and not n.startswith(TMP_PREFIX)]


def sweep_command(folder: str) -> Optional[str]:
    """The command whose result set ``folder`` holds (``zoo eval-resolution`` ...; ``'a zoo sweep'`` when its
    ``results.json`` records none), or ``None`` when it holds no sweep's results: for messages of commands given a
    sweep's output dir (``zoo train --resume``)."""
    path = os.path.join(folder, 'results.json')
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding='utf-8') as f:
            record = json.load(f)
    except (OSError, ValueError):
        return 'a zoo sweep'
    if not isinstance(record, dict) or 'results' not in record:
        return None
    spec = record.get('spec')
    return (spec.get('command') if isinstance(spec, dict) else None) or 'a zoo sweep'
