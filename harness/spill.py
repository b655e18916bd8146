"""An append-only spill file of msgpack objects: what grows with a window (a slot's recording,
the collectors' samples) goes to disk as it comes and is read back as often as needed, so memory
stays the same however long the window (docs/findings/memory-soak.md)."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import msgpack

#: bytes read from the file at a time
READ_SIZE = 1 << 16


class Spill:
    """Objects appended in order to an anonymous temporary file in ``dir`` (default: the
    system's; gone with this object or :meth:`close`); iterating reads back those appended until
    then, in order, while appends go on (from another thread too: reads take no file position)."""

    def __init__(self, prefix: str = "ssbench-spill-", dir: str | os.PathLike[str] | None = None):
        self._file = tempfile.TemporaryFile(prefix=prefix, dir=dir)
        self._lock = threading.Lock()
        self.size = 0       # bytes appended
        self._count = 0

    def append(self, obj: Any) -> int:
        """Append ``obj`` (msgpack's types: tuples come back as lists); its size in bytes."""
        part = msgpack.packb(obj)
        with self._lock:
            self._file.write(part)
            self.size += len(part)
            self._count += 1
        return len(part)

    def __len__(self) -> int:
        """Objects appended."""
        return self._count

    def __iter__(self) -> Iterator[Any]:
        with self._lock:
            self._file.flush()
            end = self.size
        fd, at = self._file.fileno(), 0
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        while at < end:
            chunk = os.pread(fd, min(READ_SIZE, end - at), at)
            if not chunk:
                raise OSError(f"spill file cut short at byte {at} of {end}")
            at += len(chunk)
            unpacker.feed(chunk)
            yield from unpacker

    def close(self) -> None:
        self._file.close()
