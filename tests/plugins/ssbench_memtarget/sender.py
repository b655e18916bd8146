"""The in-memory target's sender: one TCP connection to the target's server, blocking (the
load layer SENDs from an OS thread of the user's own, as it does for pyodbc)."""

from __future__ import annotations

from typing import Any

from harness.errors import TargetError
from harness.targets.base import Sender


def _os_socket():
    """The operating system's socket class even in a gevent-patched Locust worker: the calls
    run on real threads and block there, releasing the GIL, as a database driver's do."""
    try:
        from gevent.monkey import get_original
    except ImportError:  # pragma: no cover
        import socket

        return socket.socket
    return get_original("socket", "socket")


class MemorySender(Sender):
    def __init__(self, host: str, port: int, initiator: int):
        import socket

        self.initiator = initiator
        self._sock = _os_socket()(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.connect((host, port))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._file = self._sock.makefile("rb")

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> "MemorySender":
        return cls(spec["host"], int(spec["port"]), int(spec["initiator"]))

    def _call(self, request: bytes) -> str:
        self._sock.sendall(request)
        reply = self._file.readline().decode().strip()
        if not reply.startswith("OK"):
            raise TargetError(f"memory target: {reply or 'connection closed'}")
        return reply[3:]

    def dialog(self, slot: int) -> str:
        return self._call(f"DIALOG {self.initiator} {slot}\n".encode())

    def send(self, dialog: str, payload: bytes) -> None:
        self._call(f"SEND {self.initiator} {dialog} {len(payload)}\n".encode() + payload)

    def close(self) -> None:
        self._file.close()
        self._sock.close()
