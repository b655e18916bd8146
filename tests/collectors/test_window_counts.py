"""What the collectors count inside the measured window (issue 29): activation tasks started and
ended, dialogs ended. The arithmetic on scripted counter values, tick by tick (the end-to-end
test tests/techniques/test_activation_block.py reads them from the real embedded broker)."""

from __future__ import annotations

import threading

from harness.collectors.activation import ActivationCollector
from harness.collectors.base import Sample, SampleContext, WindowView
from harness.collectors.dialogs import DialogCollector
from harness.targets.base import PerfCounter


class Scripted:
    """A target whose counters are the next row of a script at every call."""

    def __init__(self, rows, instances=("db",)):
        self.rows, self.k, self.instances = rows, -1, instances

    @property
    def telemetry(self):    # the target's telemetry interface is the target itself
        return self

    def perf_counters(self):
        self.k += 1
        started, running = self.rows[self.k]
        return [c for i in self.instances for c in (
            PerfCounter("Broker Activation", "Tasks Started/sec", i, float(started)),
            PerfCounter("Broker Activation", "Tasks Running", i, float(running), "gauge"))]

    def activated_tasks(self):   # Telemetry's default: this target cannot tell
        return None

    def dialog_stats(self):
        self.k += 1
        return {"dialogs_begun": self.rows[self.k], "dialogs_ended": self.rows[self.k], "errors_received": 0,
                "errors_lost": 0, "endpoints": {}}

    dialog_counts = dialog_stats      # Telemetry's default


def run(collector, target, ticks):
    return sampled(collector, target, ticks)[0]


def sampled(collector, target, ticks) -> tuple[SampleContext, list[Sample]]:
    """The context and the samples of ``ticks`` (what the summary's window view holds)."""
    ctx = SampleContext(target=target, lock=threading.Lock())
    return ctx, [Sample(t, collector.family, m, k, v) for t in ticks for m, k, v in collector.sample(ctx, t)]


def test_tasks_started_and_ended_inside_the_window_only():
    # ticks at 0..8 s, window [2.5, 7.5]: bounded by the ticks at 2 and 7. Two readers started in
    # the warm-up (ticks 0-1); then a task ends and restarts every second (a short WAITFOR)
    rows = [(1, 1), (2, 2), (2, 2), (3, 1), (4, 2), (5, 1), (6, 1), (7, 2), (9, 2)]
    c = ActivationCollector()
    ctx = run(c, Scripted(rows), range(9))
    got = c.summary_fields(ctx, WindowView(2.5, 7.5, ()))
    assert got["activation_tasks_started_in_window"] == 7 - 2
    # ended = started - (running at 7 - running at 2) = 5 - 0
    assert got["activation_tasks_ended_in_window"] == 5
    assert got["activation_tasks_started_per_s"] == 5 / 5
    assert got["activation_tasks_started"] == 9 - 1          # since the first sample, as before


def test_readers_that_live_on_start_and_end_nothing_in_the_window():
    # a long WAITFOR: both readers started in the warm-up and kept; SQL Server's _Total row counts
    rows = [(0, 0), (1, 1), (2, 2), (2, 2), (2, 2), (2, 2)]
    c = ActivationCollector()
    ctx = run(c, Scripted(rows, instances=("db", "_Total")), range(6))
    got = c.summary_fields(ctx, WindowView(2.0, 5.0, ()))
    assert (got["activation_tasks_started_in_window"], got["activation_tasks_ended_in_window"]) == (0, 0)
    # issue 52, item 6: two tasks started in all, counted once (the _Total row, not db + _Total)
    assert got["activation_tasks_started"] == 2 and got["activation_tasks_max_running"] == 2
    # a second reader joining inside the window started a task and ended none
    rows = [(0, 0), (1, 1), (1, 1), (2, 2), (2, 2), (2, 2)]
    c = ActivationCollector()
    ctx = run(c, Scripted(rows), range(6))
    got = c.summary_fields(ctx, WindowView(2.0, 5.0, ()))
    assert (got["activation_tasks_started_in_window"], got["activation_tasks_ended_in_window"]) == (1, 0)


def test_no_window_counts_without_two_ticks():
    c = ActivationCollector()
    ctx = run(c, Scripted([(1, 1)]), [0.0])
    got = c.summary_fields(ctx, WindowView(0.5, 3.0, ()))
    assert "activation_tasks_started_in_window" not in got and "activation_tasks_started_per_s" not in got


def test_dialogs_ended_inside_the_window():
    ended = [0, 40, 90, 150, 200, 260, 300]      # cumulative, one tick a second; the last read is the summary's
    c = DialogCollector()
    ctx, samples = sampled(c, Scripted(ended), range(6))
    got = c.summary_fields(ctx, WindowView(1.5, 4.5, samples))
    assert got["dialogs_ended_in_window"] == 200 - 40 and got["dialogs_ended"] == 300
    # reuse: no dialog ever ends
    c = DialogCollector()
    ctx, samples = sampled(c, Scripted([0] * 7), range(6))
    assert c.summary_fields(ctx, WindowView(1.5, 4.5, samples))["dialogs_ended_in_window"] == 0


def test_top_waits_keep_the_signal_wait_apart():
    """Issue 52, item 7: each top wait carries the part of it spent runnable (signal wait), and
    the summary the window's signal wait per second over every wait type."""
    from harness.collectors.waits import WaitCollector
    from harness.targets.telemetry import WaitStat

    class Waits:
        telemetry = property(lambda self: self)

        def __init__(self):
            self.k = -1

        def wait_stats(self):
            self.k += 1
            return [WaitStat("WRITELOG", 10 * self.k, 1000.0 * self.k, 800.0 * self.k),
                    WaitStat("LCK_M_X", self.k, 100.0 * self.k, 10.0 * self.k)]

    c = WaitCollector()
    ctx = run(c, Waits(), range(6))
    got = c.summary_fields(ctx, WindowView(1.0, 5.0, ()))
    top = {w["wait_type"]: w for w in got["top_waits"]}
    assert top["WRITELOG"]["wait_time_ms"] == 4000.0 and top["WRITELOG"]["signal_wait_ms"] == 3200.0
    assert got["signal_wait_ms_per_s"] == (3200.0 + 40.0) / 4


def test_wait_snapshots_spill_into_the_contexts_directory_and_memory_stays_the_same(tmp_path):
    """A SQL Server reports about a thousand wait types a tick: the cumulative snapshots go to a
    file in the repetition's directory (on the results disk, whose filling is exit 5) as they
    come, so a long window keeps no more in memory than a short one, and the window's deltas
    are the same read back."""
    import gc
    import os
    import tracemalloc

    from harness.collectors.waits import WaitCollector
    from harness.targets.telemetry import WaitStat

    class Waits:
        telemetry = property(lambda self: self)
        k = -1

        def wait_stats(self):
            self.k += 1
            return [WaitStat(f"WAIT_{i:04d}", self.k * i, 10.0 * self.k * i, float(self.k)) for i in range(1000)]

    def kept_after(ticks: int) -> tuple[int, WaitCollector, SampleContext]:
        tracemalloc.start()
        try:
            c = WaitCollector()
            ctx = SampleContext(target=Waits(), lock=threading.Lock(), spill_dir=str(tmp_path))
            for t in range(ticks):
                c.sample(ctx, float(t))
            gc.collect()
            return tracemalloc.get_traced_memory()[0], c, ctx
        finally:
            tracemalloc.stop()

    short, _, _ = kept_after(5)
    long, c, ctx = kept_after(65)
    assert long - short < 200_000, f"{long - short:,} bytes more kept after 60 more ticks"
    assert os.readlink(f"/proc/self/fd/{c.snapshots._file.fileno()}").startswith(f"{tmp_path}/")
    top = {w["wait_type"]: w for w in c.summary_fields(ctx, WindowView(10.5, 60.5, ()))["top_waits"]}
    # the snapshots at 10 and 60 bound the window: 50 ticks of 10 ms x i for wait type i
    assert top["WAIT_0999"]["wait_time_ms"] == 50 * 10.0 * 999 and top["WAIT_0999"]["waiting_tasks"] == 50 * 999
    assert top["WAIT_0999"]["signal_wait_ms"] == 50.0
