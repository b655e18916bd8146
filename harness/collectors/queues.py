"""Transmission-queue and target-queue depth (fast approximate counts each tick)."""

from __future__ import annotations

from .base import Collector


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
        xmitq = window.series(self.family, "xmitq_total")
        queue = window.series(self.family, "depth", "queue")
        return {"max_xmitq_depth": max(xmitq) if xmitq else 0, "max_queue_depth": max(queue) if queue else 0}
