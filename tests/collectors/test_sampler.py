"""harness.collectors.base.Sampler: a failing collector never stops the sampling, and a target
that goes away is one warning line, not one per collector per tick."""

from __future__ import annotations

import logging
import threading

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
