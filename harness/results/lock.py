"""An OS file lock held by one process, recording who holds it: :class:`HeldLock`.

``fcntl.flock`` on a file is released by the kernel however its holder exits (a SIGKILL'd
holder leaves no stale lock); the file records the holder (owner, pid, host, start time, its
command line, redacted), so a refused process can name it. The descriptor is close-on-exec:
the servers and workers a run starts never inherit the lock. A run directory's lock is its
claim file (:func:`run_dir_lock`), held by the run that writes it for the run's whole life.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from ..errors import UserError
from ..redact import redact_string

#: a run directory's claim and lock: created exclusively by the run that made the directory
CLAIM = ".claimed"


class HeldLock:
    """An exclusive flock on ``path`` for ``owner`` (e.g. "ssbench run m.yaml"): :meth:`acquire`
    raises ``refuse(holder)`` when another process (or another open of it) holds it, the
    holder described in a few words (:func:`describe`), or UserError when the file cannot be
    opened."""

    def __init__(self, path: Path, owner: str, refuse: Callable[[str], Exception]):
        self.path = Path(path)
        self.owner = owner
        self.refuse = refuse
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "HeldLock":
        if self._fd is not None:
            raise RuntimeError("lock already held by this object")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise UserError(f"cannot open the lock {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = describe(read_record(fd))
            os.close(fd)
            raise self.refuse(holder) from None
        except OSError as e:  # pragma: no cover - a file system without flock
            os.close(fd)
            raise UserError(f"cannot lock {self.path}: {e.strerror}") from None
        record = {"owner": self.owner, "pid": os.getpid(),
                  "command": redact_string(shlex.join(sys.argv)),
                  "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "host": socket.gethostname()}
        with contextlib.suppress(OSError):   # a full disk: the lock holds all the same, unnamed
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)   # no holder any more (the lock itself goes with the close)
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
                return read_record(fd) or {}
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> "HeldLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def read_record(fd: int) -> dict | None:
    try:
        rec = json.loads(os.pread(fd, 4096, 0).decode(errors="replace"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def describe(rec: dict | None) -> str:
    """A holder's record in a few words: who, pid, host, since when, its command."""
    if not rec:
        return "another ssbench process (it has not recorded itself yet)"
    return (f"{rec.get('owner') or 'another run'} (pid {rec.get('pid')} on {rec.get('host')}, "
            f"started {rec.get('started')}: {rec.get('command')})")


def run_dir_lock(path: Path) -> HeldLock:
    """The lock of the run directory ``path`` (its claim file), not yet acquired: refused with
    :func:`in_use`."""
    return HeldLock(Path(path) / CLAIM, "ssbench", lambda holder: in_use(path, holder))


def in_use(path: Path, holder: str, field: str | None = None) -> UserError:
    """The one-line refusal of a run directory another process is writing (exit 2)."""
    return UserError(f"another run is writing this results directory: {holder}; wait for it to end, "
                     "or give this run another --out", file=str(path), field=field)


def run_dir_holder(path: Path) -> str | None:
    """Who is writing the run directory ``path`` now (None: nobody)."""
    rec = run_dir_lock(path).holder()
    return None if rec is None else describe(rec)
