"""One run at a time per embedded server: an OS file lock in the server's data directory.

Every run resets the emulation's databases, so two at once would erase each other's messages.
``fcntl.flock`` on ``ssbench-run.lock`` is released by the kernel however its holder exits (no
stale lock); the file records the holder, so a refused run can name it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

from ...errors import UserError
from ...redact import redact_string

LOCK_FILE = "ssbench-run.lock"


class RunLock:
    """Context manager: hold the run lock of ``data_dir`` for ``owner`` (e.g. a run directory),
    or raise :class:`UserError` (exit 2) naming the process that holds it."""

    def __init__(self, data_dir: Path, owner: str):
        self.path = Path(data_dir) / LOCK_FILE
        self.owner = owner
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        if self._fd is not None:
            raise RuntimeError("run lock already held by this object")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise UserError(f"cannot open the run lock {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read(fd))
            os.close(fd)
            raise UserError(f"the embedded server {self.path.parent} is in use by {holder}; wait for it to "
                            "end, or give this run its own server (SSBENCH_PGDATA=another directory)") from None
        except OSError as e:  # pragma: no cover - a file system without flock
            os.close(fd)
            raise UserError(f"cannot lock {self.path}: {e.strerror}") from None
        record = {"owner": self.owner, "pid": os.getpid(),
                  "command": redact_string(shlex.join(sys.argv)),
                  "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "host": socket.gethostname()}
        data = (json.dumps(record) + "\n").encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)   # no holder any more (the lock itself goes with the close)
        except OSError:  # pragma: no cover
            pass
        finally:
            os.close(fd)

    def holder(self) -> dict | None:
        """The record of whoever holds the lock now (None if free or unreadable)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read(fd: int) -> dict | None:
    try:
        raw = os.pread(fd, 4096, 0)
        rec = json.loads(raw.decode(errors="replace"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _describe(rec: dict | None) -> str:
    if not rec:
        return "another ssbench process (it has not recorded itself yet)"
    return (f"{rec.get('owner') or 'another run'} (pid {rec.get('pid')} on {rec.get('host')}, "
            f"started {rec.get('started')}: {rec.get('command')})")
