"""The host collector's noisy-host detector: a real CPU hog outside ssbench's process tree is
seen as other processes' CPU and flags the window; ssbench's own children are not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from harness.collectors.base import Sample, SampleContext, WindowView
from harness.collectors.host import NOISY_OTHER_CPU, HostCollector

REPO = Path(__file__).resolve().parents[2]

HOG = "import time\nend = time.time() + 60\nwhile time.time() < end: pass\n"


class LocalTarget:
    """Only what the host collector asks of a target's telemetry: no server processes on this host."""

    @property
    def telemetry(self):
        return self

    def server_pids(self):
        return []

    def server_cpu_ms(self):
        return {}


def sample_for(collector, seconds, client_pids=dict, ctx=None):
    ctx = ctx or SampleContext(target=LocalTarget(), lock=threading.Lock(), client_pids=client_pids)
    samples = []
    t0 = time.time()
    collector.sample(ctx, t0)  # primes per-process counters
    end = t0 + seconds
    while time.time() < end:
        time.sleep(0.5)
        now = time.time()
        samples += [Sample(now, "host", m, k, v) for m, k, v in collector.sample(ctx, now)]
    return ctx, WindowView(t0, time.time() + 1, tuple(samples))


class RemoteServers(LocalTarget):
    """Two remote servers (SQL Server instances): CPU milliseconds so far, and their CPUs."""

    now = 0.0

    def server_cpu_ms(self):
        return {"target": (1500.0 * self.now, 4), "init1": (500.0 * self.now, 2)}


def test_a_remote_servers_cpu_covers_the_window_in_one_unit():
    """Issue 52, item 8: a remote server's CPU is sampled every tick (SQL Server: its resource
    pools' cumulative CPU), so a 4 s window has its own figure (the scheduler-monitor ring
    buffer has one record a minute, read once after the drain), in percent of one core as the
    embedded target's server processes; utilization is the busiest server's share of its CPUs."""
    target, col = RemoteServers(), HostCollector()
    ctx = SampleContext(target=target, lock=threading.Lock())
    samples = []
    for k in range(7):
        target.now = 1000.0 + k
        samples += [Sample(target.now, "host", m, key, v) for m, key, v in col.sample(ctx, target.now)]
    fields = col.summary_fields(ctx, WindowView(1001.5, 1005.5, tuple(samples)))
    assert fields["server_cpu_percent"] == 200.0              # 1.5 + 0.5 cores
    assert fields["server_cpu_utilization"] == 0.375 and fields["server_on_host"] is False


class BoxedServer(LocalTarget):
    """A 'server' that is one busy process, in a cgroup of its own with a CPU quota."""

    def __init__(self, pid: int):
        self.pid = pid

    def server_pids(self):
        return [self.pid]


@pytest.mark.timing   # shares of a core, measured
def test_a_servers_cgroup_cpu_quota_is_its_cpus():
    """A local server in a container (docker --cpus) may use its cgroup's quota, not the host's
    CPUs: its utilization is the share of the quota its cgroup used (tools/slow-machine makes
    the cgroup: a real cgroup v1 or v2 quota of half a CPU over a real busy process)."""
    box = subprocess.Popen([sys.executable, str(REPO / "tools" / "slow-machine"), "--cpus", "0.5", "--",
                            sys.executable, "-c", HOG], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            kids = psutil.Process(box.pid).children()
            if kids or box.poll() is not None:
                break
            time.sleep(0.05)
        if box.poll() == 2:
            pytest.skip(f"no CPU quota can be set here: {box.stderr.read().strip()}")
        hog = kids[0]
        t0, c0 = time.monotonic(), sum(hog.cpu_times()[:2])
        col = HostCollector()
        ctx = SampleContext(target=BoxedServer(hog.pid), lock=threading.Lock(), client_pids=dict)
        _, view = sample_for(col, 2.5, ctx=ctx)
        hog_share = (sum(hog.cpu_times()[:2]) - c0) / (time.monotonic() - t0) / 0.5
        fields = col.summary_fields(ctx, view)
    finally:
        box.terminate()
        box.wait(10)
        box.stderr.close()
    assert fields["server_cpu_quota"] == 0.5, fields
    # the quota's share in use: what the process in it was measured to use, not its share of
    # the host's CPUs (at most a quarter here, whatever the quota let it have)
    assert fields["server_cpu_utilization"] >= 0.8 * hog_share > 0, (fields, hog_share)
    on_host = fields["server_cpu_percent"] / (100.0 * psutil.cpu_count())   # the host's CPUs' share
    assert fields["server_cpu_utilization"] >= 0.8 * psutil.cpu_count() / 0.5 * on_host, (fields, on_host)


class ChurningServer(LocalTarget):
    """A 'server' of one busy process and, at every tick, a new one (a connection's backend,
    an activation task): its process set is never the same twice."""

    def __init__(self, pid: int):
        self.pid, self.spawned = pid, []

    def server_pids(self):
        self.spawned.append(subprocess.Popen(["sleep", "30"]))
        return [self.pid, self.spawned[-1].pid]


@pytest.mark.timing   # shares of a core, measured
def test_a_server_whose_processes_come_and_go_has_its_cpu_demand():
    """The server's demand (its processes on a CPU or waiting for one) is summed over whatever
    processes it has at each tick, a new one counted from its start: the embedded server's
    backends and activation tasks come and go, and a window's figure must not depend on
    whether one started in it."""
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    target = ChurningServer(hog.pid)
    try:
        time.sleep(0.3)
        proc = psutil.Process(hog.pid)
        t0, c0 = time.monotonic(), sum(proc.cpu_times()[:2])
        col = HostCollector()
        ctx = SampleContext(target=target, lock=threading.Lock(), client_pids=dict)
        _, view = sample_for(col, 2.5, ctx=ctx)
        hog_pct = (sum(proc.cpu_times()[:2]) - c0) / (time.monotonic() - t0) * 100
        fields = col.summary_fields(ctx, view)
    finally:
        for p in [hog, *target.spawned]:
            p.kill()
            p.wait()
    assert hog_pct > 10, hog_pct
    assert fields["server_cpu_demand"] is not None and fields["server_cpu_demand"] >= 0.7 * hog_pct, (fields, hog_pct)


def orphan_hog() -> int:
    """A busy process that is not a descendant of this one (its parent shell exits at once)."""
    out = subprocess.run(["sh", "-c", f"{sys.executable} -c '{HOG}' >/dev/null 2>&1 & echo $!"],
                         capture_output=True, text=True, check=True)
    pid = int(out.stdout.strip())
    assert pid not in {c.pid for c in psutil.Process().children(recursive=True)}
    return pid


@pytest.mark.timing   # shares of a core, measured
def test_a_cpu_hog_outside_ssbench_flags_the_window():
    pid = orphan_hog()
    try:
        time.sleep(0.3)
        col = HostCollector()
        ctx, view = sample_for(col, 2.0)
        fields = col.summary_fields(ctx, view)
    finally:
        os.kill(pid, signal.SIGKILL)
    assert fields["other_cpu_percent"] > 60, fields   # the hog takes most of one core
    assert fields["noisy_host"] is True


@pytest.mark.timing   # shares of a core, measured
def test_ssbench_own_children_are_not_other():
    """A busy child (as the Locust workers and the broker are) counts as client, not other."""
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        time.sleep(0.3)
        proc = psutil.Process(hog.pid)
        t0, c0 = time.monotonic(), sum(proc.cpu_times()[:2])
        col = HostCollector()
        ctx, view = sample_for(col, 2.0)
        hog_pct = (sum(proc.cpu_times()[:2]) - c0) / (time.monotonic() - t0) * 100
        fields = col.summary_fields(ctx, view)
    finally:
        hog.kill()
        hog.wait()
    # the child's CPU (whatever share of a core a shared machine gave it) is counted as
    # ssbench's own; "other" is the machine's busy CPU minus ssbench's and the server's, so it
    # cannot contain it
    assert hog_pct > 10, hog_pct
    assert fields["client_cpu_percent"] >= 0.7 * hog_pct, (fields, hog_pct)


@pytest.mark.parametrize("other, steal, noisy", [(0.0, 0.0, False), (NOISY_OTHER_CPU + 1, 0.0, True),
                                                 (0.0, 6.0, True), (NOISY_OTHER_CPU - 1, 4.9, False)])
def test_noisy_thresholds(other, steal, noisy):
    samples = tuple(Sample(t, "host", m, "", v) for t in (1.0, 2.0)
                    for m, v in (("other_cpu_percent", other), ("steal_percent", steal)))
    fields = HostCollector().summary_fields(SampleContext(LocalTarget(), threading.Lock()),
                                            WindowView(0.0, 3.0, samples))
    assert fields["noisy_host"] is noisy
