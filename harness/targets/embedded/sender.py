"""The embedded target's client side: one connection to one initiator database.

This is the hot path of every benchmark: a SEND is one round trip running
``SELECT ssb.send($1::uuid, $2::bytea)`` as a prepared statement in autocommit (one transaction
per SEND), through libpq directly (psycopg's low-level ``pgconn``) so the Python overhead per
message stays small and the GIL is released while the server works. pgbench can run the very
same statement.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import ConnStatus, ExecStatus

from ...errors import TargetError
from ..base import Sender
from ._db import connect

SEND_SQL = b"SELECT ssb.send($1::uuid, $2::bytea)"
_STMT = b"ssbench_send"
_FORMATS = [0, 1]                 # dialog handle as text, body as binary


class EmbeddedSender(Sender):
    """A Locust user's connection to initiator ``initiator``. One call at a time, from any thread."""

    def __init__(self, conninfo: str, initiator: int | None = None, *, application_name: str | None = None):
        self.initiator = initiator
        self._conn = connect(conninfo, application_name or f"ssbench-sender-i{initiator or 0}")
        self._pg = self._conn.pgconn
        self._lock = threading.Lock()
        res = self._pg.prepare(_STMT, SEND_SQL)
        if res.status != ExecStatus.COMMAND_OK:
            err = pg_errors.error_from_result(res, encoding=self._conn.info.encoding)
            self._conn.close()
            raise TargetError(f"cannot prepare SEND on the initiator database: {err} "
                              "(was the target provisioned?)")
        self._dialogs: dict[int, str] = {}
        self._green = None       # .green.GreenConn, made on the first send_green

    def dialog(self, slot: int) -> str:
        """Handle of usable dialog ``slot`` (row k of ssb.dialogs)."""
        if slot in self._dialogs:
            return self._dialogs[slot]
        with self._lock:
            row = self._conn.execute("SELECT handle FROM ssb.dialogs WHERE k = %s", (int(slot),)).fetchone()
        if row is None:
            raise TargetError(f"no usable dialog {slot} on initiator {self.initiator}: "
                              "create_dialogs() made fewer slots")
        self._dialogs[slot] = handle = str(row[0])
        return handle

    def send(self, dialog: str, payload: bytes) -> None:
        """SEND ON CONVERSATION ``dialog`` in its own transaction; raises on failure."""
        with self._lock:
            res = self._pg.exec_prepared(_STMT, [dialog.encode(), payload], param_formats=[0, 1])
        if res.status != ExecStatus.TUPLES_OK:
            self._raise(res)

    def send_green(self, dialog: str, payload: bytes) -> None:
        """:meth:`send` for a gevent greenlet: libpq in non-blocking mode, waiting on the socket
        through gevent's hub, so other users' greenlets run meanwhile (no thread hop)."""
        with self._lock:
            green = self._green
            if green is None:
                from .green import GreenConn

                green = self._green = GreenConn(self._pg)
            res = green.exec_prepared(_STMT, [dialog.encode(), payload], _FORMATS)
        if res is None or res.status != ExecStatus.TUPLES_OK:
            self._raise(res) if res is not None else self._raise_conn()

    def _raise_conn(self) -> None:
        msg = self._pg.error_message.decode(errors="replace").strip() or "no result"
        raise psycopg.OperationalError(f"SEND failed: {msg}")

    def send_seq(self, dialog: str, payload: bytes) -> int:
        """Like :meth:`send`, returning the message's sequence number on its dialog."""
        with self._lock:
            res = self._pg.exec_prepared(_STMT, [dialog.encode(), payload], param_formats=[0, 1])
        if res.status != ExecStatus.TUPLES_OK:
            self._raise(res)
        return int(res.get_value(0, 0))

    def _raise(self, res) -> None:
        if res.status == ExecStatus.FATAL_ERROR and self._pg.status == ConnStatus.OK:
            raise pg_errors.error_from_result(res, encoding=self._conn.info.encoding)
        msg = self._pg.error_message.decode(errors="replace").strip() or res.status.name
        raise psycopg.OperationalError(f"SEND failed: {msg}")

    def close(self) -> None:
        if self._green is not None:
            self._green.close()
            self._green = None
        try:
            self._conn.close()
        except Exception:  # pragma: no cover
            pass

    def __enter__(self) -> "EmbeddedSender":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_sender(spec: dict[str, Any]) -> EmbeddedSender:
    """Build a sender from :meth:`EmbeddedTarget.sender_spec`."""
    if spec.get("kind") != "embedded" or "conninfo" not in spec:
        raise TargetError(f"not an embedded sender spec: {sorted(spec)}")
    return EmbeddedSender(spec["conninfo"], spec.get("initiator"))
