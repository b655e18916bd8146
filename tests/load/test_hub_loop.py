"""harness.load.sendloop.HubLoop on the real embedded sender (real PostgreSQL, real broker),
driven by gevent's hub in this process: every SEND it reports is one the database counts
(independently, after a drain); a connection killed under it is reported as a failed SEND,
reconnected and driven again; open loop keeps the slots; a stop lets go of the connection."""

from __future__ import annotations

import time

import gevent
import psycopg
import pytest

from harness.load.sendloop import HubLoop, backoff_waits
from harness.load.pacing import Schedule
from harness.targets.embedded.target import EmbeddedTarget
from support.embedded import settings

pytestmark = pytest.mark.slow

USERS = 4


@pytest.fixture(scope="module")
def target(pg_server):
    t = EmbeddedTarget(pg_server, prefix="ssbhub")
    t.provision(1)
    try:
        yield t
    finally:
        t.close()
        # these tests run gevent's hub in the test process's main thread; later tests that use
        # gevent (its thread pool) get a hub of their own, as each Locust worker has
        gevent.get_hub().destroy(destroy_loop=True)


@pytest.fixture
def senders(target):
    from harness.targets.base import open_sender

    target.prepare(1, "durable", settings())
    target.create_dialogs(1, USERS, 1)
    target.start()
    out = [open_sender(target.sender_spec(1)) for _ in range(USERS)]
    try:
        yield out
    finally:
        for s in out:
            s.close()
        target.stop()


def _loops(senders, pacers=None, **kw):
    """One loop per sender; after an error the loop SENDs through the blocking ``send`` on the
    hub's threadpool, as a Locust user's loop does."""
    from harness.load.blocking import Offload

    off = Offload(maxsize=16)
    loops = []
    for i, s in enumerate(senders):
        d = s.dialog(i + 1)
        loops.append(HubLoop(lambda dd, p, s=s: off.call(s, s.send, dd, p), d, b"x" * 100,
                             pacers[i] if pacers else None, pump=s.pump, **kw))
    return loops


def _run(loops, seconds: float) -> list[list]:
    got = [[] for _ in loops]
    for lp in loops:
        lp.start()
    end = time.monotonic() + seconds     # (the hub's cached loop time may be stale before it runs)
    while time.monotonic() < end:
        gevent.sleep(0.05)
        for g, lp in zip(got, loops):
            g.extend(lp.take())
    for lp in loops:
        lp.stop()
    for g, lp in zip(got, loops):
        assert lp.wait_done(10), "the loop did not stop"
        g.extend(lp.take())
        assert lp.crashed is None and not lp.gave_up
    return got


def test_every_send_it_reports_is_one_the_database_counts(target, senders):
    got = _run(_loops(senders), 1.5)
    ok = sum(1 for g in got for r in g if r[2] is None)
    assert all(len(g) > 50 for g in got), [len(g) for g in got]    # every user's connection was driven
    assert all(r[2] is None for g in got for r in g)
    counts = target.drain(60)
    assert counts.settled and counts.sent == counts.received == ok, (counts, ok)
    # completion times in order per user, elapsed times positive
    for g in got:
        assert all(a[0] <= b[0] for a, b in zip(g, g[1:])) and all(r[1] > 0 for r in g)


def test_a_killed_connection_is_one_failed_send_then_it_reconnects(target, senders):
    loops = _loops(senders[:1], waits=lambda: backoff_waits(0.01, 0.05))
    victim = senders[0]
    pid = victim._pg.backend_pid
    loops[0].start()
    gevent.sleep(0.3)
    with psycopg.connect(target.conninfo(target.initiator_db(1)), autocommit=True) as c:
        c.execute("SELECT pg_terminate_backend(%s)", (pid,))
    gevent.sleep(1.0)
    loops[0].stop()
    assert loops[0].wait_done(10)
    res = loops[0].take()
    errors = [r for r in res if r[2] is not None]
    assert 1 <= len(errors) <= 3, errors           # the SEND cut off (and a retry before the server took it)
    after = [r for r in res if r[0] > errors[-1][0]]
    assert len(after) > 20 and all(r[2] is None for r in after)   # driven again on a new connection
    assert victim._pg.backend_pid != pid
    ok = sum(1 for r in res if r[2] is None)
    counts = target.drain(60)
    # the SEND cut off may or may not have committed: the database says which, and the loop
    # never reports one as done that was not
    assert counts.settled and ok <= counts.sent <= ok + len(errors), (counts, ok, len(errors))


@pytest.mark.timing   # sends counted over a window timed by the clock
def test_open_loop_keeps_its_slots_and_a_stop_ends_a_slot_wait(target, senders):
    t0 = time.monotonic()
    schedule = Schedule(rate=200.0, users=USERS)
    got = _run(_loops(senders, [schedule.pacer(u) for u in range(USERS)]), 1.0)
    span = time.monotonic() - t0        # ~1 s, longer where the stop itself waits for a CPU
    n = sum(len(g) for g in got)
    assert 150 <= n <= 200 * span + 30, (n, span)   # 200/s over the span, all users together
    # stamped with its slot, completed after it (two clocks: time.time and the schedule's perf_counter
    # plus an offset taken once, so a few ms of slack for the wall clock's own adjustments)
    assert all(r[3] is not None and r[0] >= r[3] - 0.005 for g in got for r in g), \
        [(r[0], r[3]) for g in got for r in g if r[3] is None or r[0] < r[3] - 0.005][:5]
    # slow slots: a stop does not wait for the next one
    slow = Schedule(rate=0.5, users=1)
    lp = _loops(senders[:1], [slow.pacer(0)])[0]
    lp.start()
    gevent.sleep(0.2)
    lp.stop()
    assert lp.done()
