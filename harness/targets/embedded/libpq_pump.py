"""The embedded SEND as non-blocking libpq steps for a loop driven by gevent's hub
(:class:`LibpqPump`, the embedded sender's ``pump``; :class:`harness.load.sendloop.HubLoop`
drives it)."""

from __future__ import annotations

from psycopg import OperationalError
from psycopg.pq import ConnStatus, ExecStatus

from ..base import SendPump

_TUPLES_OK = ExecStatus.TUPLES_OK
_CONN_OK = ConnStatus.OK


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

