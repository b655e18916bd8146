"""Messages processed per second at the target (the activation procedure's tally)."""

from __future__ import annotations

from .base import Collector


class ThroughputCollector(Collector):
    family = "throughput"

    def __init__(self):
        self.prev: tuple[float, int] | None = None
        self.last_rate = 0.0

    def sample(self, ctx, now):
        n = ctx.call(ctx.telemetry.messages_processed)
        out = [("processed_total", "", n)]
        if self.prev is not None:
            t0, n0 = self.prev
            self.last_rate = max(0, n - n0) / max(now - t0, 1e-6)
            out.append(("received_per_s", "", self.last_rate))
        self.prev = (now, n)
        return out
