"""An fsync-heavy writer: a real disturbance of a file system, for the storage-noise tests and
docs/findings/scripts/storage_noise.py. ``python tests/support/fsync_writer.py FILE SECONDS MIB`` writes
MIB MiB and fsyncs it, over and over (cycling through eight such blocks of FILE), for SECONDS
(or until killed), then removes FILE and prints the MiB/s it wrote."""

from __future__ import annotations

import os
import signal
import sys
import time


def main(path: str, seconds: float, mib: float) -> None:
    size = max(4096, int(mib * 1024 * 1024))
    buf = os.urandom(size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    start, n = time.monotonic(), 0
    try:
        while time.monotonic() - start < seconds:
            os.pwrite(fd, buf, (n % 8) * size)
            os.fsync(fd)
            n += 1
    finally:
        os.close(fd)
        os.unlink(path)
        print(f"{n * size / 1048576 / max(time.monotonic() - start, 1e-9):.0f} MiB/s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]))
