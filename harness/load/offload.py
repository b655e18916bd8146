"""Run blocking driver calls on real threads so a gevent worker keeps all its users busy.

A blocking call (psycopg, pyodbc) inside a greenlet blocks the whole Locust worker process:
with 50 users the worker would make one call at a time. :class:`Offload` runs each call on
gevent's hub threadpool (real OS threads; the drivers release the GIL while they wait) and
the calling greenlet yields until the result is ready. The pool is sized for the users
(``maxsize`` at least the user count); per user, the in-flight call is remembered so a
connection is never closed under a running call.

The first call of each function runs alone. Under gevent's monkey-patching, Python's import
locks are gevent locks; two pool threads importing at once (a driver's lazy import on its
first connect, a codec on its first decode) can deadlock each other for good: observed as
6 of 20 Locust users stuck forever in their first connect. Once a function has completed one
call in this process, its lazy imports are done and calls run concurrently.
"""

from __future__ import annotations

import gevent
from gevent.event import AsyncResult
from gevent.lock import BoundedSemaphore

DEFAULT_MAXSIZE = 512


class Offload:
    def __init__(self, maxsize: int = DEFAULT_MAXSIZE):
        self.pool = gevent.get_hub().threadpool
        self.ensure_capacity(maxsize)
        self._inflight: dict[int, AsyncResult] = {}
        self._warm: set = set()               # functions that completed a call
        self._first = BoundedSemaphore(1)     # held (by a greenlet) around a first call

    @staticmethod
    def _key(fn):
        f = getattr(fn, "__func__", fn)       # bound methods: the function, not the instance
        return getattr(f, "__code__", None) or getattr(f, "__qualname__", None) or id(f)

    def ensure_capacity(self, n: int) -> None:
        if self.pool.maxsize < n:
            self.pool.maxsize = n

    def call(self, owner, fn, *args):
        """Run ``fn(*args)`` on a pool thread; the current greenlet waits (cooperatively)."""
        key = self._key(fn)
        if key not in self._warm:
            with self._first:                 # other first callers wait here, in their greenlets
                if key not in self._warm:
                    value = self._run(owner, fn, *args)
                    self._warm.add(key)
                    return value
        return self._run(owner, fn, *args)

    def _run(self, owner, fn, *args):
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
