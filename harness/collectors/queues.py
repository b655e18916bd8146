"""Transmission-queue and target-queue depth (fast approximate counts each tick), and how each
grew through the measured window (the diagnosis' evidence that a stage downstream of SEND falls
behind: docs/diagnosis.md)."""

from __future__ import annotations

from .base import Collector

#: confidence of the growth interval (scipy.stats.theilslopes' alpha)
GROWTH_CONFIDENCE = 0.95


def growth(points: list[tuple[float, float]]) -> dict | None:
    """How a depth changed over time: the Theil-Sen slope (messages per second, robust to the
    transport's and the readers' batches) with its 95 % interval, the first and the last depth
    and the number of samples. None with fewer than 3 samples or all at one instant."""
    if len(points) < 3 or points[-1][0] <= points[0][0]:
        return None
    from scipy.stats import theilslopes

    ts = [t - points[0][0] for t, _ in points]
    ys = [v for _, v in points]
    slope, _, low, high = theilslopes(ys, ts, alpha=GROWTH_CONFIDENCE)
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
