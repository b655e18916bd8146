"""The knobs that build a bottleneck on purpose (docs/embedded.md, "Building a bottleneck"), and
the diagnosis' evidence the embedded target gives (docs/diagnosis.md), against a real embedded
server and broker process: the activation procedure's own work per message
(broker.processing_us_per_message, both targets), the transport's rate limit and the client's
CPU per SEND (emulation knobs), the readers against MAX_QUEUE_READERS, the procedure's time
and the target queue's depth."""

from __future__ import annotations

import select
import time

import pytest

from harness.targets.base import open_sender
from harness.targets.embedded.sender import burn_cpu
from harness.targets.embedded.transport import RateLimit
from harness.targets.embedded.waits import map_wait
from support import machine
from support.embedded import deliver, provisioned, send_many, settings, wait_for

@pytest.fixture(scope="module")
def target(pg_server):
    with provisioned(pg_server, "ssbk") as t:
        yield t


# --------------------------------------------------------------------------- units

def test_a_reader_doing_its_own_work_waits_in_waitfor_not_in_receive():
    assert map_wait("Timeout", "PgSleep", "ssbench-reader-3") [2:] == ("BROKER_RECEIVE_WAITFOR", True)
    assert map_wait("Timeout", "PgSleep", "ssbench-reader-3/processing")[2:] == ("WAITFOR", False)


def test_rate_limit_is_a_token_bucket():
    now = [100.0]
    r = RateLimit(200.0, clock=lambda: now[0])
    assert r.burst == 20.0
    assert r.allowance() == (20, 0.0)             # a tenth of a second's worth at once
    r.spend(20)
    n, wait = r.allowance()
    assert n == 0 and wait == pytest.approx(1 / 200)
    now[0] += 0.05                                # 10 more tokens
    assert r.allowance()[0] in (9, 10)          # (floating point)
    now[0] += 60                                  # never more than the burst
    assert r.allowance()[0] == 20
    moved = 0
    for _ in range(1000):                         # 5 s of calls: at most rate x time + burst
        now[0] += 0.005
        n, _ = r.allowance()
        r.spend(n)
        moved += n
    assert 980 <= moved <= 1000 + 20


def test_burn_cpu_spends_thread_cpu():
    t0 = time.thread_time_ns()
    burn_cpu(3000)
    assert time.thread_time_ns() - t0 >= 3_000_000


# --------------------------------------------------------------------------- against the server

@pytest.mark.slow
@pytest.mark.untimed("lower bounds are the knob's own work or rate limit; its time bounds are stretched to this "
                     "machine (support.machine.allowance)")
def test_processing_cost_per_message_and_the_readers(target):
    """One reader, 2 ms of work per message: the tally says about 2 ms per message, the reader
    is busy, its sleep is reported as WAITFOR; warm-up messages are not charged."""
    target.prepare(1, "delayed", settings(max_queue_readers=1, receive_top=20, waitfor_timeout_ms=300,
                                          processing_us_per_message=2000))
    target.create_dialogs(1, 10, 1)
    t0 = time.monotonic()
    target.warm_up(1)                            # 10 warm-up messages, in-line: not charged
    assert time.monotonic() - t0 < machine.allowance(10)
    sent = send_many(target, 1, 15)              # 150 messages
    deliver(target)
    assert target.queue_depths() ["queue"] == target.queue_depths(exact=True)["queue"] == sent
    start = time.time()
    try:
        target.start()
        seen = wait_for(lambda: target.activated_tasks()[0] == 1 and target.activated_tasks(), 10, "the reader")
        assert seen == (1, 1)
        wait_for(lambda: target.counts().received == sent, 30, "the messages")
        end = time.time()
    finally:
        target.stop()                            # the wait sampler flushes what it has
    waits = {w.wait_type: w.wait_time_ms for w in target.wait_stats()}
    t = target.procedure_time(start, end)
    assert t["messages"] == sent and t["receives"] >= sent / 20
    per_message_us = t["batch_seconds"] * 1e6 / t["messages"]
    assert 2000 <= per_message_us < 2000 + machine.allowance(4000), per_message_us
    assert t["seconds"] == pytest.approx(t["batch_seconds"], rel=0.05)   # every batch inside the window
    assert end - start >= sent * 0.002            # one reader cannot beat its work
    assert waits.get("WAITFOR", 0) >= 0.5 * sent * 2   # ms: most of the work sampled as WAITFOR
    assert target.queue_depths()["queue"] == 0


@pytest.mark.slow
@pytest.mark.untimed("lower bounds are the knob's own work or rate limit; its time bounds are stretched to this "
                     "machine (support.machine.allowance)")
def test_transport_rate_limit(target):
    """--transport-rate 300: 900 messages take about 3 s to reach the target (the bucket's burst
    of a tenth of a second's worth at most ahead)."""
    target.prepare(1, "delayed", settings(max_queue_readers=2, transport_rate_limit=300))
    target.create_dialogs(1, 30, 1)
    sent = send_many(target, 1, 30)
    assert sent == 900
    try:
        t0 = time.monotonic()
        target.start()
        wait_for(lambda: target.counts().received == sent, 30, "the messages")
        elapsed = time.monotonic() - t0
    finally:
        target.stop()
    assert (sent - 30) / 300 <= elapsed < machine.allowance(15), elapsed


@pytest.mark.slow
def test_client_cpu_per_send_reaches_the_sender(target):
    target.prepare(1, "delayed", settings(client_cpu_us_per_send=4000))
    spec = target.sender_spec(1)
    assert spec["client_cpu_us_per_send"] == 4000
    target.create_dialogs(1, 1, 1)
    s = open_sender(spec)
    try:
        h = s.dialog(1)
        t0 = time.thread_time_ns()
        for _ in range(5):
            s.send(h, b"x" * 40)
        assert time.thread_time_ns() - t0 >= 5 * 4_000_000
        pump = s.pump(h, b"x" * 40)              # the hub loop's path costs the same
        t0 = time.thread_time_ns()
        pump.begin()
        assert time.thread_time_ns() - t0 >= 4_000_000
        done, error = False, None
        while not done:
            select.select([pump.fileno], [], [], 5)
            done, error = pump.read()
        assert error is None
    finally:
        s.close()
    target.prepare(1, "delayed", settings())
    assert "client_cpu_us_per_send" not in target.sender_spec(1)
