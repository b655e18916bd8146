"""One user's SEND loop driven by gevent's hub: the cheapest path, for senders that can SEND
without blocking (:meth:`harness.targets.base.Sender.pump`: the embedded target's libpq).

The hub watches the user's connection and its socket-readable callback finishes the SEND,
times it and begins the next one (or arms a timer for the next slot, open loop): per SEND one
callback and the driver's own calls, as pgbench's ``select`` loop, where the green path costs
two greenlet switches and the thread path a GIL hand-over. The user's greenlet takes the
finished SENDs in batches (:meth:`take`), with the interface of
:class:`harness.load.blocking.SendLoop`.

A failed SEND is recorded; a greenlet then backs off (``backoff``, doubling) and SENDs through
the blocking ``send``, which reconnects; after ``give_up_after`` seconds of nothing but errors
the loop gives up (:attr:`gave_up`). In an alternated window (``choose``) each SEND takes the
dialog of the member whose slice the wall clock is in, through a pump of its own.
"""

from __future__ import annotations

import time

import gevent

from harness.load.blocking import wait_until

_perf, _time = time.perf_counter, time.time


class HubLoop:
    def __init__(self, sender, dialog, payload, pacer=None, *, send, backoff=(0.01, 1.0),
                 give_up_after: float = 10.0, choose=None):
        self._sender, self._payload, self._pacer = sender, payload, pacer
        self._dialogs = list(dialog) if choose is not None else [dialog]
        self._choose = choose or (lambda: 0)
        self._pumps: list = []
        self._send = send             # blocking SEND (cooperative for the calling greenlet)
        self._backoff, self._give_up_after = backoff, give_up_after
        self.results: list = []
        self.started = False
        self.gave_up = False
        self.crashed: BaseException | None = None
        self._stopping = False
        self._inflight = False        # a SEND begun and not complete
        self._recovering = None       # the greenlet that backs off and retries after an error
        self._timer = None            # open loop: waiting for the next slot
        self._intended = None         # open loop: the slot (perf_counter) of the SEND in flight
        self._start = 0.0             # when the SEND in flight began (perf_counter)
        self._pump = None
        self._read = self._write = None
        self._loop = gevent.get_hub().loop

    # ------------------------------------------------------------------ the interface of SendLoop
    def start(self) -> "HubLoop":
        self.started = True
        if self._attach():
            self._next()
        else:                          # the sender cannot pump now (a lost connection): recover
            self._recover_later(None)
        return self

    def take(self) -> list:
        """The results completed since the last call, oldest first (call from one greenlet)."""
        out, self.results = self.results, []
        return out

    def stop(self) -> None:
        """End the loop after the SEND in flight; a slot or back-off wait ends now."""
        self._stopping = True
        self.stop_waiting()
        if not self._inflight:         # nothing in flight: let go of the connection now
            self._detach()

    def stop_waiting(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def done(self) -> bool:
        """Has the loop stopped driving the connection (so it may be closed)?"""
        if not self.started:
            return True
        return not self._inflight and self._timer is None and (
            self._recovering is None or self._recovering.dead) and (self._stopping or self.gave_up
                                                                    or self.crashed is not None)

    def wait_done(self, timeout: float, poll: float = 0.005) -> bool:
        """Wait (cooperatively, from a greenlet) until :meth:`done`."""
        return wait_until(self.done, timeout, poll)

    # ------------------------------------------------------------------ driven by the hub
    def _attach(self) -> bool:
        self._detach()
        pumps = [self._sender.pump(d, self._payload) for d in self._dialogs]
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
                    self.stop_waiting()
                    self._detach()
                    self._recover_later(time.monotonic())
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
        self._recover_later(time.monotonic())

    def _crash(self, e: BaseException) -> None:
        self.crashed = e
        self._inflight = False
        self._detach()

    # ------------------------------------------------------------------ after an error
    def _recover_later(self, failing_since: float | None) -> None:
        self._recovering = gevent.spawn(self._recover, failing_since)

    def _recover(self, failing_since: float | None) -> None:
        """Back off, then SEND through ``send`` (it reconnects a lost connection) until one
        succeeds (the hub takes over again) or only errors came for give_up_after."""
        backoff = self._backoff[0]
        send = self._send
        pacer = self._pacer
        while not self._stopping:
            if failing_since is not None:
                if time.monotonic() - failing_since > self._give_up_after:
                    self.gave_up = True
                    return
                gevent.sleep(backoff)
                backoff = min(backoff * 2, self._backoff[1])
                if self._stopping:
                    return
            intended = pacer.wait(gevent.sleep) if pacer is not None else None
            start = time.perf_counter()
            try:
                send(self._dialogs[self._choose()], self._payload)
                exc = None
            except Exception as e:
                exc = e
            end = time.perf_counter()
            self.results.append((time.time(), end - start, exc, None if intended is None else pacer.to_epoch(intended)))
            if exc is None:
                if self._stopping:
                    return
                if self._attach():     # the hub drives the connection again
                    self._next()
                    return
                failing_since = None   # it cannot pump now: go on SENDing from here
                continue
            if failing_since is None:
                failing_since = time.monotonic()
