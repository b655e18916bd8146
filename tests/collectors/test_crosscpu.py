"""harness.collectors.crosscpu: the cross-CPU probe, real processes pinned to real CPUs. Two
CPUs bounce a cache line in well under a microsecond; one CPU, where each side must wait for
the scheduler to run the other, takes milliseconds: the figure is the CPUs' communication."""

from __future__ import annotations

import statistics
import subprocess
import threading
import time

import psutil
import pytest

from harness.collectors.base import SampleContext, Sampler
from harness.collectors.crosscpu import CrossCpuCollector, CrossCpuProbe, probe_cmd, probe_cpus
from support.embedded import REPO

pytestmark = pytest.mark.skipif(probe_cpus() is None, reason="needs Linux and at least two CPUs for this process")


@pytest.mark.timing   # a latency: on a loaded host the partner misses the probe's 50 ms (nan)
def test_two_cpus_answer_in_under_a_microsecond_and_one_cpu_takes_the_scheduler():
    cpus = probe_cpus()
    cross = subprocess.run(probe_cmd(cpus[0], cpus[1], 100, 5), input="\n" * 5, capture_output=True, text=True,
                           timeout=60, cwd=REPO)
    same = subprocess.run(probe_cmd(cpus[0], cpus[0], 3, 1), input="\n", capture_output=True, text=True, timeout=60,
                          cwd=REPO)
    assert cross.returncode == 0 and same.returncode == 0, cross.stderr + same.stderr
    across = statistics.median(float(x) for x in cross.stdout.split())
    alone = float(same.stdout.split()[0])
    assert 10 < across < 5_000, cross.stdout
    assert alone > 50 * across, (alone, across)


@pytest.mark.timing   # the window's figure, a latency
def test_the_collector_records_a_window_figure_and_leaves_no_process_behind():
    me = psutil.Process()
    s = Sampler(SampleContext(target=None, lock=threading.Lock()), [CrossCpuCollector()], interval=0.25)
    t0 = time.time()
    s.start()
    time.sleep(1.6)
    # a loaded machine may start the probe's processes late or leave its first probes unanswered
    # (nan): wait for three ticks with a figure, bounded as a hang
    deadline = time.time() + 60
    while len(s.samples) < 3 and time.time() < deadline:     # its only samples: round_trip_ns
        time.sleep(0.25)
    probe: CrossCpuProbe = s.collectors[0].probe
    helper = psutil.Process(probe.proc.pid)
    family = helper.children()
    assert len(family) == 1 and set(helper.cpu_affinity()) == {probe_cpus()[0]}
    assert set(family[0].cpu_affinity()) == {probe_cpus()[1]}
    s.stop()
    fields = s.summary_fields(t0, time.time())
    # across two CPUs: nanoseconds to microseconds, where one CPU takes the scheduler's milliseconds
    assert 10 < fields["cross_cpu_ns"] < 50_000, fields
    assert not s.errors
    assert not helper.is_running() or helper.status() == psutil.STATUS_ZOMBIE
    assert not any(p.pid == family[0].pid for p in me.children(recursive=True))


@pytest.mark.untimed("a hang bound: the probe's own limit plus 3 s")
def test_a_stopped_partner_gives_nan_not_a_hang_and_a_killed_probe_takes_its_partner_along():
    """Real signals: the partner SIGSTOPped, the next probe answers ``nan`` (no answer within
    50 ms) instead of waiting for it; the probe process SIGKILLed, its partner exits on its own.
    (A partner stopped in the middle of a burst, PROBE_LIMIT_S, cannot be hit on purpose: a
    probe's bursts last a fraction of a millisecond.)"""
    import math
    import os
    import signal

    from harness.collectors.crosscpu_probe import PROBE_LIMIT_S

    cpus = probe_cpus()
    p = subprocess.Popen(probe_cmd(cpus[0], cpus[1], 100, 5), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         bufsize=1, cwd=REPO)
    try:
        for _ in range(100):    # a loaded host may leave the first probes unanswered (nan)
            p.stdin.write("\n")
            p.stdin.flush()
            first = float(p.stdout.readline())
            if not math.isnan(first):
                break
        assert 10 < first < 50_000
        partner = psutil.Process(p.pid).children()[0]
        partner.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        p.stdin.write("\n")
        p.stdin.flush()
        line = p.stdout.readline()
        assert time.monotonic() - t0 < PROBE_LIMIT_S + 3 and (math.isnan(float(line))), line
        partner.send_signal(signal.SIGCONT)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        assert partner.wait(timeout=5) is not None or not partner.is_running()
    finally:
        if p.poll() is None:
            p.kill()
