"""harness.collectors.base.Sampler: a failing collector never stops the sampling, and a target
that goes away is one warning line, not one per collector per tick."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from harness.collectors.base import Collector, SampleContext, Sampler
from harness.errors import TargetError


class Failing(Collector):
    def __init__(self, family: str, error: Exception):
        self.family = family
        self.error = error

    def sample(self, ctx, now):
        raise self.error


class Counting(Collector):
    family = "ok"

    def sample(self, ctx, now):
        return [("n", "", 1.0)]


def test_collectors_that_fail_alike_share_one_line_and_repeat_only_after_a_while(caplog):
    down = TargetError("the embedded PostgreSQL server is not running")
    sampler = Sampler(SampleContext(target=None, lock=threading.Lock()),
                      [Failing("broker", down), Counting(), Failing("waits", down), Failing("queues", down),
                       Failing("host", ValueError("bad reading"))])
    with caplog.at_level(logging.WARNING, logger="harness.collectors.base"):
        for _ in range(5):
            assert len(sampler.tick()) == 1          # the others still sample
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["collectors broker, waits, queues: TargetError: the embedded PostgreSQL server is not running",
                     "collector host: ValueError: bad reading"], lines
    assert len(sampler.errors) == 20                 # every failure is recorded, only the terminal is spared
    sampler.WARN_EVERY_S = 0.0
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="harness.collectors.base"):
        sampler.tick()
    assert caplog.records[0].getMessage().endswith("(and 12 more failures since)")


@pytest.mark.untimed("a lower bound: a slower host only lengthens the wait")
def test_the_wait_for_references_ends_when_the_probes_idle_references_are_in():
    """A real CPU speed probe with a 0.3 s reference: the wait lasts until its first probe is
    0.3 s old (the swarm's first SEND comes after), and a stop ends it at once."""
    from harness.collectors._probe import RunReferences
    from harness.collectors.cpuspeed import CpuProbe, CpuSpeedCollector

    class Short(CpuSpeedCollector):
        references = RunReferences()

        def make_probe(self, ctx):
            return CpuProbe(interval=0.05, reference_interval=0.01, reference_s=0.3)

    s = Sampler(SampleContext(target=None, lock=threading.Lock()), [Counting(), Short()], interval=0.05)
    s.start()
    try:
        waited = s.wait_for_references()
        first = s.collectors[1].probe.samples[0][0]
        assert 0.25 <= waited < 2.0 and not s.collectors[1].reference_pending()
        assert time.time() - first >= 0.3
    finally:
        s.stop()
    never = Sampler(SampleContext(target=None, lock=threading.Lock()), [Short()], interval=0.05)  # never started
    stop = threading.Event()
    stop.set()
    assert never.wait_for_references(stop) < 0.1
    assert not Counting().reference_pending()
