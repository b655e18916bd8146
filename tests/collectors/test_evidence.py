"""The collectors' evidence for the diagnosis (docs/diagnosis.md, docs/results.md): what each
family contributes to the summary over the measured window, from a target that says exactly
what it is asked (no server), and the CPU demand read from Linux's schedstat."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from harness.collectors.activation import ActivationCollector
from harness.collectors.base import Sample, SampleContext, WindowView
from harness.collectors.broker import BrokerCollector
from harness.collectors.host import HostCollector, thread_demand_ns
from harness.collectors.queues import QueueCollector, growth, theil_sen
from harness.collectors.throughput import ThroughputCollector
from harness.targets.base import PerfCounter


class ScriptedTarget:
    """Answers each collector's question from lists the test fills, one value per tick."""

    def __init__(self):
        self.tick = 0
        self.depths = []          # {"xmitq.i1": n, "queue": n} per tick
        self.counters = []        # [PerfCounter] per tick
        self.tasks = []           # (running, max readers) per tick
        self.procedure = None

    @property
    def telemetry(self):    # the target's telemetry interface is the target itself
        return self

    def queue_depths(self, exact=False):
        return self.depths[self.tick]

    def perf_counters(self):
        return self.counters[self.tick]

    def activated_tasks(self):
        return self.tasks[self.tick]

    def procedure_time(self, start, end):
        self.asked = (start, end)
        return self.procedure


def run(collectors, target, ticks):
    ctx = SampleContext(target=target, lock=threading.Lock())
    samples = []
    for i in range(ticks):
        target.tick = i
        for c in collectors:
            samples += [Sample(float(i), c.family, m, k, float(v)) for m, k, v in c.sample(ctx, float(i))]
    return ctx, samples


def test_queue_depth_growth_over_the_window_only():
    t = ScriptedTarget()
    # warm-up ticks 0-1 (a backlog), the window 2-11: the target queue grows 100/s, xmitq flat
    t.depths = [{"xmitq.i1": 5000, "queue": 9000}] * 2 + [{"xmitq.i1": 40 + (i % 2) * 10, "queue": 100 * i}
                                                          for i in range(2, 12)]
    q = QueueCollector()
    ctx, samples = run([q], t, 12)
    out = q.summary_fields(ctx, WindowView(2.0, 12.0, tuple(samples)))
    assert out["max_xmitq_depth"] == 50 and out["max_queue_depth"] == 1100
    assert out["queue_depth_growth"]["per_s"] == pytest.approx(100.0)
    assert out["queue_depth_growth"]["ci_low"] == pytest.approx(100.0) and out["queue_depth_growth"]["samples"] == 10
    assert (out["queue_depth_growth"]["first"], out["queue_depth_growth"]["last"]) == (200, 1100)
    assert abs(out["xmitq_depth_growth"]["per_s"]) < 5
    assert growth([(0.0, 1.0), (1.0, 2.0)]) is None        # fewer than 3 samples: no figure


@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning")  # scipy, flat depths
@pytest.mark.parametrize("seed", range(40))
def test_the_growth_interval_is_scipys_theil_sen(seed):
    """theil_sen is scipy.stats.theilslopes (the reference), ties in depths and times included,
    without scipy.stats imported into every run."""
    import numpy as np
    from scipy.stats import theilslopes

    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    ts = sorted(float(x) for x in np.round(rng.uniform(0, 10, n), int(rng.integers(0, 3))))
    if ts[-1] == ts[0]:
        ts[-1] += 1.0
    ys = [float(v) for v in np.round(rng.normal(50 * seed, 30, n) + rng.uniform(-200, 200) * np.array(ts))]
    if seed % 5 == 0:
        ys = [7.0] * n            # a flat depth: every slope 0
    for conf in (0.95, 0.9, 0.05):
        ref = theilslopes(ys, ts, alpha=conf)
        got = theil_sen(ys, ts, conf)
        want = (ref.slope, ref.low_slope, ref.high_slope)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12, nan_ok=True), (n, conf)


def test_transport_rate_and_receives_per_second():
    t = ScriptedTarget()
    st = "Broker Statistics"
    t.counters = [[PerfCounter(st, "Dequeued TransmissionQ Msgs/sec", "", 800.0 * i),
                   PerfCounter(st, "SQL RECEIVEs/sec", "", 20.0 * i)] for i in range(6)]
    b = BrokerCollector()
    ctx, samples = run([b], t, 6)
    assert b.summary_fields(ctx, WindowView(1.0, 6.0, tuple(samples))) == {"transport_rate": 800.0,
                                                                            "receives_per_s": 20.0}


def test_readers_against_max_queue_readers_and_task_limit():
    t = ScriptedTarget()
    act = "Broker Activation"
    t.counters = [[PerfCounter(act, "Task Limit Reached/sec", "_Total", 2.0 * i),
                   PerfCounter(act, "Tasks Started/sec", "_Total", 4.0)] for i in range(5)]
    t.tasks = [(2, 4), (4, 4), (4, 4), (3, 4), (4, 4)]
    a = ActivationCollector()
    ctx, samples = run([a], t, 5)
    out = a.summary_fields(ctx, WindowView(1.0, 5.0, tuple(samples)))
    assert out["activation_tasks_running"] == 3.75 and out["activation_max_readers"] == 4
    assert out["activation_at_max_share"] == 0.75 and out["activation_task_limit_per_s"] == 2.0


def test_the_procedures_own_time_per_message():
    t = ScriptedTarget()
    t.procedure = {"seconds": 4.8, "batch_seconds": 5.0, "messages": 5000.0, "receives": 50.0}
    c = ThroughputCollector()
    out = c.summary_fields(SampleContext(target=t, lock=threading.Lock()), WindowView(10.0, 15.0, ()))
    assert t.asked == (10.0, 15.0)
    assert out == {"procedure_busy": 0.96, "messages_per_receive": 100.0, "procedure_us_per_message": 1000.0}
    t.procedure = None                                     # a target that cannot tell: nothing
    assert c.summary_fields(SampleContext(target=t, lock=threading.Lock()), WindowView(10.0, 15.0, ())) == {}


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task"), reason="Linux schedstat only")
def test_cpu_demand_of_a_busy_process_is_near_all_of_the_time():
    """A process spinning on one thread wants a CPU all the time, whatever share it gets; a
    sleeping one does not."""
    spin = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass"])
    sleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        col = HostCollector()
        assert thread_demand_ns(spin.pid) and col._cpu_demand(spin.pid, time.time()) is None   # primes
        col._cpu_demand(sleep.pid, time.time())
        time.sleep(1.0)
        now = time.time()
        busy, idle = col._cpu_demand(spin.pid, now), col._cpu_demand(sleep.pid, now)
    finally:
        for p in (spin, sleep):
            p.kill()
            p.wait()
    assert max(busy) > 0.9, busy
    assert max(idle) < 0.05, idle
    assert thread_demand_ns(999_999_999) is None


def test_a_telemetry_that_cannot_tell_gives_no_evidence():
    """The diagnosis' optional methods of harness.targets.telemetry.Telemetry default to "cannot
    tell": the collectors that read them record nothing and add no summary field."""
    from harness.collectors.waits import BrokerWaitCollector, PageLatchCollector
    from harness.targets.telemetry import Telemetry

    class Minimal(Telemetry):
        telemetry = property(lambda self: self)

        def queue_depths(self, exact=False):
            return {"xmitq.i1": 0, "queue": 0}

        def messages_processed(self):
            return 0

        def e2e_latencies_us(self, start_epoch, end_epoch):
            return []

    t = Minimal()
    assert (t.activated_tasks(), t.procedure_time(0, 1), t.broker_waits(), t.page_latch_waiters()) == (None, None, [], [])
    collectors = [ActivationCollector(), BrokerWaitCollector(), PageLatchCollector(), ThroughputCollector()]
    ctx, samples = run(collectors, t, 3)
    assert not [s for s in samples if s.family in ("broker_waits", "page_latch")
                or s.metric in ("activated_tasks", "max_queue_readers")]
    window = WindowView(0.0, 3.0, tuple(samples))
    fields = {k: v for c in collectors for k, v in c.summary_fields(ctx, window).items()}
    assert not {"activation_tasks_running", "broker_waits", "page_latch_objects", "procedure_busy"} & set(fields)
