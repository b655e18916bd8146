"""Broker Activation counters, and the activation tasks started and ended inside the window.

Rates of tasks running, started, task limit reached and procedures invoked. Tasks ended are
started minus the growth of Tasks Running between the window's bounding ticks (no target counts
them); they show the paper's recommendation 3, a WAITFOR timeout shorter than the queue
monitor's period churning tasks. Each tick also records activated tasks against
MAX_QUEUE_READERS.
"""

from __future__ import annotations

from ._counters import TOTAL, CounterDeltas, over_instances, window_ticks
from .base import Collector

OBJECT = "Broker Activation"


class ActivationCollector(Collector):
    family = "activation"

    def __init__(self):
        self.deltas = CounterDeltas()
        #: (epoch s, cumulative Tasks Started, Tasks Running; of all instances) per tick: the
        #: window's and the whole run's tasks started, and the most running at once
        self.started_at: list[tuple[float, float, float]] = []

    def sample(self, ctx, now):
        counters = [c for c in ctx.call(ctx.telemetry.perf_counters) if c.object_name == OBJECT]
        rows = self.deltas.update(counters, now)
        started = self._total(counters, "Tasks Started")
        if started is not None:
            self.started_at.append((now, started, self._total(counters, "Tasks Running") or 0.0))
        # SQL Server reports per database (instance) plus a _Total row: keep the total when present
        out = [(m, "", v) for c, m, v in rows if c.instance_name == TOTAL] or [(m, "", v) for _, m, v in rows]
        tasks = ctx.call(ctx.telemetry.activated_tasks)   # the test's queue against its MAX_QUEUE_READERS
        if tasks is not None:
            out += [("activated_tasks", "", tasks[0]), ("max_queue_readers", "", tasks[1])]
        return out

    @staticmethod
    def _total(counters, prefix: str) -> float | None:
        found = [(c.instance_name, c.value) for c in counters if c.counter_name.startswith(prefix)]
        return over_instances(found) if found else None

    def window_tasks(self, start: float, end: float) -> tuple[float, float, float] | None:
        """Activation tasks started and ended inside [start, end], and the seconds between the
        two ticks that bound it (:func:`~._counters.window_ticks`); None without two ticks."""
        got = window_ticks(self.started_at, start, end)
        if got is None:
            return None
        (t0, s0, r0), (t1, s1, r1) = got
        started = max(0.0, s1 - s0)
        return started, max(0.0, started - (r1 - r0)), t1 - t0

    def summary_fields(self, ctx, window):
        ticks = self.started_at
        out = {"activation_tasks_started": ticks[-1][1] - ticks[0][1] if ticks else 0.0,
               "activation_tasks_max_running": max((running for _, _, running in ticks), default=0.0)}
        got = self.window_tasks(window.start, window.end)
        if got is not None:
            started, ended, seconds = got
            out["activation_tasks_started_per_s"] = started / seconds
            out["activation_tasks_started_in_window"] = int(started)
            out["activation_tasks_ended_in_window"] = int(ended)
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
