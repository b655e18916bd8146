"""Messages processed per second at the target (the activation procedure's tally), and over the
measured window the procedure's own time per message (docs/diagnosis.md, the processing stage)."""

from __future__ import annotations

from .base import Collector


class ThroughputCollector(Collector):
    family = "throughput"

    def __init__(self):
        self.prev: tuple[float, int] | None = None

    def sample(self, ctx, now):
        n = ctx.call(ctx.telemetry.messages_processed)
        out = [("processed_total", "", n)]
        if self.prev is not None:
            t0, n0 = self.prev
            out.append(("received_per_s", "", max(0, n - n0) / max(now - t0, 1e-6)))
        self.prev = (now, n)
        return out

    def summary_fields(self, ctx, window):
        """``procedure_us_per_message``: the activation procedure's time from RECEIVE's return to
        the end of its processing, per data message; ``procedure_busy``: that time per second of
        the window (tasks busy processing, on average); ``messages_per_receive``."""
        t = ctx.call(ctx.telemetry.procedure_time, window.start, window.end)
        if not t or not t.get("receives"):
            return {}
        out = {"procedure_busy": round(t["seconds"] / max(window.end - window.start, 1e-9), 4),
               "messages_per_receive": round(t["messages"] / t["receives"], 2)}
        if t.get("messages"):
            out["procedure_us_per_message"] = round(t["batch_seconds"] * 1e6 / t["messages"], 2)
        return out
