"""Wait statistics (sys.dm_os_wait_stats shape): per-second deltas per wait type.

The collector keeps its cumulative snapshots so it can compute exact deltas over the measured
window: the summary's ``top_waits``."""

from __future__ import annotations

from .base import Collector

TOP_WAITS = 5


class WaitCollector(Collector):
    family = "waits"

    def __init__(self):
        self.snapshots: list[tuple[float, dict[str, tuple[int, float]]]] = []

    def sample(self, ctx, now):
        stats = {w.wait_type: (w.waiting_tasks, w.wait_time_ms) for w in ctx.call(ctx.telemetry.wait_stats)}
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
