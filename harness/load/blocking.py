"""Run blocking driver calls on real threads so a gevent worker keeps all its users busy.

A blocking call (psycopg, pyodbc) in a greenlet blocks the whole Locust worker process.
:class:`Offload` runs each call on gevent's hub threadpool (real OS threads; the drivers
release the GIL while they wait), sized for the users, and remembers each user's call in flight
so a connection is never closed under it. The first call of each function runs alone: under
gevent's monkey-patching the import locks are gevent locks, and two pool threads importing at
once (a driver's lazy import on its first connect) can deadlock each other for good.

:class:`SendLoop` is the SEND path of blocking drivers: one OS thread per user for the whole
window, results handed to the user's greenlet in batches: a GIL hand-over and a queue append
per SEND instead of a threadpool hop (docs/findings/harness-ceiling.md measures both).
"""

from __future__ import annotations

import collections
import time

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


# --------------------------------------------------------------------------- per-user send loop

# Locust monkey-patches threading, so ``threading.Thread`` would be a greenlet: the loop's
# thread and its locks are the OS's own (harness.os_threads)
from harness.os_threads import allocate_lock as _allocate_lock, start_new_thread as _start_new_thread  # noqa: E402


class SendLoop:
    """One user's SEND loop on its own OS thread for the whole window (blocking drivers).

    The thread calls ``send(dialog, payload)`` in a closed loop (or at the slots of ``pacer``,
    open loop), times each SEND and appends ``(end_epoch, elapsed_s, exc, intended_epoch)``
    to a queue; the user's greenlet takes them in batches (:meth:`take`) and reports them to
    Locust and the recorder. No greenlet-to-thread hop per SEND: the driver call, its timing and
    the queue append run on the thread, which holds the GIL only for that Python code.

    A failing SEND is reported, then the thread backs off (``backoff``: first and maximum
    seconds, doubling) and gives up (:attr:`gave_up`) after ``give_up_after`` seconds of nothing
    but errors. :meth:`stop` ends the loop after the SEND in flight (a pacing or back-off wait
    is cut short); :meth:`done` says the thread has left the loop, so its connection may close.
    """

    def __init__(self, send, dialog, payload, pacer=None, *, backoff=(0.01, 1.0),
                 give_up_after: float = 10.0, choose=None):
        # an alternated window: ``dialog`` is one dialog per member and each SEND takes the one
        # ``choose()`` names (harness.load.spec.SwarmSpec.alternation)
        self._send, self._dialog, self._payload, self._pacer = send, dialog, payload, pacer
        self._choose = choose
        self._backoff, self._give_up_after = backoff, give_up_after
        self.results: collections.deque = collections.deque()
        self.gave_up = False
        self.crashed: BaseException | None = None
        self._stopping = False
        self._wake = _allocate_lock()     # held while running; released by stop() to cut waits
        self._wake.acquire()
        self._done = _allocate_lock()     # held until the thread leaves its loop
        self._done.acquire()
        self.started = False

    def start(self) -> "SendLoop":
        self.started = True
        _start_new_thread(self._run, ())
        return self

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self._wake.acquire(True, seconds):
            self._wake.release()          # stopping: leave it released for later waits

    def _run(self) -> None:
        perf, now = time.perf_counter, time.time
        send, dialog, payload, pacer = self._send, self._dialog, self._payload, self._pacer
        choose, dialogs = self._choose, self._dialog
        put = self.results.append
        failing_since = None
        backoff = self._backoff[0]
        try:
            while not self._stopping:
                intended = None
                if pacer is not None:
                    intended = pacer.wait(self._sleep)
                    if self._stopping:
                        break
                if choose is not None:
                    dialog = dialogs[choose()]
                start = perf()
                try:
                    send(dialog, payload)
                    exc = None
                except Exception as e:  # the broker refused the SEND: reported, counted, not raised
                    exc = e
                end = perf()
                put((now(), end - start, exc, None if intended is None else pacer.to_epoch(intended)))
                if exc is None:
                    failing_since = None
                    continue
                t = time.monotonic()
                if failing_since is None:
                    failing_since, backoff = t, self._backoff[0]
                elif t - failing_since > self._give_up_after:
                    self.gave_up = True
                    break
                self._sleep(backoff)
                backoff = min(backoff * 2, self._backoff[1])
        except BaseException as e:  # pragma: no cover - a bug in the loop: surfaced by the greenlet
            self.crashed = e
        finally:
            self._done.release()

    def take(self) -> list:
        """The results completed since the last call, oldest first (call from one greenlet)."""
        q, out = self.results, []
        pop = q.popleft
        for _ in range(len(q)):
            out.append(pop())
        return out

    def stop(self) -> None:
        if not self._stopping:
            self._stopping = True
            self._wake.release()

    def done(self) -> bool:
        if not self.started:
            return True
        if self._done.acquire(False):
            self._done.release()
            return True
        return False

    def wait_done(self, timeout: float, poll: float = 0.005) -> bool:
        """Wait (cooperatively, from a greenlet) for the thread to leave its loop."""
        return wait_until(self.done, timeout, poll)


def wait_until(done, timeout: float, poll: float = 0.005) -> bool:
    """Poll ``done()`` from a greenlet, yielding to the hub in between, for up to ``timeout``
    seconds; its last answer."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        gevent.sleep(poll)
    return True
