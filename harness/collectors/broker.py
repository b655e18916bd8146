"""Broker Statistics and Broker/DBM Transport counters as per-second rates; over the measured
window, the transport's rate (messages leaving the transmission queues per second) and RECEIVEs
per second (the diagnosis' evidence, docs/diagnosis.md)."""

from __future__ import annotations

from ._counters import CounterDeltas
from .base import Collector

OBJECTS = ("Broker Statistics", "Broker/DBM Transport")


class BrokerCollector(Collector):
    family = "broker"

    def __init__(self):
        self.deltas = CounterDeltas()

    def sample(self, ctx, now):
        counters = [c for c in ctx.call(ctx.telemetry.perf_counters) if c.object_name in OBJECTS]
        return [(metric, c.object_name, value) for c, metric, value in self.deltas.update(counters, now)]

    def summary_fields(self, ctx, window):
        # 'Dequeued TransmissionQ Msgs/sec' on SQL Server, 'Dequeued Transmission Msgs/sec' embedded
        out = {"transport_rate": window.mean(self.family, "", "Broker Statistics",
                                             metric_prefix="dequeued_transmission"),
               "receives_per_s": window.mean(self.family, "sql_receives_per_s", "Broker Statistics")}
        return {k: round(v, 3) for k, v in out.items() if v is not None}
