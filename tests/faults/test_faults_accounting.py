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

#: rows of initiator 1 the faults touch: the window (open loop, 50 SENDs/s) has them 3 s in
ROWS = 50
MEASURED = "FROM ssb.message_drop WHERE initiator = 1 AND NOT warmup"


def _tamper(*statements: str, rows_needed: int) -> None:
    """Once initiator 1 has ``rows_needed`` measured messages processed, run ``statements`` in
    one transaction on the target database (the run's own server: this test process's)."""
    from harness.targets.embedded.target import EmbeddedTarget

    t = EmbeddedTarget.default()
    try:
        with psycopg.connect(t.conninfo(t.target_db), autocommit=True) as c:
            deadline = time.monotonic() + 60
            while c.execute(f"SELECT count(*) {MEASURED}").fetchone()[0] < rows_needed:
                assert time.monotonic() < deadline, "the run processed too few messages to tamper with"
                time.sleep(0.1)
            with c.transaction():
                for sql in statements:
                    assert c.execute(sql).rowcount == ROWS, sql
    finally:
        t.close()


def _run_with(tmp_path, *statements: str, rows_needed: int):
    m = write_matrix(tmp_path, initiators=2, measure=6, drain=5)
    out = tmp_path / "run"
    p, lines = start_run(m, out, settle=0)
    try:
        _tamper(*statements, rows_needed=rows_needed)
    finally:
        err = finish(p, lines)
    return m, out, p.returncode, err


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


def test_a_duplicate_never_hides_a_loss_and_the_gate_fails(pg_server, tmp_path, fault, figures):
    """Issue 55's fault: mid-window, in one transaction, 50 measured rows of initiator 1 deleted
    from the drop table and 50 others of the same initiator duplicated (the received count
    unchanged). The run reports 50 lost and 50 duplicated on initiator 1, exits 4, and the gate
    of that run against a clean one fails on integrity."""
    base = tmp_path / "base"
    base.mkdir()
    # the clean run needs no time to tamper in: a shorter window (the gate notes that it differs)
    clean = ssbench("run", str(write_matrix(base, initiators=2, measure=2, drain=5)), "--out", str(base / "run"))
    assert clean.returncode == 0, clean.stderr[-3000:]
    check_account(base / "run", 2, figures)
    keep = f"(SELECT diag_id, msgseqnum {MEASURED} ORDER BY received_us, msgseqnum LIMIT {ROWS})"
    m, out, code, err = _run_with(
        tmp_path,
        f"DELETE FROM ssb.message_drop WHERE (diag_id, msgseqnum) IN {keep}",
        f"INSERT INTO ssb.message_drop SELECT * {MEASURED} ORDER BY received_us, msgseqnum LIMIT {ROWS}",
        rows_needed=3 * ROWS)
    s, _ = _reported_as_audited(out, Audit(missing=ROWS, duplicates=ROWS), figures)
    assert code == 4, err[-3000:]
    assert f"{ROWS} MESSAGES LOST, {ROWS} MESSAGES DUPLICATED" in err, err[-3000:]
    assert (s["messages_lost"], s["messages_duplicated"], s["messages_phantom"], s["status"]) == (
        ROWS, ROWS, 0, "lost"), s
    assert s["messages_received"] == s["messages_sent"] - ROWS, s
    gate = ssbench("gate", "--baseline", str(base / "run"), "--candidate", str(out), "--no-report")
    assert gate.returncode == 1, (gate.stdout + gate.stderr)[-3000:]
    assert f"candidate lost {ROWS} message(s)" in gate.stdout + gate.stderr, gate.stdout[-3000:]
    assert f"candidate received {ROWS} message(s) twice or never sent" in gate.stdout + gate.stderr
    fault()


def test_a_gap_is_a_loss_when_the_totals_match(pg_server, tmp_path, fault, figures):
    """50 measured rows of initiator 1 moved to sequence numbers their dialogs never sent, in one
    transaction mid-window: as many messages as were sent are received, yet 50 sequence numbers
    sent are found nowhere. The run reports 50 lost and 50 never sent, and exits 4."""
    m, out, code, err = _run_with(
        tmp_path,
        f"UPDATE ssb.message_drop SET msgseqnum = msgseqnum + 1000000 WHERE (diag_id, msgseqnum) IN "
        f"(SELECT diag_id, msgseqnum {MEASURED} ORDER BY received_us, msgseqnum LIMIT {ROWS})",
        rows_needed=2 * ROWS)
    s, _ = _reported_as_audited(out, Audit(missing=ROWS, phantoms=ROWS), figures)
    assert code == 4, err[-3000:]
    assert f"{ROWS} MESSAGES LOST, {ROWS} MESSAGES NEVER SENT" in err, err[-3000:]
    assert s["messages_received"] == s["messages_sent"], s       # the totals match
    assert (s["messages_lost"], s["messages_duplicated"], s["messages_phantom"], s["status"]) == (
        ROWS, 0, ROWS, "lost"), s
    fault()
