"""Run blocking driver calls on real threads so a gevent worker keeps all its users busy.

A blocking call (psycopg, pyodbc) inside a greenlet blocks the whole Locust worker process:
with 50 users the worker would make one call at a time. :class:`Offload` runs each call on
gevent's hub threadpool (real OS threads; the drivers release the GIL while they wait) and
the calling greenlet yields until the result is ready. The pool is sized for the users
(``maxsize`` at least the user count); per user, the in-flight call is remembered so a
connection is never closed under a running call.
"""

from __future__ import annotations

import gevent
from gevent.event import AsyncResult

DEFAULT_MAXSIZE = 512


class Offload:
    def __init__(self, maxsize: int = DEFAULT_MAXSIZE):
        self.pool = gevent.get_hub().threadpool
        self.ensure_capacity(maxsize)
        self._inflight: dict[int, AsyncResult] = {}

    def ensure_capacity(self, n: int) -> None:
        if self.pool.maxsize < n:
            self.pool.maxsize = n

    def call(self, owner, fn, *args):
        """Run ``fn(*args)`` on a pool thread; the current greenlet waits (cooperatively)."""
        result = self.pool.spawn(fn, *args)
        self._inflight[id(owner)] = result
        try:
            return result.get()
        finally:
            if self._inflight.get(id(owner)) is result and result.ready():
                del self._inflight[id(owner)]

    def wait_idle(self, owner, timeout: float | None = None) -> bool:
        """Wait for ``owner``'s in-flight call (if any) to finish. True when idle."""
        result = self._inflight.pop(id(owner), None)
        if result is None or result.ready():
            return True
        result.wait(timeout)
        return result.ready()
