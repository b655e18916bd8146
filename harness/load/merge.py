"""The workers' deltas merged once, in the Locust master: every view of a SEND reads this merge.

Each worker streams its recorder's deltas (:class:`harness.load.protocol.Delta`, one every
sample interval; the last one ``final``). The master (:mod:`harness.load.master`) adds each to
the swarm's :class:`SwarmMerge`, once, and every view is fed from there:

* the slot's recording (:class:`SlotRecording`): the file the controller writes and the
  summaries are made of (:func:`harness.load.window.merge_workers`);
* Locust's own statistics, so its web UI, console and CSVs show the same SENDs
  (:func:`harness.load.locust_stats.log_delta`);
* when the plan asks (the metrics endpoint, the web UI), the live figures
  (:class:`LiveFigures`): each bucket placed in the warm-up, the measured window or after it
  by the function that cuts the recordings for the summary
  (:func:`harness.load.window.window_buckets`), so at the end the measured window's count,
  histogram and exact percentiles are the summary's. The master posts them to the controller
  with its heartbeat (the Prometheus endpoint and ssbench's web table read them there,
  :mod:`harness.metrics.live`).

Locust's own model: workers report, the master merges once, every view reads the merge.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass
from itertools import chain, repeat
from operator import mul
from typing import Callable

from harness.results.histogram import Histogram
from harness.spill import Spill

from .protocol import Delta, SwarmPlan, slot_name
from .window import in_flight_at_end, window_buckets

PHASES = ("warmup", "measure", "drain")
#: latency histogram buckets, seconds (SEND: tens of microseconds to seconds; end to end: more)
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 30.0)
_BOUNDS_US = [round(le * 1e6) for le in LATENCY_BUCKETS]
QUANTILES = (("0.5", 50), ("0.95", 95), ("0.99", 99))
#: the exact percentiles of a phase in progress are recomputed at most this often (one sort of
#: every distinct latency); the final figures' are always current
QUANTILES_EVERY_S = 5.0


def expanded(counts: dict):
    """``{value: n}`` as an iterable of each value n times: counted by Counter's C code."""
    return chain.from_iterable(map(repeat, counts.keys(), counts.values()))


class Buckets:
    """What a Prometheus histogram needs: counts at :data:`LATENCY_BUCKETS` (a value equal to a
    bound is inside it; the last slot is +Inf) and the sum of the latencies."""

    __slots__ = ("counts", "sum_us")

    def __init__(self, counts: list[int] | None = None, sum_us: int = 0):
        self.counts = list(counts) if counts else [0] * (len(_BOUNDS_US) + 1)
        self.sum_us = sum_us

    def add(self, counts: dict) -> None:
        """``counts``: {latency us: observations}."""
        slots = Counter(chain.from_iterable(map(repeat, map(bisect_left, repeat(_BOUNDS_US), counts.keys()),
                                                counts.values())))
        for i, n in slots.items():
            self.counts[i] += n
        self.sum_us += sum(map(mul, counts.keys(), counts.values()))

    @classmethod
    def of(cls, h: Histogram) -> "Buckets":
        b = cls()
        b.add(h.counts)
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


def add_buckets(into: dict, part: dict) -> None:
    """Add ``part`` (bucket -> {latency us: n}) into ``into``: a bucket new to it is taken as
    it is (the usual case: a bucket travels once), one it has is added to."""
    for b, c in part.items():
        have = into.get(b)
        if have is None:
            into[b] = c
        else:
            for us, n in c.items():
                have[us] = have.get(us, 0) + n


class SlotRecording:
    """A worker slot's recording, merged from its deltas (in order: :attr:`seq` is the last).

    Its per-bucket parts (``buckets``, ``errors``, ``corrected``, ``priority``) and the probe's
    ``samples`` grow with the window (a bucket every 0.1 s): each delta's go to a spill file as
    it comes, so the master's memory stays the same however long the window (docs/findings/
    memory-soak.md); :meth:`to_json` reads them back, merged."""

    def __init__(self, initiator: int, worker: int):
        self.initiator, self.worker, self.seq, self.final = initiator, worker, 0, False
        self.bucket_seconds, self.host, self.pid, self.cut_at_stop = 0.1, "", 0, 0
        self.user_spans: dict = {}
        self.error_kinds, self.slow = Counter(), []     # bounded by the recorder (MAX_ERROR_KINDS, MAX_SLOW_SENDS)
        self._spill = Spill("ssbench-recording-")   # gone with this object

    def add(self, d: Delta) -> None:
        self.seq, self.final = d.seq, d.final
        self.bucket_seconds, self.host, self.pid = float(d.bucket_seconds), d.host, d.pid
        self._spill.append([d.buckets, d.errors, d.corrected, d.priority, d.samples])
        self.slow += d.slow
        self.error_kinds.update(d.error_kinds)
        if d.final:
            self.user_spans, self.cut_at_stop = d.user_spans, d.sends_cut_at_stop

    def parts(self) -> tuple[dict, Counter, dict, dict, list]:
        """The spilled parts merged: buckets, errors, corrected, priority (as Delta's), samples."""
        buckets, errors, corrected, priority, samples = {}, Counter(), {}, {}, []
        for b, e, c, p, s in self._spill:
            add_buckets(buckets, b)
            errors.update(e)
            add_buckets(corrected, c)
            for name, part in p.items():
                add_buckets(priority.setdefault(name, {}), part)
            samples += s
        return buckets, errors, corrected, priority, samples

    def to_json(self, swarm_id: str) -> dict:
        """The recording file (``worker-i<K>-w<W>.json``): what merge_workers reads."""
        buckets, errors, corrected, priority, samples = self.parts()
        return {"initiator": self.initiator, "worker": self.worker, "pid": self.pid, "host": self.host,
                "swarm_id": swarm_id, "bucket_seconds": self.bucket_seconds, "buckets": buckets,
                "errors": errors, "error_samples": list(self.error_kinds), "users": self.user_spans,
                "samples": samples, **{k: v for k, v in (("sends_cut_at_stop", self.cut_at_stop), ("slow", self.slow),
                                                         ("corrected", corrected), ("priority", priority)) if v}}


@dataclass
class Window:
    """A swarm's windows: ``warmup`` then ``measure`` seconds from the end of spawning
    (``measure`` 0: until the swarm is stopped), on the recording buckets as the summaries cut
    them (:func:`harness.load.window.window_buckets`), once the master knows the end of spawning
    and the stop."""

    warmup: float = 0.0
    measure: float = 0.0
    spawn_complete: float | None = None
    stop_requested: float | None = None
    bucket_seconds: float = 0.1

    def bounds(self) -> tuple[int, int | None] | None:
        """The measured window in recording buckets (b1 None: not ended yet); None before the
        end of spawning is known."""
        if self.spawn_complete is None:
            return None
        start = self.spawn_complete + self.warmup
        end = start + self.measure if self.measure > 0 else self.stop_requested
        if end is None:
            return math.ceil(start / self.bucket_seconds - 1e-9), None
        return window_buckets(start, end, self.bucket_seconds)

    def phase_at(self, ts: float | None) -> str:
        """The phase of a moment, as samples.jsonl gives it (warm-up while the end of spawning
        is not known)."""
        bounds = self.bounds()
        return "warmup" if ts is None or bounds is None else _phase(ts / self.bucket_seconds, bounds)


class LiveFigures:
    """A swarm's SENDs by phase of its :class:`Window`, as the deltas come: SENDs and errors
    per worker, latency buckets per initiator, the exact histogram of each phase (for its
    percentiles), the slow SENDs, each worker's host, users and last probe sample."""

    def __init__(self, warmup: float, measure: float, clock: Callable[[], float] = time.time):
        self.w, self.clock = Window(float(warmup), float(measure)), clock
        self.sends: Counter = Counter()        # (initiator, worker, phase) -> SENDs
        self.errors: Counter = Counter()       # (initiator, worker, phase) -> failed
        self.latency: dict = {}                # (initiator, phase) -> Buckets
        self.corrected: dict = {}              # open loop: as latency
        self.exact: dict[str, Histogram] = {}  # phase -> every initiator's SENDs
        self.slow: list = []
        self.workers: dict = {}                # (initiator, worker) -> [host, users, last probe sample]
        self.pending: list = []                # deltas before the window is known
        self._quantiles: dict = {}             # phase -> (SENDs, when, quantiles)
        self.changed = True

    def window(self, spawn_complete: float | None, stop_requested: float | None) -> None:
        """The swarm's facts as the master knows them."""
        if spawn_complete is not None:
            self.w.spawn_complete = float(spawn_complete)
        if stop_requested is not None:
            self.w.stop_requested = float(stop_requested)

    def place(self, slots) -> None:
        """The swarm's placed slots, ``(initiator, worker, host, users)``: their counters are
        exposed from zero before their first delta, so a scraper's rate sees the first SENDs."""
        for i, w, host, users in slots:
            self.workers.setdefault((int(i), int(w)), (host, int(users), None))
        self.changed = True

    def add(self, d: Delta) -> None:
        self.w.bucket_seconds = float(d.bucket_seconds)
        slot = (int(d.initiator), int(d.worker))
        old = self.workers.get(slot, (d.host, 0, None))
        self.workers[slot] = (d.host or old[0], int(d.users), d.samples[-1] if d.samples else old[2])
        self.pending.append(d)
        self.slow += d.slow
        self.changed = True
        self.settle()

    def settle(self) -> None:
        """Place the pending deltas in their phases, once the window's start is known. (A
        bucket travels once it ended a second ago: before the stop is known, every bucket
        that came is before it.)"""
        bounds = self.w.bounds()
        if bounds is None or not self.pending:
            return
        pending, self.pending = self.pending, []
        for d in pending:
            i, w = int(d.initiator), int(d.worker)
            for b, counts in d.buckets.items():
                phase = _phase(int(b), bounds)
                self.latency.setdefault((i, phase), Buckets()).add(counts)
                self.exact.setdefault(phase, Histogram()).counts.update(expanded(counts))
                self.sends[(i, w, phase)] += sum(counts.values())
            for b, n in d.errors.items():
                self.errors[(i, w, _phase(int(b), bounds))] += int(n)
            for b, counts in d.corrected.items():
                self.corrected.setdefault((i, _phase(int(b), bounds)), Buckets()).add(counts)

    def quantiles(self, phase: str, final: bool) -> dict[str, float] | None:
        """The exact percentiles of the phase's SENDs so far (every initiator), recomputed at
        most every :data:`QUANTILES_EVERY_S` unless ``final``; None without SENDs. In the
        measured window, once it has ended, with the slow SENDs in flight across its end (as
        the summary's ``send_latency_ms``)."""
        h, n = self.exact.get(phase), sum(n for (_, _, ph), n in self.sends.items() if ph == phase)
        bounds = self.w.bounds()
        if phase == "measure" and self.slow and bounds is not None and bounds[1] is not None:
            flying = Histogram()
            flying.extend_us(in_flight_at_end(self.slow, bounds[0], bounds[1], self.w.bucket_seconds))
            if flying.count:
                h, n = Histogram().merge(h or Histogram()).merge(flying), n + flying.count
        if h is None:
            return None
        now = self.clock()
        cached = self._quantiles.get(phase)
        if cached is None or (cached[0] != n and (final or now - cached[1] >= QUANTILES_EVERY_S)):
            cached = self._quantiles[phase] = (n, now, exact_quantiles(h))
        return cached[2]

    def snapshot(self, final: bool = False) -> dict:
        """The figures as JSON (what the controller's :class:`harness.metrics.live.LiveState`
        keeps): lists of ``[initiator, worker, phase, n]``, ``[initiator, phase, bucket counts,
        sum us]``, quantiles per phase, ``[initiator, worker, host, users, last sample]``."""
        self.settle()
        self.changed = False
        w = self.w
        return {"bucket_seconds": w.bucket_seconds, "spawn_complete": w.spawn_complete,
                "stop_requested": w.stop_requested,
                "sends": [[*k, n] for k, n in sorted(self.sends.items())],
                "errors": [[*k, n] for k, n in sorted(self.errors.items())],
                "latency": [[*k, b.counts, b.sum_us] for k, b in sorted(self.latency.items())],
                "corrected": [[*k, b.counts, b.sum_us] for k, b in sorted(self.corrected.items())],
                "quantiles": {ph: q for ph in PHASES if (q := self.quantiles(ph, final))},
                "workers": [[*k, *v] for k, v in sorted(self.workers.items())]}


def _phase(b: float, bounds: tuple[int, int | None]) -> str:
    """The phase of recording bucket ``b`` (or of a moment, in buckets)."""
    b0, b1 = bounds
    return "warmup" if b < b0 else ("measure" if b1 is None or b < b1 else "drain")


class SwarmMerge:
    """One swarm's deltas, merged once: each slot's recording and, when the plan asks, the
    live figures."""

    def __init__(self, plan: SwarmPlan, clock: Callable[[], float] = time.time):
        self.swarm_id = plan.swarm_id
        self.slots: dict[str, SlotRecording] = {}
        self.live = LiveFigures(*plan.live_window, clock=clock) if plan.live_window is not None else None

    def add(self, d: Delta) -> str | None:
        """Merge a placed worker's delta (its slot stamped by the master); why it cannot be,
        or None."""
        name = slot_name(d.initiator, d.worker)
        rec = self.slots.get(name)
        if rec is None:     # its spill file opened once, with its first delta
            rec = self.slots[name] = SlotRecording(int(d.initiator), int(d.worker))
        if rec.final or d.seq != rec.seq + 1:
            return (f"worker {name}: delta {d.seq} after its last one" if rec.final else
                    f"worker {name}: its deltas {rec.seq + 1}..{d.seq - 1} never came (its recording is incomplete)")
        rec.add(d)
        if self.live is not None:
            self.live.add(d)
        return None

    def recording(self, slot: str) -> dict:
        return self.slots[slot].to_json(self.swarm_id)
