"""Run one libpq command from a gevent greenlet without blocking the worker.

libpq in non-blocking mode: send the command, then wait on the connection's socket through
gevent's hub (``wait_read`` / ``wait_write``) until the result is in, so the other users'
greenlets run meanwhile. No thread hop: cheaper per call than offloading to a real thread.
"""

from __future__ import annotations

from typing import Callable


def green_exec(pgconn, send: Callable[[], None]):
    """``send()`` queues one command on ``pgconn`` (e.g. ``pgconn.send_query_prepared(...)``);
    returns the last result (None if the connection failed)."""
    from gevent.socket import wait_read, wait_write

    pgconn.nonblocking = 1
    try:
        send()
        fd = pgconn.socket
        while pgconn.flush():
            wait_write(fd)
        res = None
        while True:
            pgconn.consume_input()
            if pgconn.is_busy():
                wait_read(fd)
                continue
            last = pgconn.get_result()
            if last is None:
                return res
            res = last
    finally:
        pgconn.nonblocking = 0
