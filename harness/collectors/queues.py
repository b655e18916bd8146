"""Transmission-queue and target-queue depth (fast approximate counts each tick)."""

from __future__ import annotations

from .base import Collector


class QueueCollector(Collector):
    family = "queues"

    def sample(self, ctx, now):
        depths = ctx.call(ctx.target.queue_depths, False)
        out = [("depth", k, v) for k, v in sorted(depths.items())]
        out.append(("xmitq_total", "", sum(v for k, v in depths.items() if k.startswith("xmitq"))))
        return out

    def summary_fields(self, ctx, window):
        # from the measured window on (the drain included): the fast counts lag by up to a few
        # seconds, so warm-up leftovers would otherwise show as the maximum
        xmitq = window.series(self.family, "xmitq_total", from_start_on=True)
        queue = window.series(self.family, "depth", "queue", from_start_on=True)
        return {"max_xmitq_depth": max(xmitq) if xmitq else 0, "max_queue_depth": max(queue) if queue else 0}
