"""Run blocking driver calls on real threads so a gevent worker keeps all its users busy.

A blocking call (psycopg, pyodbc) in a greenlet blocks the whole Locust worker process.
:class:`Offload` runs each call on gevent's hub threadpool (real OS threads; the drivers
release the GIL while they wait), sized for the users, and remembers each user's call in flight
so a connection is never closed under it. The first call of each function runs alone: under
gevent's monkey-patching the import locks are gevent locks, and two pool threads importing at
once (a driver's lazy import on its first connect) can deadlock each other for good.
(The SEND path of blocking drivers is an OS thread per user: harness.load.sendloop.ThreadLoop.)
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
