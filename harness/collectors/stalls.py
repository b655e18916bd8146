"""A target that stopped making progress inside the measured window (docs/results.md).

``freeze_seconds`` (the longest gap between ticks), ``receive_stall_seconds`` (nothing received
while SENDs went on and readers ran), ``queue_growth`` and ``stall_chains`` (blocking chains of
the longest stall); ``harness.results.summary.progress_flags`` judges them.
"""

from __future__ import annotations

import statistics
from typing import Iterable

from .base import Collector, Sample, WindowView

SENDS_METRIC = "sql_sends_per_s"     # Broker Statistics "SQL SENDs/sec", per second


def tick_times(samples: Iterable[Sample]) -> list[float]:
    """The collectors' ticks (every sample of one tick carries its start time)."""
    return sorted({s.ts for s in samples if s.family not in ("worker", "client_host")})


def longest_freeze(ticks: list[float], start: float, end: float) -> float | None:
    """The longest gap between consecutive ticks that overlaps [start, end), minus the usual
    (median) tick interval; None with fewer than three ticks."""
    if len(ticks) < 3:
        return None
    gaps = [(a, b) for a, b in zip(ticks, ticks[1:])]
    usual = statistics.median(b - a for a, b in gaps)
    inside = [b - a - usual for a, b in gaps if a < end and b > start]
    return round(max(inside), 3) if inside else 0.0


def longest_receive_stall(processed: list[tuple[float, float]], sending: list[tuple[float, float]],
                          readers: list[tuple[float, float]] | None, start: float, end: float
                          ) -> tuple[float, tuple[float, float] | None]:
    """The longest span inside [start, end) over which ``processed`` (ts, cumulative count)
    stayed the same while ``sending`` (ts, SENDs per second) was above zero at some tick after
    its start and ``readers`` (ts, tasks running; None: unknown) was above zero at each of its
    ticks. Returns (seconds, (span start, span end)) clipped to the window; (0.0, None) if
    none."""
    best, best_span = 0.0, None
    pts = sorted(processed)
    i = 0
    while i < len(pts):
        j = i
        while j + 1 < len(pts) and pts[j + 1][1] == pts[i][1]:
            j += 1
        a, b = pts[i][0], pts[j][0]
        lo, hi = max(a, start), min(b, end)
        if hi - lo > best and any(a < t <= b and v > 0 for t, v in sending) \
                and (readers is None or all(v > 0 for t, v in readers if a <= t <= b)):
            best, best_span = hi - lo, (a, b)
        i = j + 1
    return round(best, 3), best_span


def _chains(window: WindowView, a: float, b: float, top: int = 5) -> list[str]:
    seen: dict[str, float] = {}
    for s in window.samples:
        if s.family == "locks" and a <= s.ts <= b:
            seen[s.key] = seen.get(s.key, 0.0) + s.value
    return [f"{k} ({v:.1f} s)" for k, v in sorted(seen.items(), key=lambda kv: -kv[1])[:top]]


class StallCollector(Collector):
    """Samples nothing of its own: judges the other collectors' series over the window."""

    family = "stalls"

    def summary_fields(self, ctx, window):
        out: dict = {}
        ticks = tick_times(window.samples)
        freeze = longest_freeze(ticks, window.start, window.end)
        if freeze is not None:
            out["freeze_seconds"] = freeze
        processed = window.points("throughput", "processed_total", whole=True)
        sending = window.points("broker", SENDS_METRIC, whole=True)
        readers = window.points("activation", "tasks_running", whole=True) or None
        if processed and sending:
            stall, span = longest_receive_stall(processed, sending, readers, window.start, window.end)
            out["receive_stall_seconds"] = stall
            # measured: an empty list when nothing stalled (absent means not measured)
            out["stall_chains"] = _chains(window, *span) if span is not None else []
        depth = {}
        for fam, met, key in (("queues", "depth", "queue"), ("queues", "xmitq_total", "")):
            for ts, v in window.points(fam, met, key):
                depth[ts] = depth.get(ts, 0.0) + v
        if len(depth) >= 2:
            first, last = min(depth), max(depth)
            out["queue_growth"] = depth[last] - depth[first]
        return out
