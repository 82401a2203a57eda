"""One owner per output directory: ``OUTPUT/.zoo.lock``, taken at start and removed at exit.

The lock file is created with ``O_CREAT | O_EXCL`` (atomic, also on NFS v3+) and records the owner's host, process id
and process start time. A second run into the directory fails at once naming the owner. A lock whose process is gone
(same host, and no process with that id, or one started at another time: the id was reused) is stale: it is reported
(a warning naming the dead process) and replaced. A lock from another host cannot be checked and is never replaced:
the message says which file to remove once that run is known to be over.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import socket
from typing import Any, Dict, List, Optional

from zoo.datasets.files import TMP_PREFIX
from zoo.errors import OutputDirError

__all__ = ['RunDirLock', 'LOCK_NAME', 'STAGING', 'previous_results']

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
        OutputDirError: ``folder`` is a file, or another live process (or one on another host) holds the lock.
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
            os.makedirs(self.folder)
            self.created = True
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._handle_existing()
                continue
            with os.fdopen(fd, 'w') as f:
                json.dump(self._record(), f)
            self.held = True
            return self
        raise OutputDirError(f'could not take the lock {self.path!r} (another run keeps taking it)')

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
