"""Session waits: which of the test's sessions wait now, and on what, several times a second.

The server's wait statistics are cumulative and global: they cannot tell senders from readers,
nor one alternated strategy's slices from another's. A sample of waiting sessions can: its role
comes from :meth:`Telemetry.session_waits` and its instant lies in one member's slice. Each tick
records the mean of its samples (``waiting``, keyed ``role/wait_type``); ``session_waits`` is the
mean number waiting per role and type over the window (10.3 waiting = 10,300 ms of wait per s).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..plan import member_at
from ..spill import Spill
from .base import Collector
from .waits import TOP_WAITS

#: seconds between two samples
INTERVAL_S = 0.1


class SessionWaitThread(threading.Thread):
    """Calls ``session_waits`` every ``interval`` seconds through the sampling context (its
    lock); keeps (epoch, rows): on disk as they come, in the context's ``spill_dir`` (ten a
    second: memory stays the same however long the window), those no tick has taken in memory too. A failed call sets
    :attr:`error` (the collector's next tick reports it) and the sampling goes on: a restarted
    server is sampled again."""

    def __init__(self, ctx, interval: float = INTERVAL_S):
        super().__init__(name="ssbench-session-waits", daemon=True)
        self.ctx, self.interval = ctx, interval
        self.samples = Spill("ssbench-session-waits-", ctx.spill_dir)
        self._untaken: list[tuple[float, list[tuple[str, str, int]]]] = []
        self.supported = True
        self.error: str | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._halt.is_set():
            c0 = time.perf_counter()
            ts = time.time()
            try:
                rows = self.ctx.call(self.ctx.telemetry.session_waits)
                if rows is None:    # the target cannot tell
                    self.supported = False
                    return
                with self._lock:
                    self.samples.append((ts, rows))
                    self._untaken.append((ts, list(rows)))
            except Exception as e:  # reported by the collector's next tick; the sampling goes on
                self.error = f"{type(e).__name__}: {e}"
            self._halt.wait(max(0.0, self.interval - (time.perf_counter() - c0)))

    def take(self, until: float) -> list[tuple[float, list[tuple[str, str, int]]]]:
        """The samples taken before ``until`` that no earlier call has returned."""
        with self._lock:
            out = [s for s in self._untaken if s[0] < until]
            self._untaken = [s for s in self._untaken if s[0] >= until]
        return out

    def between(self, start: float, end: float) -> Iterator[tuple[float, list[list]]]:
        """The samples taken in [start, end), read back in order."""
        for ts, rows in self.samples:
            if start <= ts < end:
                yield ts, rows

    def stop(self) -> None:
        self._halt.set()
        if self.ident is not None:
            self.join(timeout=10)


def mean_waits(samples: Iterable[tuple[float, Sequence[Sequence]]]) -> tuple[dict[str, dict[str, float]], int]:
    """Mean sessions waiting per role and wait type over ``samples`` (a sample without a
    role's waits counts as none waiting), the top TOP_WAITS of each role; and how many samples
    it is the mean of (``samples`` is read once)."""
    sums: dict[str, dict[str, float]] = {}
    k = 0
    for _, rows in samples:
        k += 1
        for role, wait_type, n in rows:
            per = sums.setdefault(role, {})
            per[wait_type] = per.get(wait_type, 0.0) + n
    means = {role: {wt: round(v / (k or 1), 3) for wt, v in sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_WAITS]}
             for role, per in sorted(sums.items())}
    return means, k


class SessionWaitCollector(Collector):
    family = "session_waits"

    def __init__(self):
        self.thread: SessionWaitThread | None = None

    def sample(self, ctx, now):
        """Each tick: the mean sessions waiting over the samples since the last tick, as
        ``waiting`` keyed ``role/wait_type`` (the live ``ssbench_sessions_waiting``)."""
        if self.thread is None:
            self.thread = SessionWaitThread(ctx)
            self.thread.start()
        error, self.thread.error = self.thread.error, None
        if error:
            raise RuntimeError(error)
        samples = self.thread.take(now)
        return [("waiting", f"{role}/{wt}", n) for role, per in mean_waits(samples)[0].items() for wt, n in per.items()]

    def summary_fields(self, ctx, window) -> dict[str, Any]:
        t = self.thread
        if t is None or not t.supported:
            return {}
        samples = t.between(window.start, window.end)
        if window.member is not None:
            slice_seconds, members, mine = window.member
            samples = (s for s in samples if member_at(s[0], slice_seconds, members) == mine)
        means, n = mean_waits(samples)
        if not n:
            return {}
        return {"session_waits": means, "session_wait_samples": n}

    def close(self) -> None:
        if self.thread is not None:
            self.thread.stop()
