"""Backlog drain: the paper's batch-processing scenario (``run.backlog_messages``).

A repetition turns activation off, fills the target queue (the swarm SENDs until
``backlog_messages`` have committed or ``measure_seconds`` pass: the measured window), waits for
the transmission queues to empty, then turns activation on and polls every
:data:`POLL_SECONDS` until the backlog is processed. ``drain_seconds`` and ``drain_rate`` are
what MAX_QUEUE_READERS and RECEIVE TOP(N) govern; docs/matrices.md has the settings.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from .collectors.base import Sample
from .errors import TargetError
from .load.swarm import SwarmResult
from .repetition import Interrupted, Repetition
from .results import Histogram
from .results.model import RepetitionSummary
from .results.summary import latency_summary

log = logging.getLogger(__name__)

POLL_SECONDS = 0.05


@dataclass
class DrainRecord:
    backlog: int = 0                  # messages in the target queue when activation went on
    t_on: float = 0.0                 # epoch seconds: activation on
    t_done: float | None = None       # epoch seconds: first poll with the backlog processed
    series: list[tuple[float, int]] = field(default_factory=list)   # (epoch, processed since t_on)

    @property
    def seconds(self) -> float | None:
        return None if self.t_done is None else max(self.t_done - self.t_on, 1e-6)

    @property
    def rate(self) -> float | None:
        s = self.seconds
        return None if s is None else self.backlog / s


class BacklogRepetition(Repetition):
    """One repetition of the backlog drain (the lifecycle of :class:`Repetition` around it)."""

    drain: DrainRecord | None = None

    def measure(self) -> tuple[SwarmResult, dict[str, float]]:
        """The fill (its window: no warm-up, the fill's seconds), then the drain."""
        with self.lock:
            self.on_status("activation off")
            self.target.set_activation(False)
        res, fill_seconds = self._fill()
        self.drain = self._measure_drain(self._wait_delivered())
        self._add_drain_samples()
        return res, {"warmup_seconds": 0.0, "span_seconds": fill_seconds}

    def _fill_end(self, end: float) -> float:
        """The fill's window ends at the latest when activation came on: the window is whole
        recording buckets and may otherwise reach past the fill's stop into the drain."""
        return end if self.drain is None else min(end, self.drain.t_on)

    def _phases(self, summary: RepetitionSummary) -> tuple[float, float]:
        start, end = super()._phases(summary)
        return start, self._fill_end(end)

    def _e2e_latencies(self, wd, m) -> list[int]:
        """The fill's receipts (activation is off for the whole fill: normally none; seen in CI
        without the cut, the drain's first receipts counted as the fill's)."""
        return self.target.telemetry.e2e_latencies_us(wd.start, self._fill_end(wd.end))

    # ------------------------------------------------------------------ 2. the fill
    def _fill(self) -> tuple[SwarmResult, float]:
        """SEND until the initiators have sent ``run.backlog_messages`` (or the measured window
        ran out); the fill's seconds, from the end of spawning to the stop."""
        want = self.settings.backlog_messages
        self.on_status(f"filling the backlog: {want:,} messages, activation off")

        def enough() -> bool:
            with self.lock:
                return self.target.sent_while_running() >= want

        t0 = time.time()
        res = self.run_swarm(until=enough)
        spawn = res.spawn_complete or t0
        res.spawn_complete = spawn
        stopped = res.stop_requested or time.time()
        return res, max(stopped - spawn, 0.1)

    # ------------------------------------------------------------------ 3. the backlog in place
    def _wait_delivered(self) -> int:
        """Wait until every transmission queue is empty; the target queue's count."""
        deadline = time.monotonic() + self.settings.drain_timeout_seconds
        self.on_status("waiting for the transmission queues to deliver the backlog")
        while True:
            with self.lock:
                c = self.target.counts()
            if not any(i.xmitq for i in c.initiators):
                return c.target_queue
            if time.monotonic() > deadline:
                raise TargetError(f"the backlog was not delivered to the target queue within "
                                  f"{self.settings.drain_timeout_seconds:g} s "
                                  f"({sum(i.xmitq for i in c.initiators)} still in transmission queues)")
            if self.stop_event.wait(0.1):
                raise Interrupted()

    # ------------------------------------------------------------------ 4. the drain
    def _measure_drain(self, backlog: int) -> DrainRecord:
        t = self.target
        with self.lock:
            base = t.telemetry.messages_processed()
        d = DrainRecord(backlog=backlog)
        self.on_status(f"draining a backlog of {backlog:,} messages, activation on")
        with self.lock:
            d.t_on = time.time()
            t.set_activation(True)
        deadline = time.monotonic() + self.settings.drain_timeout_seconds
        last_queue_check = time.monotonic()
        while True:
            with self.lock:
                done = t.telemetry.messages_processed() - base
            now = time.time()
            d.series.append((now, done))
            if done >= backlog:
                d.t_done = now
                return d
            if time.monotonic() - last_queue_check > 1.0:   # poison messages are not processed
                last_queue_check = time.monotonic()
                with self.lock:
                    if t.counts().target_queue == 0:
                        d.t_done = time.time()
                        return d
            if time.monotonic() > deadline:
                log.warning("backlog drain: %d of %d processed when the drain timed out", done, backlog)
                return d
            if self.stop_event.wait(POLL_SECONDS):
                raise Interrupted()

    def _add_drain_samples(self) -> None:
        """The drain over time, in samples.jsonl (family ``drain``): messages processed since
        activation on, the backlog left, and the drain rate over each sample interval."""
        d, step = self.drain, self.settings.sample_interval_seconds
        out = []
        next_ts, prev_ts, prev_n = d.t_on, d.t_on, 0
        for ts, n in d.series:
            out.append(Sample(ts, "drain", "processed", "", float(n)))
            out.append(Sample(ts, "drain", "backlog_left", "", float(max(d.backlog - n, 0))))
            if ts >= next_ts + step or (ts, n) == d.series[-1]:
                if ts > prev_ts:
                    out.append(Sample(ts, "drain", "rate_per_s", "", (n - prev_n) / (ts - prev_ts)))
                prev_ts, prev_n, next_ts = ts, n, ts
        self.sampler.samples.extend(out)

    # ------------------------------------------------------------------ the summary
    def _summarize(self, res, final, warmup, measure, web, m) -> tuple[RepetitionSummary, dict[str, Histogram]]:
        self.receiving = False       # the fill receives nothing by design: not a receive stall
        summary, lat = super()._summarize(res, final, warmup, measure, web, m)
        d = self.drain
        with self.lock:
            e2e_us = self.target.telemetry.e2e_latencies_us(d.t_on, time.time() + 1.0)
        e2e = lat["e2e"] = Histogram().extend_us(e2e_us)
        summary = summary.replace(e2e_latency_ms=latency_summary(e2e), backlog_messages=d.backlog,
                                  drain_seconds=None if d.seconds is None else round(d.seconds, 4),
                                  drain_rate=None if d.rate is None else round(d.rate, 3))
        return summary, lat

