"""Faults of the account itself (issue 55): the target's drop table altered mid-window, in one
transaction, with real rows. The run must report what the databases hold (counted by
conftest_faults.audit, without ssbench's accounting): a duplicate never hides a loss, nor does a
message under a sequence number never sent hide a gap."""

from __future__ import annotations

import time

import psycopg
import pytest
from conftest_faults import (Audit, audit, check_account, count_figures, finish, rep_summary, ssbench, start_run,
                             write_matrix)

pytestmark = [pytest.mark.slow, pytest.mark.swarm,
              pytest.mark.untimed("the account is counted in the databases; no figure depends on the host's speed")]

#: rows of an initiator each fault touches: the window (open loop, 50 SENDs/s) has them 3 s in
ROWS = 50


def measured(initiator: int) -> str:
    return f"FROM ssb.message_drop WHERE initiator = {initiator} AND NOT warmup"


def _tamper(*statements: str, rows_needed: dict[int, int]) -> None:
    """Once each initiator ``i`` of ``rows_needed`` has ``rows_needed[i]`` measured messages
    processed, run ``statements`` in one transaction on the target database (the run's own
    server: this test process's)."""
    from harness.targets.embedded.target import EmbeddedTarget

    t = EmbeddedTarget()
    try:
        with psycopg.connect(t.conninfo(t.target_db), autocommit=True) as c:
            deadline = time.monotonic() + 60
            for i, n in rows_needed.items():
                while c.execute(f"SELECT count(*) {measured(i)}").fetchone()[0] < n:
                    assert time.monotonic() < deadline, "the run processed too few messages to tamper with"
                    time.sleep(0.1)
            with c.transaction():
                for sql in statements:
                    assert c.execute(sql).rowcount == ROWS, sql
    finally:
        t.close()


def _reported_as_audited(out, injected: Audit, figures) -> tuple[dict, Audit]:
    """The audit finds exactly what the test did, and the run reports it, per initiator (the
    figures counted first: a run that hid the loss shows in the suite's closing line)."""
    a, s = audit(2), rep_summary(out)
    count_figures(a, s, figures, injected)
    assert (a.missing, a.duplicates, a.phantoms, a.queued) == (injected.missing, injected.duplicates,
                                                               injected.phantoms, 0), a
    assert [(p["initiator"], p["lost"], p["duplicates"], p["phantoms"]) for p in s["per_initiator"]] == [
        (i, a.of(i, "missing"), a.of(i, "duplicates"), a.of(i, "phantoms")) for i in (1, 2)], s["per_initiator"]
    assert s["messages_sent"] == a.expected - a.warmup, (s["messages_sent"], a)
    return s, a


def test_a_duplicate_never_hides_a_loss_nor_a_gap_and_the_gate_fails(pg_server, tmp_path, fault, figures):
    """Two faults of issue 55 in one window, mid-window and in one transaction, each on an
    initiator of its own (the run reports per initiator; two faults, one run):

    - initiator 1: 50 measured rows deleted from the drop table and 50 others duplicated (its
      received count unchanged): the run reports 50 lost and 50 duplicated on it;
    - initiator 2: 50 measured rows moved to sequence numbers their dialogs never sent: as many
      of its messages as were sent are received, yet 50 sequence numbers sent are found nowhere:
      the run reports 50 lost and 50 never sent on it.

    The run exits 4, and the gate of that run against a clean one fails on integrity."""
    figures["faults injected"] += 1       # the gap, the second fault of this run
    base = tmp_path / "base"
    base.mkdir()
    # the clean run needs no time to tamper in: a shorter window (the gate notes that it differs)
    clean = ssbench("run", str(write_matrix(base, initiators=2, measure=2, drain=5)), "--out", str(base / "run"))
    assert clean.returncode == 0, clean.stderr[-3000:]
    check_account(base / "run", 2, figures)
    one, two = measured(1), measured(2)
    keep = f"(SELECT diag_id, msgseqnum {one} ORDER BY received_us, msgseqnum LIMIT {ROWS})"
    m = write_matrix(tmp_path, initiators=2, measure=6, drain=5)
    out = tmp_path / "run"
    p, lines = start_run(m, out, sending=0)
    try:
        _tamper(f"DELETE FROM ssb.message_drop WHERE (diag_id, msgseqnum) IN {keep}",
                f"INSERT INTO ssb.message_drop SELECT * {one} ORDER BY received_us, msgseqnum LIMIT {ROWS}",
                f"UPDATE ssb.message_drop SET msgseqnum = msgseqnum + 1000000 WHERE (diag_id, msgseqnum) IN "
                f"(SELECT diag_id, msgseqnum {two} ORDER BY received_us, msgseqnum LIMIT {ROWS})",
                rows_needed={1: 3 * ROWS, 2: 2 * ROWS})
    finally:
        err = finish(p, lines)
    s, a = _reported_as_audited(out, Audit(missing=2 * ROWS, duplicates=ROWS, phantoms=ROWS), figures)
    assert [(a.of(i, "missing"), a.of(i, "duplicates"), a.of(i, "phantoms")) for i in (1, 2)] == [
        (ROWS, ROWS, 0), (ROWS, 0, ROWS)], a.per_initiator
    assert p.returncode == 4, err[-3000:]
    assert f"{2 * ROWS} MESSAGES LOST, {ROWS} MESSAGES DUPLICATED, {ROWS} MESSAGES NEVER SENT" in err, err[-3000:]
    assert (s["messages_lost"], s["messages_duplicated"], s["messages_phantom"], s["status"]) == (
        2 * ROWS, ROWS, ROWS, "lost"), s
    first, second = s["per_initiator"]
    # a duplicate never hides a loss: initiator 1's received count is its sent count less the 50
    assert first["received"] == first["sent"] - ROWS, first
    # a gap is a loss when the totals match: initiator 2 received as many as it sent
    assert second["received"] == second["sent"], second
    assert s["messages_received"] == s["messages_sent"] - ROWS, s
    gate = ssbench("gate", "--baseline", str(base / "run"), "--candidate", str(out), "--no-report")
    assert gate.returncode == 1, (gate.stdout + gate.stderr)[-3000:]
    assert f"candidate lost {2 * ROWS} message(s)" in gate.stdout + gate.stderr, gate.stdout[-3000:]
    assert f"candidate received {2 * ROWS} message(s) twice or never sent" in gate.stdout + gate.stderr
    fault()
    fault()
