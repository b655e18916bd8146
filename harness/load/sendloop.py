"""One user's SEND loop for the whole window, with two ways to wait (harness.load.locustfile
chooses): :class:`ThreadLoop`, an OS thread per user calling the blocking ``send`` (any driver
that releases the GIL: pyodbc), and :class:`HubLoop`, gevent's hub driving the connection's
non-blocking steps (:meth:`harness.targets.base.Sender.pump`: the embedded target's libpq), the
cheapest path (docs/findings/harness-ceiling.md measures both).

Both share :class:`SendLoop`: the finished SENDs ``(end epoch, elapsed s, exception or None,
intended epoch or None)`` handed to the user's greenlet in batches (:meth:`SendLoop.take`),
open-loop pacing (:mod:`harness.load.pacing`), the dialog of an alternated window's member
(``choose``), and the blocking SENDs with back-off after an error (``waits``:
:func:`backoff_waits`, the user's connect's too), which give up (:attr:`SendLoop.gave_up`)
when the waits end: the thread loop's whole life, the hub loop's recovery (the blocking
``send`` reconnects a lost connection; then the hub drives it again).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator

import gevent

# Locust monkey-patches threading, so ``threading.Thread`` would be a greenlet: the loop's
# thread and its locks are the OS's own (harness.os_threads)
from harness.os_threads import allocate_lock, start_new_thread

_perf, _time = time.perf_counter, time.time


def backoff_waits(first: float = 0.01, ceiling: float = 1.0, give_up_after: float = 10.0) -> Iterator[float]:
    """The waits after consecutive failures (a user's connect, its SENDs): doubling from
    ``first`` up to ``ceiling`` seconds; they end (give up) ``give_up_after`` seconds after
    the first."""
    since, wait = time.monotonic(), first
    while time.monotonic() - since <= give_up_after:
        yield wait
        wait = min(wait * 2, ceiling)


class SendLoop:
    """The part of a SEND loop that does not depend on how it waits (the module's docstring).
    :meth:`stop` ends the loop after the SEND in flight (a slot or back-off wait ends now);
    :meth:`done` says it has let go of the connection, which may then close."""

    def __init__(self, send, dialog, payload, pacer=None, *, waits=backoff_waits, choose=None):
        # an alternated window: ``dialog`` is one dialog per member and each SEND takes the one
        # ``choose()`` names (harness.load.spec.SwarmSpec.alternation)
        self._send, self._payload, self._pacer = send, payload, pacer
        self._dialogs = list(dialog) if choose is not None else [dialog]
        self._choose = choose
        self._waits = waits
        self.results: collections.deque = collections.deque()
        self.started = self.gave_up = self._stopping = False
        self.crashed: BaseException | None = None

    def start(self) -> "SendLoop":
        self.started = True
        self._begin_loop()
        return self

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
            self._cut_waits()

    def wait_done(self, timeout: float, poll: float = 0.005) -> bool:
        """Wait (cooperatively, from a greenlet) until :meth:`done`; its last answer."""
        deadline = time.monotonic() + timeout
        while not self.done():
            if time.monotonic() > deadline:
                return False
            gevent.sleep(poll)
        return True

    def _blocking_sends(self, sleep, failing: bool = False, resumed=None) -> None:
        """SEND through ``send`` until the loop stops, gives up, or ``resumed()`` says, after a
        SEND that succeeded, that the hub drives the connection again. ``sleep(seconds)``: the
        strategy's wait; ``failing``: after an error, so back off first."""
        perf, now = _perf, _time
        send, payload, pacer = self._send, self._payload, self._pacer
        dialogs, choose = self._dialogs, self._choose
        waits = self._waits() if failing else None
        while not self._stopping:
            if waits is not None:
                wait = next(waits, None)
                if wait is None:
                    self.gave_up = True
                    return
                sleep(wait)
                if self._stopping:
                    return
            intended = pacer.wait(sleep) if pacer is not None else None
            if self._stopping:
                return
            start = perf()
            try:
                send(dialogs[choose()] if choose is not None else dialogs[0], payload)
                exc = None
            except Exception as e:  # the broker refused the SEND: reported, counted, not raised
                exc = e
            end = perf()
            # (self.results looked up each time: the hub loop's take() replaces it)
            self.results.append((now(), end - start, exc, None if intended is None else pacer.to_epoch(intended)))
            if exc is not None:
                waits = waits or self._waits()
            elif resumed is not None and resumed():
                return
            else:
                waits = None


class ThreadLoop(SendLoop):
    """SENDs on an OS thread of the user's own for the whole window: a GIL hand-over and a
    queue append per SEND instead of a threadpool hop; the thread holds the GIL only for the
    Python code around each driver call."""

    def __init__(self, send, dialog, payload, pacer=None, **kw):
        super().__init__(send, dialog, payload, pacer, **kw)
        self._wake = allocate_lock()     # held while running; released by stop() to cut waits
        self._wake.acquire()
        self._done = allocate_lock()     # held until the thread leaves its loop
        self._done.acquire()

    def _begin_loop(self) -> None:
        start_new_thread(self._run, ())

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self._wake.acquire(True, seconds):
            self._wake.release()          # stopping: leave it released for later waits

    def _run(self) -> None:
        try:
            self._blocking_sends(self._sleep)
        except BaseException as e:  # pragma: no cover - a bug in the loop: surfaced by the greenlet
            self.crashed = e
        finally:
            self._done.release()

    def _cut_waits(self) -> None:
        self._wake.release()

    def done(self) -> bool:
        if not self.started:
            return True
        if self._done.acquire(False):
            self._done.release()
            return True
        return False


class HubLoop(SendLoop):
    """SENDs driven by gevent's hub: it watches the user's connection and its socket-readable
    callback finishes the SEND, times it and begins the next one (or arms a timer for the next
    slot, open loop): per SEND one callback and the driver's own calls, as pgbench's ``select``
    loop. ``pump(dialog, payload)``: the sender's non-blocking steps (None: not now); ``send``:
    the blocking SEND after an error (cooperative for the calling greenlet), which reconnects."""

    def __init__(self, send, dialog, payload, pacer=None, *, pump, **kw):
        super().__init__(send, dialog, payload, pacer, **kw)
        self._make_pump = pump
        self._choose = self._choose or (lambda: 0)
        self.results: list = []       # one thread (the hub's callbacks, the user's greenlet): take() swaps it
        self._pumps: list = []
        self._inflight = False        # a SEND begun and not complete
        self._recovering = None       # the greenlet that backs off and retries after an error
        self._timer = None            # open loop: waiting for the next slot
        self._intended = None         # open loop: the slot (perf_counter) of the SEND in flight
        self._start = 0.0             # when the SEND in flight began (perf_counter)
        self._pump = None
        self._read = self._write = None
        self._loop = gevent.get_hub().loop

    def _begin_loop(self) -> None:
        if self._attach():
            self._next()
        else:                          # the sender cannot pump now (a lost connection): recover
            self._recover_later(False)

    def take(self) -> list:
        out, self.results = self.results, []
        return out

    def _cut_waits(self) -> None:
        self._stop_timer()
        if not self._inflight:         # nothing in flight: let go of the connection now
            self._detach()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def done(self) -> bool:
        if not self.started:
            return True
        return not self._inflight and self._timer is None and (
            self._recovering is None or self._recovering.dead) and (self._stopping or self.gave_up
                                                                    or self.crashed is not None)

    # ------------------------------------------------------------------ driven by the hub
    def _attach(self) -> bool:
        self._detach()
        pumps = [self._make_pump(d, self._payload) for d in self._dialogs]
        if any(p is None for p in pumps):
            return False
        self._pumps = pumps
        pump = self._pump = pumps[0]
        self._read = self._loop.io(pump.fileno, 1)
        self._write = self._loop.io(pump.fileno, 2)
        self._read.start(self._on_readable)       # stays armed while the hub drives the connection
        return True

    def _detach(self) -> None:
        for w in (self._read, self._write):
            if w is not None:
                w.stop()
                w.close()
        self._read = self._write = self._pump = None
        self._pumps = []

    def _next(self) -> None:
        """Begin the next SEND, or arm a timer for its slot (open loop)."""
        if self._stopping:
            self._detach()
            return
        self._intended = None
        pacer = self._pacer
        if pacer is not None:
            t = pacer.next_slot()
            self._intended = t
            delay = t - time.perf_counter()
            if delay > 0:
                self._arm(delay)
                return
            pacer.late += 1
        self._begin()

    def _arm(self, delay: float) -> None:
        # libev measures a timer from the loop's cached time, which lags behind the clock on a
        # busy loop: refreshed first, and _on_slot re-arms a timer that still fired early, so a
        # SEND never begins before its slot
        self._loop.update_now()
        self._timer = self._loop.timer(delay)
        self._timer.start(self._on_slot)

    def _on_slot(self) -> None:
        self._timer = None
        if self._stopping:
            self._detach()
            return
        early = self._intended - time.perf_counter()
        if early > 0:
            self._arm(early)
            return
        self._begin()

    def _begin(self) -> None:
        self._inflight = True
        self._start = time.perf_counter()
        try:
            self._pump = self._pumps[self._choose()]
            if self._pump.begin():
                self._write.start(self._on_writable)
        except Exception as e:
            self._complete(e)
        except BaseException as e:  # pragma: no cover - a bug: surfaced by the user's greenlet
            self._crash(e)

    def _on_writable(self) -> None:
        try:
            if not self._pump.flush():
                self._write.stop()
        except Exception as e:
            self._write.stop()
            self._complete(e)
        except BaseException as e:  # pragma: no cover
            self._crash(e)

    def _on_readable(self) -> None:
        try:
            complete, exc = self._pump.read()
            if not self._inflight:     # nothing asked: a notice, or the connection closing
                if exc is not None:
                    self._stop_timer()
                    self._detach()
                    self._recover_later(True)
                return
            if not complete:
                return
            if exc is None and self._pacer is None and not self._stopping:
                # the usual case, closed loop: record this SEND and begin the next one at once
                end = _perf()
                self.results.append((_time(), end - self._start, None, None))
                self._start = _perf()
                self._pump = self._pumps[self._choose()]
                if self._pump.begin():
                    self._write.start(self._on_writable)
                return
            self._complete(exc)
        except Exception as e:         # pump.begin() failed: the connection is gone
            self._complete(e)
        except BaseException as e:  # pragma: no cover
            self._crash(e)

    def _complete(self, exc) -> None:
        end = time.perf_counter()
        self._inflight = False
        intended = self._intended
        self.results.append((time.time(), end - self._start, exc,
                             None if intended is None else self._pacer.to_epoch(intended)))
        if exc is None:
            self._next()
            return
        self._detach()
        self._recover_later(True)

    def _crash(self, e: BaseException) -> None:
        self.crashed = e
        self._inflight = False
        self._detach()

    # ------------------------------------------------------------------ after an error
    def _recover_later(self, failing: bool) -> None:
        """Back off and SEND through the blocking ``send`` until one succeeds and the hub can
        drive the connection again (or the loop gives up), on a greenlet of its own."""
        self._recovering = gevent.spawn(self._blocking_sends, gevent.sleep, failing, self._resumed)

    def _resumed(self) -> bool:
        """After a blocking SEND that succeeded: is the hub driving the connection again? (Not
        while stopping; not when the sender cannot pump now: the blocking SENDs go on.)"""
        if self._stopping or not self._attach():
            return False
        self._next()
        return True
