"""The embedded target's client side: one connection to one initiator database.

This is the hot path of every benchmark: a SEND is one round trip running
``SELECT ssb.send($1::uuid, $2::bytea)`` as a prepared statement in autocommit (one transaction
per SEND), through libpq directly (psycopg's low-level ``pgconn``) so the Python overhead per
message stays small and the GIL is released while the server works. pgbench can run the very
same statement.
"""

from __future__ import annotations

import threading
import time
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
#: A lost connection (the server crashed or restarted) is reopened by the next call; while the
#: server stays down, reconnects back off from the first to the second figure (seconds), so a
#: user waits instead of spinning on a dead connection.
RECONNECT_BACKOFF_S = (0.1, 2.0)


class EmbeddedSender(Sender):
    """A Locust user's connection to initiator ``initiator``. One call at a time, from any thread.

    A SEND that fails because the connection is lost raises; the next call reconnects (the SEND
    statement prepared again), backing off while the server is unreachable."""

    #: the SEND statement, prepared once per connection ($1 dialog handle, $2 body); a
    #: benchmark may subclass with another two-parameter statement (benchmarks/ceiling_sender.py)
    send_sql: bytes = SEND_SQL

    def __init__(self, conninfo: str, initiator: int | None = None, *, application_name: str | None = None):
        self.initiator = initiator
        self._conninfo = conninfo
        self._app = application_name or f"ssbench-sender-i{initiator or 0}"
        self._lock = threading.Lock()
        self._dialogs: dict[int, str] = {}
        self._green = None       # .green.GreenConn, made on the first send_green
        self._lost = False       # the connection broke: the next call reconnects
        self._backoff = RECONNECT_BACKOFF_S[0]
        self._retry_at = 0.0
        self._open()

    def _open(self) -> None:
        conn = connect(self._conninfo, self._app)
        res = conn.pgconn.prepare(_STMT, self.send_sql)
        if res.status != ExecStatus.COMMAND_OK:
            err = pg_errors.error_from_result(res, encoding=conn.info.encoding)
            conn.close()
            raise TargetError(f"cannot prepare SEND on the initiator database: {err} "
                              "(was the target provisioned?)")
        self._conn, self._pg = conn, conn.pgconn

    def _reconnect(self) -> None:
        """Reopen a lost connection (callers hold the lock); wait out the back-off first."""
        wait = self._retry_at - time.monotonic()
        if wait > 0:
            time.sleep(wait)     # cooperative in a Locust worker (gevent patches time.sleep)
        self.close()
        try:
            self._open()
        except (TargetError, psycopg.Error) as e:
            self._retry_at = time.monotonic() + self._backoff
            msg = (f"SEND failed: initiator {self.initiator} unreachable, reconnecting "
                   f"(next try in {self._backoff:.1f} s): {_first_line(e)}")
            self._backoff = min(self._backoff * 2, RECONNECT_BACKOFF_S[1])
            raise psycopg.OperationalError(msg) from None
        self._lost = False
        self._backoff = RECONNECT_BACKOFF_S[0]
        self._retry_at = 0.0

    def dialog(self, slot: int) -> str:
        """Handle of usable dialog ``slot`` (row k of ssb.dialogs)."""
        if slot in self._dialogs:
            return self._dialogs[slot]
        with self._lock:
            if self._lost:
                self._reconnect()
            try:
                row = self._conn.execute("SELECT handle FROM ssb.dialogs WHERE k = %s", (int(slot),)).fetchone()
            except psycopg.OperationalError:
                self._lost = self._conn.broken or self._conn.closed
                raise
        if row is None:
            raise TargetError(f"no usable dialog {slot} on initiator {self.initiator}: "
                              "create_dialogs() made fewer slots")
        self._dialogs[slot] = handle = str(row[0])
        return handle

    def send(self, dialog: str, payload: bytes) -> None:
        """SEND ON CONVERSATION ``dialog`` in its own transaction; raises on failure."""
        with self._lock:
            res = self._exec(dialog, payload)
        if res.status != ExecStatus.TUPLES_OK:
            self._raise(res)

    def send_seq(self, dialog: str, payload: bytes) -> int:
        """Like :meth:`send`, returning the message's sequence number on its dialog."""
        with self._lock:
            res = self._exec(dialog, payload)
        if res.status != ExecStatus.TUPLES_OK:
            self._raise(res)
        return int(res.get_value(0, 0))

    def _exec(self, dialog: str, payload: bytes):
        """One SEND round trip (callers hold the lock): reconnect first if the connection was
        lost; a connection lost now is remembered for the next call."""
        if self._lost:
            self._reconnect()
        try:
            return self._pg.exec_prepared(_STMT, [dialog.encode(), payload], param_formats=_FORMATS)
        except psycopg.OperationalError as e:   # libpq could not even run it: the connection is gone
            self._lost = self._pg.status != ConnStatus.OK
            raise psycopg.OperationalError(f"SEND failed: {_first_line(e)}") from None

    def send_green(self, dialog: str, payload: bytes) -> None:
        """:meth:`send` for a gevent greenlet: libpq in non-blocking mode, waiting on the socket
        through gevent's hub, so other users' greenlets run meanwhile (no thread hop)."""
        with self._lock:
            if self._lost:
                self._reconnect()
            green = self._green
            if green is None:
                from .green import GreenConn

                green = self._green = GreenConn(self._pg)
            try:
                res = green.exec_prepared(_STMT, [dialog.encode(), payload], _FORMATS)
            except psycopg.OperationalError as e:
                self._lost = self._pg.status != ConnStatus.OK
                raise psycopg.OperationalError(f"SEND failed: {_first_line(e)}") from None
        if res is None or res.status != ExecStatus.TUPLES_OK:
            self._raise(res) if res is not None else self._raise_conn()

    def _raise_conn(self) -> None:
        self._lost = self._pg.status != ConnStatus.OK
        msg = self._pg.error_message.decode(errors="replace").strip() or "no result"
        raise psycopg.OperationalError(f"SEND failed: {msg}")

    def _raise(self, res) -> None:
        if res.status == ExecStatus.FATAL_ERROR and self._pg.status == ConnStatus.OK:
            raise pg_errors.error_from_result(res, encoding=self._conn.info.encoding)
        self._lost = self._pg.status != ConnStatus.OK
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


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def open_sender(spec: dict[str, Any]) -> EmbeddedSender:
    """Build a sender from :meth:`EmbeddedTarget.sender_spec`."""
    if spec.get("kind") != "embedded" or "conninfo" not in spec:
        raise TargetError(f"not an embedded sender spec: {sorted(spec)}")
    return EmbeddedSender(spec["conninfo"], spec.get("initiator"))
