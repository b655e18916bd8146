"""Wait statistics (sys.dm_os_wait_stats shape): per-second deltas per wait type.

The collector keeps its cumulative snapshots so it can compute exact deltas over the measured
window (the summary's ``top_waits``): on disk as they come, in the context's ``spill_dir`` (a
SQL Server has about a thousand wait types: memory stays the same however long the window)."""

from __future__ import annotations

from harness.spill import Spill

from ._counters import window_ticks
from .base import Collector

#: wait types a summary keeps: its top_waits, and its session_waits per role (harness.collectors.sessionwaits)
TOP_WAITS = 5


class WaitCollector(Collector):
    family = "waits"
    #: the telemetry's method giving the cumulative waits (sys.dm_os_wait_stats shape)
    source = "wait_stats"

    def __init__(self):
        #: every (when, wait type -> (waiting tasks, wait ms, signal wait ms or None)), cumulative
        self.snapshots: Spill | None = None
        self._last: tuple[float, dict] | None = None     # the latest of them (the next tick's deltas)

    def sample(self, ctx, now):
        stats = {w.wait_type: (w.waiting_tasks, w.wait_time_ms, w.signal_wait_ms)
                 for w in ctx.call(getattr(ctx.telemetry, self.source))}
        out = []
        if self._last is not None:
            t0, prev = self._last
            dt = max(now - t0, 1e-6)
            for wt, (tasks, ms, sig) in stats.items():
                ptasks, pms, psig = prev.get(wt, (0, 0.0, None))
                dms, dtasks = ms - pms, tasks - ptasks
                if dms > 0 or dtasks > 0:
                    out.append(("wait_ms_per_s", wt, dms / dt))
                    out.append(("waiting_tasks_per_s", wt, dtasks / dt))
                    if sig is not None and sig > (psig or 0.0):
                        out.append(("signal_wait_ms_per_s", wt, (sig - (psig or 0.0)) / dt))
        if self.snapshots is None:
            self.snapshots = Spill(f"ssbench-{self.family}-", ctx.spill_dir)
        self.snapshots.append((now, stats))
        self._last = (now, stats)
        return out

    def summary_fields(self, ctx, window):
        """``top_waits`` (wait_time_ms: sys.dm_os_wait_stats' total, signal wait included; and
        signal_wait_ms, the part of it spent runnable, where the target tells) and
        ``signal_wait_ms_per_s``: every wait type's signal wait per second of the window, the
        time tasks spent waiting for a CPU (docs/diagnosis.md)."""
        waits = self.window_delta(window.start, window.end)
        total = sum(ms for _, ms, _ in waits.values()) or 1.0
        top = sorted(waits.items(), key=lambda kv: -kv[1][1])[:TOP_WAITS]
        out: dict = {"top_waits": [{"wait_type": k, "wait_time_ms": round(ms, 3), "waiting_tasks": n,
                                    "share": round(ms / total, 4),
                                    **({} if sig is None else {"signal_wait_ms": round(sig, 3)})}
                                   for k, (n, ms, sig) in top]}
        signal = [sig for _, _, sig in waits.values() if sig is not None]
        if signal:
            out["signal_wait_ms_per_s"] = round(sum(signal) / max(window.end - window.start, 1e-9), 3)
        return out

    def window_delta(self, start: float, end: float) -> dict[str, tuple[int, float, float | None]]:
        """Cumulative wait deltas between the snapshots that bound the window (window_ticks):
        (waiting tasks, wait ms, signal wait ms or None) per wait type whose wait grew."""
        got = window_ticks(self.snapshots if self.snapshots is not None else (), start, end)
        if got is None:
            return {}
        (_, a), (_, b) = got
        out = {}
        for wt, (tasks, ms, sig) in b.items():
            pt, pm, ps = a.get(wt, (0, 0.0, None))
            if ms - pm > 0:
                out[wt] = (tasks - pt, ms - pm, None if sig is None else sig - (ps or 0.0))
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
        return {"broker_waits": {k: round(ms / seconds, 3) for k, (_, ms, _) in sorted(waits.items())}} if waits else {}


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
