"""The embedded target's client side: one connection to one initiator database.

This is the hot path of every benchmark: a SEND is one round trip running
``SELECT ssb.send($1::uuid, $2::bytea)`` as a prepared statement in autocommit (one transaction
per SEND), through libpq directly (psycopg's low-level ``pgconn``) so the Python overhead per
message stays small and the GIL is released while the server works. pgbench can run the very
same statement.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import ConnStatus, ExecStatus

from ...errors import TargetError, first_line
from ...os_threads import allocate_lock
from ..base import SendPaths, Sender
from ._db import connect
from .waits import SENDER_APP_PREFIX

SEND_SQL = b"SELECT ssb.send($1::uuid, $2::bytea)"
_STMT = b"ssbench_send"
_FORMATS = [0, 1]                 # dialog handle as text, body as binary
#: a finite messages_per_dialog: BEGIN DIALOG when the handle is NULL, SEND, retire (and END,
#: fire and forget) on the last message, still one round trip per SEND
RETIRING_SQL = b"SELECT ssb.send_retiring($1::uuid, $2::bytea, $3::bool, $4::bool)"
_STMT_RETIRING = b"ssbench_send_retiring"
_FORMATS_RETIRING = [0, 1, 0, 0]
#: A lost connection (the server crashed or restarted) is reopened by the next call; while the
#: server stays down, reconnects back off from the first to the second figure (seconds), so a
#: user waits instead of spinning on a dead connection.
RECONNECT_BACKOFF_S = (0.1, 2.0)


class EmbeddedSender(Sender):
    """A Locust user's connection to initiator ``initiator``. One call at a time, from any thread.

    A SEND that fails because the connection is lost raises; the next call reconnects (the SEND
    statement prepared again), backing off while the server is unreachable.

    The lock that makes calls one at a time is the OS's own (:mod:`harness.os_threads`): the OS
    threads that call (the thread SEND loop, the hub's threadpool) block on it. While the hub
    drives the connection through :meth:`pump`, nothing else uses it."""

    #: libpq in non-blocking mode: the hub's pump
    paths = SendPaths(pump=True)
    #: the SEND statement, prepared once per connection ($1 dialog handle, $2 body); a
    #: benchmark may subclass with another two-parameter statement (benchmarks/ceiling_sender.py)
    send_sql: bytes = SEND_SQL

    def __init__(self, conninfo: str, initiator: int | None = None, *, application_name: str | None = None,
                 client_cpu_us: int = 0):
        self.initiator = initiator
        #: an emulation knob (broker.client_cpu_us_per_send): CPU this process spends before each SEND
        self._cpu_us = int(client_cpu_us or 0)
        self._conninfo = conninfo
        self._app = application_name or f"{SENDER_APP_PREFIX}i{initiator or 0}"
        self._lock = allocate_lock()
        self._dialogs: dict[int, str] = {}
        self._lost = False       # the connection broke: the next call reconnects
        self._backoff = RECONNECT_BACKOFF_S[0]
        self._retry_at = 0.0
        #: dialog lifetime (set_dialog_lifetime): messages per dialog (0: unlimited) and fire and forget
        self._per_dialog = 0
        self._ff = b"false"
        self._live: dict[str, list] = {}    # slot handle -> [current handle or None, messages sent on it]
        #: counted by this sender: dialogs begun and ended by its SENDs (the database counts too)
        self.dialogs_begun = 0
        self.dialogs_ended = 0
        self._open()

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> "EmbeddedSender":
        """Build a sender from :meth:`EmbeddedTarget.sender_spec`."""
        if "conninfo" not in spec:
            raise TargetError(f"not an embedded sender spec: {sorted(spec)}")
        return cls(spec["conninfo"], spec.get("initiator"),
                   client_cpu_us=int(spec.get("client_cpu_us_per_send") or 0))

    def _open(self) -> None:
        conn = connect(self._conninfo, self._app)
        try:
            _prepare(conn, _STMT, self.send_sql, " (was the target provisioned?)")
            if self._per_dialog:
                _prepare(conn, _STMT_RETIRING, RETIRING_SQL)
        except TargetError:
            conn.close()
            raise
        self._conn, self._pg = conn, conn.pgconn

    def set_dialog_lifetime(self, messages_per_dialog: int | None, fire_and_forget: bool = False) -> None:
        """Retire every dialog after ``messages_per_dialog`` messages and begin a new one (None or
        0: reuse the slot's dialog for ever, the default); with ``fire_and_forget`` the SEND of a
        dialog's last message also ENDs it. The first SEND on a slot then begins its own dialog."""
        with self._lock:
            self._per_dialog = int(messages_per_dialog or 0)
            self._ff = b"true" if fire_and_forget else b"false"
            self._live.clear()
            if self._per_dialog and not self._lost:
                _prepare(self._conn, _STMT_RETIRING, RETIRING_SQL)

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
                   f"(next try in {self._backoff:.1f} s): {first_line(e)}")
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
        if self._cpu_us:
            burn_cpu(self._cpu_us)
        self._exec(dialog, payload)

    def send_seq(self, dialog: str, payload: bytes) -> int:
        """Like :meth:`send`, returning the message's sequence number on its dialog."""
        return int(self._exec(dialog, payload).get_value(0, 0))

    def _exec(self, dialog: str, payload: bytes):
        """One SEND round trip under the lock, its result; raises on failure. Reconnects first
        if the connection was lost; a connection lost now is remembered for the next call."""
        with self._lock:
            if self._lost:
                self._reconnect()
            try:
                res = (self._exec_retiring(dialog, payload) if self._per_dialog else
                       self._pg.exec_prepared(_STMT, [dialog.encode(), payload], param_formats=_FORMATS))
            except psycopg.OperationalError as e:   # libpq could not even run it: the connection is gone
                self._lost = self._pg.status != ConnStatus.OK
                raise psycopg.OperationalError(f"SEND failed: {first_line(e)}") from None
        if res.status != ExecStatus.TUPLES_OK:
            raise self._error(res)
        return res

    def _exec_retiring(self, dialog: str, payload: bytes):
        """One SEND with a finite dialog lifetime (callers hold the lock): on the slot's current
        dialog (a new one when None), the last of ``messages_per_dialog`` retiring it."""
        live = self._live.setdefault(dialog, [None, 0])
        last = live[1] + 1 >= self._per_dialog
        params = [live[0].encode() if live[0] else None, payload, b"true" if last else b"false", self._ff]
        res = self._pg.exec_prepared(_STMT_RETIRING, params, param_formats=_FORMATS_RETIRING)
        if res.status == ExecStatus.TUPLES_OK:
            if live[0] is None:
                self.dialogs_begun += 1
            if last:
                live[0], live[1] = None, 0
                self.dialogs_ended += self._ff == b"true"
            else:
                got = res.get_value(0, 0)
                live[0], live[1] = got.decode() if got else None, live[1] + 1
        return res

    def pump(self, dialog: str, payload: bytes):
        """SENDs of ``payload`` on ``dialog`` as non-blocking libpq steps for an event loop
        (:class:`.libpq_pump.LibpqPump`); None with a finite dialog lifetime (the load layer then
        takes the blocking path) or a lost connection (the next blocking SEND reconnects first)."""
        if self._per_dialog or self._lost:
            return None
        from .libpq_pump import LibpqPump

        pump = LibpqPump(self._pg, _STMT, [dialog.encode(), payload], _FORMATS, self._error)
        if self._cpu_us:
            begin, us = pump.begin, self._cpu_us

            def costly_begin() -> bool:
                burn_cpu(us)
                return begin()

            pump.begin = costly_begin   # type: ignore[method-assign]
        return pump

    def _error(self, res) -> BaseException:
        """The exception of a SEND whose last result is ``res`` (None: no result at all); a
        lost connection is remembered, so the next blocking call reconnects."""
        if res is not None and res.status == ExecStatus.FATAL_ERROR and self._pg.status == ConnStatus.OK:
            return pg_errors.error_from_result(res, encoding=self._conn.info.encoding)
        self._lost = self._pg.status != ConnStatus.OK
        msg = self._pg.error_message.decode(errors="replace").strip() or (res.status.name if res is not None
                                                                         else "no result")
        return psycopg.OperationalError(f"SEND failed: {msg}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()


def _prepare(conn: psycopg.Connection, name: bytes, statement: bytes, hint: str = "") -> None:
    """Prepare a SEND statement on ``conn`` (TargetError saying why it cannot)."""
    res = conn.pgconn.prepare(name, statement)
    if res.status != ExecStatus.COMMAND_OK:
        raise TargetError("cannot prepare SEND on the initiator database: "
                          f"{pg_errors.error_from_result(res, encoding=conn.info.encoding)}{hint}")


def burn_cpu(us: int) -> None:
    """Spend ``us`` microseconds of this thread's CPU time (not wall time: on a busy machine it
    takes longer). The client's own work per SEND (broker.client_cpu_us_per_send, docs/embedded.md)."""
    end = time.thread_time_ns() + us * 1000
    while time.thread_time_ns() < end:
        pass
