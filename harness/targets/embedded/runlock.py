"""One run at a time per embedded server: an OS file lock in the server's data directory.

Every run resets the emulation's databases, so two at once would erase each other's messages.
The lock is :class:`harness.results.lock.HeldLock` on ``ssbench-run.lock`` (released by the
kernel however its holder exits; the file names the holder, so a refused run can name it).
"""

from __future__ import annotations

from pathlib import Path

from ...errors import UserError
from ...results.lock import HeldLock

LOCK_FILE = "ssbench-run.lock"


class RunLock(HeldLock):
    """Context manager: hold the run lock of ``data_dir`` for ``owner`` (e.g. a run directory),
    or raise :class:`UserError` (exit 2) naming the process that holds it."""

    def __init__(self, data_dir: Path, owner: str):
        super().__init__(Path(data_dir) / LOCK_FILE, owner, lambda holder: UserError(
            f"the embedded server {Path(data_dir)} is in use by {holder}; wait for it to end, or give this run "
            "its own server (SSBENCH_PGDATA=another directory)"))
