"""Dialog lifetime (docs/matrices.md, ``messages_per_dialog``, ``fire_and_forget``).

Dialogs begun and ended by the SEND path, Error messages, and conversation endpoints by side
and state (after the drain only); the dialogs ended inside the window show whether a lifetime
technique engaged.
"""

from __future__ import annotations

from ._counters import window_ticks
from .base import Collector

COUNTS = ("dialogs_begun", "dialogs_ended", "errors_received", "errors_lost")


class DialogCollector(Collector):
    family = "dialogs"

    def sample(self, ctx, now):
        stats = ctx.call(ctx.telemetry.dialog_counts)     # every tick: cheap, never waits on a SEND
        if stats is None:
            return []
        out = [(k, "", float(stats[k])) for k in COUNTS if stats.get(k) is not None]
        out += [("endpoints", key, float(n)) for key, n in sorted(stats.get("endpoints", {}).items())]
        return out

    def summary_fields(self, ctx, window):
        # totals since the repetition's prepare, read after the drain: the endpoints left behind
        stats = ctx.call(ctx.telemetry.dialog_stats)
        if stats is None:
            return {}
        # a count the target cannot tell is None and stays out of the summary (SQL Server keeps
        # no trace of an Error it discarded: errors_lost); int(None) failed the whole family
        out = {field: int(stats[key]) for field, key in (
            ("dialogs_begun", "dialogs_begun"), ("dialogs_ended", "dialogs_ended"),
            ("dialog_errors_received", "errors_received"), ("dialog_errors_lost", "errors_lost"))
            if stats.get(key) is not None}
        got = window_ticks(window.points(self.family, "dialogs_ended", "", whole=True), window.start, window.end)
        if got:
            out["dialogs_ended_in_window"] = int(max(0.0, got[1][1] - got[0][1]))
        out["endpoints"] = {k: int(v) for k, v in sorted(stats.get("endpoints", {}).items())}
        return out
