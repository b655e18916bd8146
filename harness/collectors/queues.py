"""Transmission-queue and target-queue depth (fast approximate counts each tick), and how each
grew through the measured window (the diagnosis' evidence that a stage downstream of SEND falls
behind: docs/diagnosis.md)."""

from __future__ import annotations

import math
from collections import Counter
from statistics import NormalDist

from .base import Collector

#: confidence of the growth interval (as scipy.stats.theilslopes' alpha)
GROWTH_CONFIDENCE = 0.95


def theil_sen(ys: list[float], ts: list[float], confidence: float = GROWTH_CONFIDENCE) -> tuple[float, float, float]:
    """``(slope, low, high)``: the Theil-Sen slope of ``ys`` over ``ts`` (the median of the
    slopes of every pair with distinct times) and its interval from Sen (1968), eq. 2.6, with
    ties in either coordinate; what ``scipy.stats.theilslopes(ys, ts, alpha=confidence)`` gives
    (tests/collectors/test_evidence.py checks it), without importing scipy.stats into every run
    (about 0.6 CPU-s a process). NaN bounds when Sen's indices fall outside the slopes."""
    n = len(ys)
    slopes = sorted((ys[j] - ys[i]) / (ts[j] - ts[i]) for i in range(n) for j in range(n) if ts[j] > ts[i])
    m = len(slopes)
    slope = (slopes[(m - 1) // 2] + slopes[m // 2]) / 2.0
    alpha = 1.0 - confidence if confidence > 0.5 else confidence
    z = NormalDist().inv_cdf(alpha / 2.0)
    # a tie of k values takes k (k - 1) (2 k + 5) off: nothing for a value that occurs once
    sigsq = (n * (n - 1) * (2 * n + 5)
             - sum(k * (k - 1) * (2 * k + 5) for c in (Counter(ts), Counter(ys)) for k in c.values())) / 18.0
    if sigsq < 0:
        return slope, math.nan, math.nan
    sigma = math.sqrt(sigsq)
    upper = min(round((m - z * sigma) / 2.0), m - 1)    # Python's round, as numpy's: half to even
    lower = max(round((m + z * sigma) / 2.0) - 1, 0)
    if lower >= m:
        return slope, math.nan, math.nan
    return slope, slopes[lower], slopes[upper]


def growth(points: list[tuple[float, float]]) -> dict | None:
    """How a depth changed over time: the Theil-Sen slope (messages per second, robust to the
    transport's and the readers' batches) with its 95 % interval, the first and the last depth
    and the number of samples. None with fewer than 3 samples or all at one instant."""
    if len(points) < 3 or points[-1][0] <= points[0][0]:
        return None
    ts = [t - points[0][0] for t, _ in points]
    ys = [v for _, v in points]
    slope, low, high = theil_sen(ys, ts, GROWTH_CONFIDENCE)
    return {"per_s": round(float(slope), 3), "ci_low": round(float(low), 3), "ci_high": round(float(high), 3),
            "first": ys[0], "last": ys[-1], "samples": len(ys)}


class QueueCollector(Collector):
    family = "queues"

    def sample(self, ctx, now):
        depths = ctx.call(ctx.telemetry.queue_depths, False)
        out = [("depth", k, v) for k, v in sorted(depths.items())]
        out.append(("xmitq_total", "", sum(v for k, v in depths.items() if k.startswith("xmitq"))))
        return out

    def summary_fields(self, ctx, window):
        # inside the measured window only: a backlog reached during the drain, after the load
        # stopped, is not what the window measured
        xmitq = window.points(self.family, "xmitq_total")
        queue = window.points(self.family, "depth", "queue")
        out = {"max_xmitq_depth": max(v for _, v in xmitq) if xmitq else 0,
               "max_queue_depth": max(v for _, v in queue) if queue else 0}
        for name, pts in (("xmitq_depth_growth", xmitq), ("queue_depth_growth", queue)):
            g = growth(pts)
            if g is not None:
                out[name] = g
        return out
