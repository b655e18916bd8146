"""Run libpq commands from a gevent greenlet without blocking the worker.

libpq in non-blocking mode (psycopg already puts its connections in it): send the command,
then wait on the connection's socket through gevent's hub until the result is in, so the
other users' greenlets run meanwhile. No thread hop: cheaper per call than offloading to a
real thread. The socket's read and write watchers are made once per connection.
"""

from __future__ import annotations

from typing import Callable


class GreenConn:
    """One libpq connection (``psycopg`` ``PGconn``) driven from greenlets, one command at a time."""

    def __init__(self, pgconn):
        from gevent import get_hub

        self.pg = pgconn
        self._hub = get_hub()
        self._watch()

    def _watch(self) -> None:
        self._fd = self.pg.socket
        self._read = self._hub.loop.io(self._fd, 1)
        self._write = self._hub.loop.io(self._fd, 2)

    def execute(self, send: Callable[[], None]):
        """``send()`` queues one command (e.g. ``pg.send_query(...)``); returns the last result
        (None if the connection failed)."""
        self._ready()
        send()
        return self._result()

    def exec_prepared(self, name: bytes, params: list, formats: list[int]):
        """Prepared statement ``name`` with ``params``; returns the last result (None if the
        connection failed). The hot path of a SEND: no closure per call."""
        self._ready()
        self.pg.send_query_prepared(name, params, param_formats=formats)
        return self._result()

    def _ready(self) -> None:
        pg = self.pg
        if pg.socket != self._fd:          # reconnected under us: new socket, new watchers
            self.close()
            self._watch()
        if not pg.nonblocking:
            pg.nonblocking = 1

    def _result(self):
        pg = self.pg
        while pg.flush():
            self._hub.wait(self._write)
        res = None
        while True:
            if pg.is_busy():
                self._hub.wait(self._read)
                pg.consume_input()
                continue
            last = pg.get_result()
            if last is None:
                return res
            res = last

    def close(self) -> None:
        self._read.close()
        self._write.close()


def green_exec(pgconn, send: Callable[[], None]):
    """One command on ``pgconn`` from a greenlet, without keeping watchers (see :class:`GreenConn`)."""
    conn = GreenConn(pgconn)
    try:
        return conn.execute(send)
    finally:
        conn.close()
