"""settle(): the steady state the embedded target reaches before each measured window (issue
24): the warm-up's dead rows vacuumed, WAL segments in reserve, a checkpoint, durability
untouched."""

from __future__ import annotations

import time

import pytest

from harness.targets.embedded.target import WAL_RESERVE_SEGMENTS
from support import machine
from support.embedded import db, provisioned, settings

pytestmark = pytest.mark.slow

PREFIX = "ssbst"


@pytest.fixture(scope="module")
def target(pg_server):
    with provisioned(pg_server, PREFIX) as t:
        yield t


@pytest.mark.untimed("its time bounds are stretched to this machine (support.machine.allowance)")
def test_settle_vacuums_reserves_wal_and_checkpoints_without_touching_durability(target):
    target.prepare(1, "durable", settings())
    target.create_dialogs(1, 8, 150)
    target.warm_up(1)
    with db(target, "postgres") as pg, db(target, target.target_db) as tgt:
        before = pg.execute("SELECT checkpoint_time FROM pg_control_checkpoint()").fetchone()[0]
        dead = tgt.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'ssb.service_queue'::regclass"
                           ).fetchone()[0]
        t0 = time.monotonic()
        target.settle()
        took = time.monotonic() - t0
        after = pg.execute("SELECT checkpoint_time FROM pg_control_checkpoint()").fetchone()[0]
        assert after > before, "no checkpoint"
        segments = pg.execute("SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'").fetchone()[0]
        assert segments >= WAL_RESERVE_SEGMENTS
        vac = tgt.execute("SELECT last_vacuum IS NOT NULL, last_analyze IS NOT NULL FROM pg_stat_user_tables "
                          "WHERE relid = 'ssb.service_queue'::regclass").fetchone()
        assert vac == (True, True), (vac, dead)
        # the emptied queue table was truncated: the planner sizes it from its real pages again
        assert tgt.execute("SELECT relpages FROM pg_class WHERE oid = 'ssb.service_queue'::regclass").fetchone()[0] == 0
        with db(target, target.initiator_db(1)) as ini:
            assert ini.execute("SHOW synchronous_commit").fetchone()[0] == "on"
        assert pg.execute("SHOW fsync").fetchone()[0] == "on"
    assert took < machine.allowance(60), took
    target.start()
    try:
        with pytest.raises(Exception, match="before start"):
            target.settle()
    finally:
        target.stop()
