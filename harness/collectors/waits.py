"""Wait statistics (sys.dm_os_wait_stats shape): per-second deltas per wait type.

The collector keeps its cumulative snapshots so it can compute exact deltas over the measured
window: the summary's ``top_waits``."""

from __future__ import annotations

from .base import Collector

TOP_WAITS = 5


class WaitCollector(Collector):
    family = "waits"
    #: the telemetry's method giving the cumulative waits (sys.dm_os_wait_stats shape)
    source = "wait_stats"

    def __init__(self):
        self.snapshots: list[tuple[float, dict[str, tuple[int, float]]]] = []

    def sample(self, ctx, now):
        stats = {w.wait_type: (w.waiting_tasks, w.wait_time_ms) for w in ctx.call(getattr(ctx.telemetry, self.source))}
        out = []
        if self.snapshots:
            t0, prev = self.snapshots[-1]
            dt = max(now - t0, 1e-6)
            for wt, (tasks, ms) in stats.items():
                ptasks, pms = prev.get(wt, (0, 0.0))
                dms, dtasks = ms - pms, tasks - ptasks
                if dms > 0 or dtasks > 0:
                    out.append(("wait_ms_per_s", wt, dms / dt))
                    out.append(("waiting_tasks_per_s", wt, dtasks / dt))
        self.snapshots.append((now, stats))
        return out

    def summary_fields(self, ctx, window):
        waits = self.window_delta(window.start, window.end)
        total = sum(ms for _, ms in waits.values()) or 1.0
        top = sorted(waits.items(), key=lambda kv: -kv[1][1])[:TOP_WAITS]
        return {"top_waits": [{"wait_type": k, "wait_time_ms": round(ms, 3), "waiting_tasks": n,
                               "share": round(ms / total, 4)} for k, (n, ms) in top]}

    def window_delta(self, start: float, end: float) -> dict[str, tuple[int, float]]:
        """Cumulative wait deltas between the snapshots nearest the window's edges."""
        if not self.snapshots:
            return {}
        before = [s for s in self.snapshots if s[0] <= start] or self.snapshots[:1]
        upto = [s for s in self.snapshots if s[0] <= end] or self.snapshots[:1]
        a, b = before[-1][1], upto[-1][1]
        out = {}
        for wt, (tasks, ms) in b.items():
            pt, pm = a.get(wt, (0, 0.0))
            if ms - pm > 0:
                out[wt] = (tasks - pt, ms - pm)
        return out


class BrokerWaitCollector(WaitCollector):
    """Service Broker's own waits, idle ones included (Target.broker_waits: BROKER_RECEIVE_WAITFOR,
    BROKER_TASK_STOP, ..., and latch classes such as SERVICE_BROKER_WAITFOR_MANAGER), which the
    wait profile leaves out; the summary's ``broker_waits``: ms of wait per second of the window."""

    family = "broker_waits"
    source = "broker_waits"

    def summary_fields(self, ctx, window):
        seconds = max(window.end - window.start, 1e-9)
        waits = self.window_delta(window.start, window.end)
        return {"broker_waits": {k: round(ms / seconds, 3) for k, (_, ms) in sorted(waits.items())}} if waits else {}


class PageLatchCollector(Collector):
    """Which objects' pages the page-latch waits are on, each tick (Target.page_latch_waiters:
    SQL Server's sys.dm_os_waiting_tasks mapped through sys.dm_db_page_info); the summary's
    ``page_latch_objects``: mean tasks waiting per tick, the top ones over the window."""

    family = "page_latch"

    def __init__(self):
        self.ticks: list[float] = []     # when it sampled (a tick without waiters counts too)

    def sample(self, ctx, now):
        self.ticks.append(now)
        by_object: dict[str, float] = {}
        for _, obj, tasks in ctx.call(ctx.telemetry.page_latch_waiters):
            by_object[obj] = by_object.get(obj, 0) + tasks
        return [("waiting_tasks", obj, n) for obj, n in sorted(by_object.items())]

    def summary_fields(self, ctx, window):
        ticks = sum(window.start <= t < window.end for t in self.ticks)
        totals: dict[str, float] = {}
        for s in window.samples:
            if s.family == self.family and window.start <= s.ts < window.end:
                totals[s.key] = totals.get(s.key, 0.0) + s.value
        if not totals or not ticks:
            return {}
        top = sorted(totals.items(), key=lambda kv: -kv[1])[:TOP_WAITS]
        return {"page_latch_objects": {k: round(v / ticks, 3) for k, v in top}}
