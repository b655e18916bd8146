"""Run libpq commands from a gevent greenlet without blocking the worker.

libpq in non-blocking mode (psycopg already puts its connections in it): send the command,
then wait on the connection's socket through gevent's hub until the result is in, so the
other users' greenlets run meanwhile. No thread hop: cheaper per call than offloading to a
real thread. The socket's read and write watchers are made once per connection; a connection
that is reopened gets a new :class:`GreenConn` (``EmbeddedSender`` drops the old one).
"""

from __future__ import annotations

from typing import Callable

from psycopg import OperationalError
from psycopg.pq import ConnStatus, ExecStatus

from ..base import SendPump

_TUPLES_OK = ExecStatus.TUPLES_OK
_CONN_OK = ConnStatus.OK


class GreenConn:
    """One libpq connection (``psycopg`` ``PGconn``) driven from greenlets, one command at a time."""

    def __init__(self, pgconn):
        from gevent import get_hub

        self.pg = pgconn
        if not pgconn.nonblocking:
            pgconn.nonblocking = 1
        hub = get_hub()
        self._wait = hub.wait
        fd = pgconn.socket
        self._read = hub.loop.io(fd, 1)
        self._write = hub.loop.io(fd, 2)

    def execute(self, send: Callable[[], None]):
        """``send()`` queues one command (e.g. ``pg.send_query(...)``); returns the last result
        (None if the connection failed)."""
        send()
        return self._result()

    def exec_prepared(self, name: bytes, params: list, param_formats: list[int]):
        """Prepared statement ``name`` with ``params`` (the signature of ``PGconn.exec_prepared``);
        returns the last result (None if the connection failed). The hot path of a SEND."""
        self.pg.send_query_prepared(name, params, param_formats=param_formats)
        return self._result()

    def _result(self):
        """Flush the command, then take results until None, waiting through the hub whenever
        libpq is busy (``PQgetResult`` on a busy connection would block the whole worker)."""
        pg, wait = self.pg, self._wait
        while pg.flush():
            wait(self._write)
        res = None
        while True:
            if pg.is_busy():
                wait(self._read)
                pg.consume_input()
                continue
            last = pg.get_result()
            if last is None:
                return res
            res = last

    def close(self) -> None:
        self._read.close()
        self._write.close()



class LibpqPump(SendPump):
    """The embedded SEND as non-blocking libpq steps (:class:`harness.targets.base.SendPump`),
    for a loop driven by gevent's hub: no greenlet switch and no thread hop per SEND, only a
    socket-readable callback (benchmarks/harness_ceiling.py measures it against the others)."""

    def __init__(self, pgconn, stmt: bytes, params: list, formats: list[int], error):
        if not pgconn.nonblocking:
            pgconn.nonblocking = 1
        self.pg = pgconn
        self.fileno = pgconn.socket
        self._stmt, self._params, self._formats = stmt, params, formats
        self._error = error            # result (or None) -> the exception of a failed SEND
        self._res = None
        self._begun = False            # a SEND is queued and not complete

    def begin(self) -> bool:
        self._res = None
        self._begun = True
        try:
            self.pg.send_query_prepared(self._stmt, self._params, param_formats=self._formats)
            return bool(self.pg.flush())
        except OperationalError:       # the connection is gone: said so, and remembered
            raise self._error(None) from None

    def flush(self) -> bool:
        try:
            return bool(self.pg.flush())
        except OperationalError:
            raise self._error(None) from None

    def read(self):
        pg = self.pg
        try:
            pg.consume_input()
        except OperationalError:
            self._begun = False
            return True, self._error(None)
        if not self._begun:            # nothing asked: a notice, or the server closing on us
            return (False, None) if pg.status == _CONN_OK else (True, self._error(None))
        res = self._res
        while not pg.is_busy():
            last = pg.get_result()
            if last is None:           # the command is complete
                self._res, self._begun = None, False
                if res is not None and res.status == _TUPLES_OK:
                    return True, None
                return True, self._error(res)
            res = last
        self._res = res
        return False, None

