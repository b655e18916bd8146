"""Broker Statistics and Broker/DBM Transport counters as per-second rates."""

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
