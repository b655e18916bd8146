"""A collector of the plugin's own (``ssbench.collectors``: ``memory_backlog``): it runs only
against targets whose telemetry implements :class:`.telemetry.MemoryTelemetry`."""

from __future__ import annotations

from harness.collectors.base import Collector

from .telemetry import MemoryTelemetry


class BacklogCollector(Collector):
    family = "memory"
    reads = MemoryTelemetry

    def sample(self, ctx, now):
        return [("peak_backlog", "", ctx.call(ctx.telemetry.peak_backlog))]
