"""What the metrics endpoint knows, fed by the repetition: the state behind every exposed series.

Its feeds are the results' own (docs/monitoring.md, "Same numbers as the results"): the
sampler's ticks (the samples of samples.jsonl) give the gauges; the live figures of the Locust
master's merge (:class:`harness.load.merge.LiveFigures`, placed in phases as the summary places
them) give the SEND counters, histograms and percentiles and the workers' gauges; the committed
summary gives the status, the accounting and the end-to-end latency (read from the target after
the drain; querying it every tick would load the server under test).

One :class:`LiveState` per process keeps the repetition in progress and the last one committed
(a scrape after the end still finds its final figures), nothing older. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..load.merge import Buckets, Window, exact_quantiles
from ..results.histogram import Histogram

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
class RepetitionState:
    run_id: str
    permutation: str
    repetition: int
    window: Window = field(default_factory=Window)
    state: str = "preparing"              # preparing, running, draining, ..., complete, aborted
    #: the master's last live figures (harness.load.merge.LiveFigures.snapshot)
    client: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)            # (family, metric, key) -> the last tick's value
    tick_ts: float | None = None
    waits: RecentWaits = field(default_factory=RecentWaits)
    summary: Any = None                                    # the committed RepetitionSummary
    e2e: tuple[Buckets, dict[str, float]] | None = None    # the committed end-to-end latency


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
            return self.run, [r for r in (self.previous, self.current) if r is not None]


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
            rep = self.rep
            rep.samples = {(s.family, s.metric, s.key): s.value for s in samples}
            rep.tick_ts = max((s.ts for s in samples), default=time.time())
            rep.waits.add(samples)

    def client(self, figures: dict) -> None:
        """The master's live figures of the swarm."""
        with self.live.lock:
            self.rep.client, w = figures, self.rep.window
            w.spawn_complete, w.stop_requested = figures.get("spawn_complete"), figures.get("stop_requested")
            w.bucket_seconds = float(figures.get("bucket_seconds") or w.bucket_seconds)

    def committed(self, summary, e2e: Histogram) -> None:
        """The repetition's summary is written: its final figures."""
        with self.live.lock:
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
