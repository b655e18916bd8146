"""Dialog lifetime on the embedded target, for real (issue 18): messages_per_dialog 1 / N and
fire_and_forget through the sender's one-round-trip SEND, the target ending on a dialog's last
message, the initiator ending on the EndDialog, Error messages received or lost; every
message accounted for and counted independently in the database."""

from __future__ import annotations

import pytest

from harness.targets.base import open_sender
from support.embedded import db, deliver, provisioned, settings

pytestmark = pytest.mark.slow

PREFIX = "ssbdl"


@pytest.fixture(scope="module")
def target(pg_server):
    with provisioned(pg_server, PREFIX, 1) as t:
        yield t


def _process(target):
    """Deliver, process every message on the target (the activation procedure in-line) and
    deliver the replies back, until nothing moves."""
    for _ in range(6):
        deliver(target, 1)
        with db(target, target.target_db) as c:
            c.execute("CALL ssb.activated_task(NULL, 0, 0)")
        deliver(target, 1)


def _states(target, db_name, table):
    with db(target, db_name) as c:
        return dict(c.execute(f"SELECT state, count(*) FROM ssb.{table} GROUP BY state").fetchall())


def _run(target, per_dialog, ff, messages, slots=2, payload=b"m" * 40):
    target.prepare(1, "durable", settings())
    target.create_dialogs(1, slots, 1)
    s = open_sender(target.sender_spec(1))
    try:
        s.set_dialog_lifetime(per_dialog, ff)
        handles = [s.dialog(k) for k in range(1, slots + 1)]
        for n in range(messages):
            s.send(handles[n % slots], payload)
        return s.dialogs_begun, s.dialogs_ended
    finally:
        s.close()


@pytest.mark.parametrize("per_dialog,ff", [(1, False), (1, True), (3, False), (3, True)])
def test_every_message_and_dialog_accounted_for(target, per_dialog, ff):
    messages = 12
    begun, ended = _run(target, per_dialog, ff, messages)
    _process(target)
    counts = target.counts()
    assert counts.sent == messages and counts.received == messages and counts.in_flight == 0
    # the per-dialog check: a retired dialog's EndDialog is not a data message it sent
    assert counts.phantoms == 0 and counts.lost == 0 and counts.settled, counts
    stats = target.dialog_stats()
    # counted by the sender and, independently, by the database (config counters and rows)
    assert begun == stats["dialogs_begun"] == messages // per_dialog
    with db(target, target.initiator_db(1)) as c:
        rows = c.execute("SELECT count(*) FROM ssb.sysdesend WHERE retired").fetchone()[0]
        drop = target._one(target.target_db, "SELECT count(DISTINCT diag_id) FROM ssb.message_drop "
                                             "WHERE NOT warmup")
    assert rows == begun and drop == begun, "every dialog begun carried its messages to the target"
    assert ended == (begun if ff else 0)            # fire and forget: the sender ENDs
    assert stats["dialogs_ended"] == begun          # either way every retired dialog ends here
    ep = stats["endpoints"]
    # every retired dialog is closed on both sides and lingers (sys.conversation_endpoints);
    # the slots' dialogs (never sent on here: no warm-up) are still conversing
    assert ep == {"initiator.CD": begun, "initiator.CO": 2, "target.CD": begun}, ep
    assert stats["errors_lost"] == stats["errors_received"] == 0


def test_unlimited_keeps_the_slot_dialog(target):
    begun, _ = _run(target, None, False, 10)
    _process(target)
    c = target.counts()
    assert c.received == 10 and begun == 0
    assert c.phantoms == 0 and c.lost == 0, c      # a conversing dialog's last message is data
    stats = target.dialog_stats()
    assert stats["dialogs_begun"] == stats["dialogs_ended"] == 0
    assert stats["endpoints"] == {"initiator.CO": 2, "target.CO": 2}   # both slots used


@pytest.mark.parametrize("ff", [False, True])
def test_fire_and_forget_loses_the_targets_error(target, ff):
    """A message the target cannot process on a finishing dialog is answered with END
    CONVERSATION WITH ERROR: a listening initiator receives the Error; one that ended right
    after its SEND (fire and forget) has nobody to receive it: lost."""
    target.prepare(1, "durable", settings())
    target.create_dialogs(1, 1, 1)
    s = open_sender(target.sender_spec(1))
    try:
        s.set_dialog_lifetime(1, ff)
        h = s.dialog(1)
        s.send(h, b"fine")
        s.send(h, b"POISON here")
        s.send(h, b"fine again")
    finally:
        s.close()
    _process(target)
    counts = target.counts()
    assert counts.sent == 3 and counts.received == 2 and counts.poison == 1 and counts.in_flight == 0
    assert counts.phantoms == 0 and counts.lost == 0, counts
    stats = target.dialog_stats()
    assert (stats["errors_lost"], stats["errors_received"]) == ((1, 0) if ff else (0, 1)), stats
    assert stats["dialogs_begun"] == stats["dialogs_ended"] == 3
    assert stats["endpoints"]["initiator.CD"] == 3 and stats["endpoints"]["target.CD"] == 3, stats
    with db(target, target.initiator_db(1)) as c:
        # nothing left for anyone to RECEIVE on the initiator: the received Error was consumed
        # by the initiator's (emulated) activated procedure, the lost one never queued
        assert c.execute("SELECT count(*) FROM ssb.initiator_queue WHERE msgtype = 3").fetchone()[0] == 0
