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
