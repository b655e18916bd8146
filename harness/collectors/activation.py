"""Broker Activation counters: tasks running, tasks started, task limit reached, procedures
invoked (rates from cumulative values), and the tasks started per second of the measured window
(the paper's recommendation 3: a WAITFOR timeout too short for the queue monitor's 5 s period
churns activation tasks); the test queue's activated tasks against its MAX_QUEUE_READERS each
tick (Target.activated_tasks)."""

from __future__ import annotations

from ._counters import CounterDeltas
from .base import Collector

OBJECT = "Broker Activation"


class ActivationCollector(Collector):
    family = "activation"

    def __init__(self):
        self.deltas = CounterDeltas()
        #: (epoch s, cumulative Tasks Started of all instances) per tick
        self.started_at: list[tuple[float, float]] = []

    def sample(self, ctx, now):
        counters = [c for c in ctx.call(ctx.target.perf_counters) if c.object_name == OBJECT]
        rows = self.deltas.update(counters, now)
        started = [c for c in counters if c.counter_name.startswith("Tasks Started")]
        if started:
            total = [c for c in started if c.instance_name == "_Total"] or started
            self.started_at.append((now, sum(c.value for c in total)))
        # SQL Server reports per database (instance) plus a _Total row: keep the total when present
        has_total = any(c.instance_name == "_Total" for c, _, _ in rows)
        out = [(metric, "", value) for c, metric, value in rows if not has_total or c.instance_name == "_Total"]
        tasks = ctx.call(ctx.target.activated_tasks)   # the test's queue against its MAX_QUEUE_READERS
        if tasks is not None:
            out += [("activated_tasks", "", tasks[0]), ("max_queue_readers", "", tasks[1])]
        return out

    def tasks_started(self) -> float:
        return self.deltas.total(OBJECT, "Tasks Started/sec") or self.deltas.total(OBJECT, "Tasks Started")

    def max_running(self) -> float:
        vals = [v for k, v in self.deltas.max_gauge.items() if k[1].startswith("Tasks Running")]
        return max(vals) if vals else 0.0

    def window_tasks_started(self, start: float, end: float) -> tuple[float, float] | None:
        """Activation tasks started inside [start, end] and the seconds between the two ticks
        that bound it (the last tick at or before ``start``, else the first after; the last at
        or before ``end``); None without two such ticks."""
        before = [t for t in self.started_at if t[0] <= start]
        first = before[-1] if before else next((t for t in self.started_at if t[0] > start), None)
        inside = [t for t in self.started_at if t[0] <= end]
        if first is None or not inside or inside[-1][0] <= first[0]:
            return None
        return inside[-1][1] - first[1], inside[-1][0] - first[0]

    def summary_fields(self, ctx, window):
        out = {"activation_tasks_started": self.tasks_started(),
               "activation_tasks_max_running": self.max_running()}
        got = self.window_tasks_started(window.start, window.end)
        if got is not None:
            out["activation_tasks_started_per_s"] = max(0.0, got[0]) / got[1]
        return out | self.readers(window)

    def readers(self, window) -> dict:
        """Over the window: activation tasks running (mean), their MAX_QUEUE_READERS, the share of
        ticks at it, and Task Limit Reached per second (docs/diagnosis.md, the receive stage)."""
        out = {}
        running = window.series(self.family, "activated_tasks")
        limits = window.series(self.family, "max_queue_readers")
        if running and limits:
            out = {"activation_tasks_running": round(sum(running) / len(running), 3),
                   "activation_max_readers": int(max(limits)),
                   "activation_at_max_share": round(sum(r >= m > 0 for r, m in zip(running, limits))
                                                    / len(running), 3)}
        hits = window.mean(self.family, "task_limit_reached_per_s")
        if hits is not None:
            out["activation_task_limit_per_s"] = round(hits, 3)
        return out
