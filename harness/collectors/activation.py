"""Broker Activation counters: tasks running, tasks started, task limit reached, procedures
invoked (rates from cumulative values)."""

from __future__ import annotations

from ._counters import CounterDeltas
from .base import Collector

OBJECT = "Broker Activation"


class ActivationCollector(Collector):
    family = "activation"

    def __init__(self):
        self.deltas = CounterDeltas()

    def sample(self, ctx, now):
        counters = [c for c in ctx.call(ctx.target.perf_counters) if c.object_name == OBJECT]
        rows = self.deltas.update(counters, now)
        # SQL Server reports per database (instance) plus a _Total row: keep the total when present
        has_total = any(c.instance_name == "_Total" for c, _, _ in rows)
        return [(metric, "", value) for c, metric, value in rows
                if not has_total or c.instance_name == "_Total"]

    def tasks_started(self) -> float:
        return self.deltas.total(OBJECT, "Tasks Started/sec") or self.deltas.total(OBJECT, "Tasks Started")

    def max_running(self) -> float:
        vals = [v for k, v in self.deltas.max_gauge.items() if k[1].startswith("Tasks Running")]
        return max(vals) if vals else 0.0

    def summary_fields(self, ctx, window):
        return {"activation_tasks_started": self.tasks_started(),
                "activation_tasks_max_running": self.max_running()}
