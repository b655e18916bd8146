"""RECEIVE stays linear in the queue's size whatever the planner's statistics say (issue 30).

The stall of issue 30: autovacuum vacuumed the target queue while it was momentarily empty and
could not truncate it (its lock was never free), so pg_class said "many pages, no tuples" and
the planner took the queue for a one-row table. RECEIVE's DELETE ... WHERE queuing_order IN
(SELECT ... LIMIT top) was then planned as a nested loop that ran the subquery once per queued
message: 3.5 to 8 seconds of CPU for one batch of one shared dialog, with its conversation
group locked, so no other reader could receive anything. These tests build that state on
purpose (VACUUM (TRUNCATE false) of an emptied queue) and time RECEIVE on it.
"""

from __future__ import annotations

import time

import pytest

from support import machine
from support.embedded import db, provisioned, settings

pytestmark = pytest.mark.slow

PREFIX = "ssbrp"
MESSAGES = 20_000


@pytest.fixture(scope="module")
def target(pg_server):
    with provisioned(pg_server, PREFIX) as t:
        yield t


def _fill(c, group, n: int) -> None:
    c.execute("INSERT INTO ssb.service_queue (conv_group, handle, diag_id, initiator, msgseqnum, msgtype, msgbody) "
              "SELECT %s, gen_random_uuid(), gen_random_uuid(), 1, i, 1, "
              "'\\x5353423100000000000000000000000000'::bytea || decode(repeat('ab', 100), 'hex') "
              "FROM generate_series(1, %s) i", (group, n))


def _stale_statistics(c, group) -> tuple[int, float]:
    """The state autovacuum leaves when it vacuums an emptied queue it cannot truncate: many
    pages, no live tuples. Returns (relpages, reltuples)."""
    _fill(c, group, MESSAGES)
    c.execute("DELETE FROM ssb.service_queue")
    c.execute("VACUUM (TRUNCATE false, ANALYZE) ssb.service_queue")
    return c.execute("SELECT relpages, reltuples FROM pg_class WHERE oid = 'ssb.service_queue'::regclass").fetchone()


def test_receive_of_a_large_group_is_fast_with_stale_statistics(target):
    """One conversation group with 20,000 messages (one shared dialog behind), statistics that
    say the queue is empty: RECEIVE TOP (10000) takes well under a second (the former plan took
    seconds of CPU, growing with the square of the queue)."""
    target.prepare(1, "delayed", settings())
    with db(target, target.target_db) as c:
        group = c.execute("INSERT INTO ssb.conversation_groups VALUES (gen_random_uuid()) RETURNING group_id").fetchone()[0]
        pages, tuples = _stale_statistics(c, group)
        assert pages > 100 and tuples == 0, (pages, tuples)
        _fill(c, group, MESSAGES)
        timings = []
        for _ in range(2):
            with c.transaction(force_rollback=True):
                t0 = time.perf_counter()
                got = c.execute("SELECT count(*), min(message_sequence_number), max(message_sequence_number) "
                                "FROM ssb.receive(10000, 0)").fetchone()
                timings.append(time.perf_counter() - t0)
            assert got == (10000, 1, 10000), got
    assert min(timings) < 1.0, f"RECEIVE TOP (10000) of one group took {timings} s on stale statistics"


@pytest.mark.untimed("its time bounds are stretched to this machine (support.machine.allowance)")
def test_receive_takes_at_most_top_in_order_and_other_groups_stay_free(target):
    """The rewritten RECEIVE keeps its contract: TOP, order, one group, the group held until the
    transaction ends, another reader served from another group."""
    target.prepare(1, "delayed", settings())
    with db(target, target.target_db) as a, db(target, target.target_db) as b:
        g1, g2 = (a.execute("INSERT INTO ssb.conversation_groups VALUES (gen_random_uuid()) RETURNING group_id")
                  .fetchone()[0] for _ in range(2))
        _fill(a, g1, 30)
        _fill(a, g2, 5)
        with a.transaction(force_rollback=True), b.transaction(force_rollback=True):
            ra = a.execute("SELECT conversation_group_id, message_sequence_number FROM ssb.receive(7, 0)").fetchall()
            assert [r[1] for r in ra] == list(range(1, 8)) and {r[0] for r in ra} == {g1}
            rb = b.execute("SELECT conversation_group_id, message_sequence_number FROM ssb.receive(100, 0)").fetchall()
            assert [r[1] for r in rb] == list(range(1, 6)) and {r[0] for r in rb} == {g2}
            # both groups held: a third reader gets nothing and does not wait for them
            with db(target, target.target_db) as c:
                t0 = time.perf_counter()
                assert c.execute("SELECT count(*) FROM ssb.receive(100, 200)").fetchone()[0] == 0
                assert time.perf_counter() - t0 < machine.allowance(2.0)
