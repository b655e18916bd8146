"""What the metrics endpoint knows, fed by the repetition: the state behind every exposed series.

The feeds are the results' own (docs/monitoring.md, "Same numbers as the results"):

* the **sampler**'s ticks (:class:`harness.collectors.Sampler`'s ``on_tick``: the very samples
  that go to samples.jsonl) give the gauges: queue depths, the receive rate, activation, waits,
  this host's CPU and memory;
* the workers' **recorders**, through the swarm protocol's ``Progress`` (the SENDs each
  recorder took since its previous Progress, exactly, in its completion buckets) give the SEND
  counters and latency histograms; each bucket is placed in the warm-up, the measured window or
  the drain by :func:`harness.load.window.window_buckets`, as the summary places it, so at the
  end the measured window's count and percentiles are the summary's;
* the **summary**, when the repetition is committed, gives its status, its accounting (sent,
  received, lost, undelivered) and the end-to-end latency (read from the target after the
  drain: there is no earlier exact source, and querying it every tick would load the server
  under test).

One :class:`LiveState` per process. It keeps the repetition in progress and the last one
committed (so a scrape after the end still finds its final figures), nothing older: the series
of every other repetition are in Prometheus already. All methods are thread-safe (the sampler
thread, the controller's HTTP threads, the endpoint's scrapes).
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_left
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable

from ..load.protocol import Progress
from ..load.window import in_flight_at_end, window_buckets
from ..results.histogram import Histogram

PHASES = ("warmup", "measure", "drain")
#: while a window's end is not known yet (the web UI's sessions, the backlog fill: they end when
#: stopped), the SENDs of the last seconds are held back: once the stop is known they may turn
#: out to be after the window (a Progress reaches the controller within this, clocks agreeing)
HOLD_S = 2.0
#: latency histogram buckets, seconds (SEND: tens of microseconds to seconds; end to end: more)
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 30.0)
_BOUNDS_US = [round(le * 1e6) for le in LATENCY_BUCKETS]
QUANTILES = (("0.5", 50), ("0.95", 95), ("0.99", 99))
#: the exact percentiles of a phase in progress are recomputed at most this often (one sort of
#: every distinct latency); a committed repetition's are always current
QUANTILES_EVERY_S = 5.0


class Buckets:
    """What a Prometheus histogram needs, kept as the deltas come: counts at
    :data:`LATENCY_BUCKETS` (a value equal to a bound is inside it; the last slot is +Inf) and
    the sum."""

    __slots__ = ("counts", "sum_us")

    def __init__(self):
        self.counts = [0] * (len(_BOUNDS_US) + 1)
        self.sum_us = 0

    def add(self, latencies_us, counts) -> None:
        for us, n in zip(latencies_us, counts):
            self.counts[bisect_left(_BOUNDS_US, us)] += n
            self.sum_us += us * n

    @classmethod
    def of(cls, h: Histogram) -> "Buckets":
        b = cls()
        b.add(list(h.counts), list(h.counts.values()))
        return b

    def cumulative(self) -> tuple[list[tuple[str, float]], float]:
        """``[(le, observations at or below it)]`` ending with ``+Inf``, and the sum in seconds."""
        out, seen = [], 0
        for le, n in zip([repr(le) for le in LATENCY_BUCKETS] + ["+Inf"], self.counts):
            seen += n
            out.append((le, seen))
        return out, self.sum_us / 1e6


def exact_quantiles(h: Histogram) -> dict[str, float]:
    """The nearest-rank :data:`QUANTILES` in seconds (the summaries' percentiles)."""
    return {q: us / 1e6 for (q, _), us in zip(QUANTILES, h.percentiles_us([p for _, p in QUANTILES]))}
TOP_WAITS = 5
#: top waits are averaged over the last ticks: targets flush their wait statistics on their own
#: period (the embedded broker: every second), so a single tick can see none
WAIT_TICKS = 5


class RecentWaits:
    """The top waits (wait time per second) averaged over the last :data:`WAIT_TICKS` ticks:
    the web UI's "Broker metrics" and the endpoint's ``ssbench_wait_time_ms_per_second``."""

    def __init__(self, ticks: int = WAIT_TICKS):
        self._ticks: deque[dict[str, float]] = deque(maxlen=ticks)

    def add(self, samples) -> None:
        """One tick's samples (only the ``waits`` family's ``wait_ms_per_s`` is read)."""
        self._ticks.append({s.key: s.value for s in samples if s.family == "waits" and s.metric == "wait_ms_per_s"})

    def top(self, n: int = TOP_WAITS) -> list[tuple[str, float]]:
        total: dict[str, float] = {}
        for w in self._ticks:
            for k, v in w.items():
                total[k] = total.get(k, 0.0) + v / len(self._ticks)
        return [(k, v) for k, v in sorted(total.items(), key=lambda kv: -kv[1])[:n] if v > 0]

    def clear(self) -> None:
        self._ticks.clear()


@dataclass
class Window:
    """A repetition's windows: ``warmup`` then ``measure`` seconds from the end of spawning
    (``measure`` 0: until the swarm is stopped, as in the web UI)."""

    warmup: float = 0.0
    measure: float = 0.0
    spawn_complete: float | None = None
    stop_requested: float | None = None

    def buckets(self, bucket_seconds: float) -> tuple[int, int | None] | None:
        """The measured window in recording buckets (b1 None: not ended yet); None before the
        end of spawning is known."""
        if self.spawn_complete is None:
            return None
        start = self.spawn_complete + self.warmup
        end = start + self.measure if self.measure > 0 else self.stop_requested
        if end is None:
            return math.ceil(start / bucket_seconds - 1e-9), None
        return window_buckets(start, end, bucket_seconds)


def bucket_phase(b: int, bounds: tuple[int, int | None]) -> str:
    b0, b1 = bounds
    return "warmup" if b < b0 else ("measure" if b1 is None or b < b1 else "drain")


@dataclass
class RepetitionState:
    run_id: str
    permutation: str
    repetition: int
    window: Window = field(default_factory=Window)
    state: str = "preparing"              # preparing, running, draining, ..., complete, aborted
    bucket_seconds: float | None = None
    sends: Counter = field(default_factory=Counter)        # (initiator, worker, phase) -> SENDs
    errors: Counter = field(default_factory=Counter)       # (initiator, worker, phase) -> failed
    latency: dict = field(default_factory=dict)            # (initiator, phase) -> Buckets
    corrected: dict = field(default_factory=dict)          # open loop: as latency
    exact: dict = field(default_factory=dict)              # phase -> Histogram (every initiator)
    _quantiles: dict = field(default_factory=dict)         # phase -> (SENDs, when, quantiles)
    pending: list = field(default_factory=list)            # Progress deltas before the window is known
    slow: list = field(default_factory=list)               # the workers' slow SENDs [start epoch, us]
    samples: dict = field(default_factory=dict)            # (family, metric, key) -> the last tick's value
    tick_ts: float | None = None
    waits: RecentWaits = field(default_factory=RecentWaits)
    workers: dict = field(default_factory=dict)            # (initiator, worker) -> (host, users, last probe sample)
    summary: Any = None                                    # the committed RepetitionSummary
    e2e: tuple[Buckets, dict[str, float]] | None = None    # the committed end-to-end latency
    clock: Callable[[], float] = time.time

    @property
    def labels(self) -> dict[str, str]:
        return {"run_id": self.run_id, "permutation": self.permutation, "repetition": str(self.repetition)}

    def phase_at(self, ts: float | None) -> str:
        """The phase of a moment, as samples.jsonl gives it (bucket-aligned when known)."""
        bs = self.bucket_seconds or 0.1
        bounds = self.window.buckets(bs)
        if ts is None or bounds is None:
            return "warmup"
        b0, b1 = bounds
        return "warmup" if ts < b0 * bs else ("measure" if b1 is None or ts < b1 * bs else "drain")

    def add_progress(self, p: Progress) -> None:
        self.bucket_seconds = float(p.bucket_seconds)
        if p.spawn_complete is not None:
            self.window.spawn_complete = float(p.spawn_complete)
        if p.stop_requested is not None:
            self.window.stop_requested = float(p.stop_requested)
        slot = (int(p.initiator), int(p.worker))
        old = self.workers.get(slot, (p.host, 0, None))
        self.workers[slot] = (p.host or old[0], int(p.users), p.samples[-1] if p.samples else old[2])
        self.pending.append((slot, p.buckets, p.errors, p.corrected))
        self.slow.extend(p.slow)
        self.settle()

    def settle(self) -> None:
        """Place the pending deltas in their phases, once the window is known (while its end is
        not, the buckets of the last :data:`HOLD_S` seconds wait)."""
        bs = self.bucket_seconds or 0.1
        bounds = self.window.buckets(bs)
        if bounds is None:
            return
        hold = int((self.clock() - HOLD_S) / bs) if bounds[1] is None else None
        pending, self.pending = self.pending, []
        for (initiator, worker), buckets, errors, corrected in pending:
            if hold is not None:
                held = tuple({b: v for b, v in d.items() if int(b) >= hold} for d in (buckets, errors, corrected))
                if any(held):
                    self.pending.append(((initiator, worker), *held))
                buckets, errors, corrected = ({b: v for b, v in d.items() if int(b) < hold}
                                              for d in (buckets, errors, corrected))
            for b, (lat, counts) in buckets.items():
                phase = bucket_phase(int(b), bounds)
                self.latency.setdefault((initiator, phase), Buckets()).add(lat, counts)
                self.exact.setdefault(phase, Histogram()).counts.update(dict(zip(lat, counts)))
                self.sends[(initiator, worker, phase)] += sum(counts)
            for b, n in errors.items():
                self.errors[(initiator, worker, bucket_phase(int(b), bounds))] += int(n)
            for b, (lat, counts) in corrected.items():
                self.corrected.setdefault((initiator, bucket_phase(int(b), bounds)), Buckets()).add(lat, counts)

    def quantiles(self, phase: str) -> dict[str, float] | None:
        """The exact percentiles of the phase's SENDs so far (every initiator), recomputed at
        most every :data:`QUANTILES_EVERY_S` while the repetition runs; None without SENDs."""
        h, n = self.exact.get(phase), sum(n for (_, _, ph), n in self.sends.items() if ph == phase)
        flying = self.in_flight() if phase == "measure" else None
        if flying is not None and flying.count:      # as the summary's send_latency_ms
            h, n = Histogram().merge(h or Histogram()).merge(flying), n + flying.count
        if h is None:
            return None
        now = self.clock()
        cached = self._quantiles.get(phase)
        if cached is None or (cached[0] != n and (self.summary is not None or now - cached[1] >= QUANTILES_EVERY_S)):
            cached = self._quantiles[phase] = (n, now, exact_quantiles(h))
        return cached[2]

    def in_flight(self) -> Histogram | None:
        """The slow SENDs in flight across the measured window's end (None: its end not known)."""
        bs = self.bucket_seconds or 0.1
        bounds = self.window.buckets(bs)
        if not self.slow or bounds is None or bounds[1] is None:
            return None
        h = Histogram()
        for us in in_flight_at_end(self.slow, bounds[0], bounds[1], bs):
            h.add(us)
        return h

    def add_tick(self, samples) -> None:
        self.samples = {(s.family, s.metric, s.key): s.value for s in samples}
        self.tick_ts = max((s.ts for s in samples), default=time.time())
        self.waits.add(samples)


@dataclass
class RunInfo:
    run_id: str
    matrix: str = ""
    target: str = ""
    command: str = ""
    progress: Any = None          # harness.progress.Progress: done, total, ETA (None: not a matrix run)
    committed: int = 0            # repetitions committed by this process
    lost: int = 0                 # messages lost over them


class LiveState:
    """The endpoint's state; see the module's docstring. ``command`` names the ssbench command
    (``run``, ``bench``, ``saturate``, ``web``) and ``target`` the target's label."""

    def __init__(self, command: str = "", target: str = ""):
        self.lock = threading.RLock()
        self.command, self.target = command, target
        self.run: RunInfo | None = None
        self.current: RepetitionState | None = None
        self.previous: RepetitionState | None = None   # the last committed one

    def begin_run(self, run_id: str, matrix: str = "", target: str = "", progress=None) -> None:
        """A run (a matrix run, a saturation search, a web UI session) on ``target`` (its
        label): ``progress`` is the runner's :class:`harness.progress.Progress` (done, total,
        ETA), read at each scrape."""
        with self.lock:
            self.target = target or self.target
            self.run = RunInfo(run_id, matrix=matrix, target=self.target, command=self.command, progress=progress)

    def repetition(self, run_id: str, permutation: str, repetition: int) -> "RepetitionFeed":
        with self.lock:
            if self.run is None or self.run.run_id != run_id:
                self.run = RunInfo(run_id, target=self.target, command=self.command)
            self.current = RepetitionState(run_id, permutation, repetition)
            return RepetitionFeed(self, self.current)

    def snapshot(self) -> tuple[RunInfo | None, list[RepetitionState]]:
        """The run and the repetitions to expose (the last committed first, then the current)."""
        with self.lock:
            reps = [r for r in (self.previous, self.current) if r is not None]
            for r in reps:
                r.settle()          # what was held back and is old enough now
            return self.run, reps


class RepetitionFeed:
    """What a :class:`harness.repetition.Repetition` tells the endpoint about itself."""

    def __init__(self, live: LiveState, rep: RepetitionState):
        self.live, self.rep = live, rep

    def window(self, warmup: float, measure: float) -> None:
        with self.live.lock:
            self.rep.window.warmup, self.rep.window.measure = float(warmup), float(measure)

    def status(self, text: str) -> None:
        """The repetition's progress text ("preparing (...)", "draining: ..."): its first word."""
        with self.live.lock:
            self.rep.state = text.split(":")[0].split(" ")[0] or self.rep.state

    def tick(self, samples) -> None:
        with self.live.lock:
            self.rep.add_tick(samples)

    def progress(self, p: Progress) -> None:
        with self.live.lock:
            self.rep.add_progress(p)

    def committed(self, summary, e2e: Histogram) -> None:
        """The repetition's summary is written: its final figures."""
        with self.live.lock:
            w, window = self.rep.window, getattr(summary, "window", None)
            if w.measure <= 0 and w.stop_requested is None and window is not None:
                w.stop_requested = window.measure_end    # the end the summary used: nothing held back
            self.rep.settle()
            self.rep.summary, self.rep.state = summary, "complete"
            self.rep.e2e = (Buckets.of(e2e), exact_quantiles(e2e)) if e2e.count else None
            run = self.live.run
            if run is not None:
                run.committed += 1
                run.lost += int(summary.messages_lost)
            if self.live.current is self.rep:
                self.live.previous, self.live.current = self.rep, None

    def aborted(self) -> None:
        """Not committed (failed, interrupted): shown as ``aborted`` until the next repetition
        begins (its figures describe no result)."""
        with self.live.lock:
            self.rep.state = "aborted"
