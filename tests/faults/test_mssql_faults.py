"""Faults on the SQL Server code path, counted independently (issue 31). No SQL Server runs
here: MssqlTarget, MssqlSender, their T-SQL and the real pyodbc layer (driver.Connection: per-call
query timeouts, the watchdog's cancel) run against the recording fake, whose model of Service
Broker (tests/targets/mssql/broker_model.py) deletes an initiator endpoint once both sides have
ended its dialog and keeps a transaction an attention left open unless XACT_ABORT is ON. The
model logs every SEND, BEGIN DIALOG and END CONVERSATION that committed and every message the
target processed: the run's account must equal that log."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "targets" / "mssql"))
from broker_model import Msg  # noqa: E402
from mssql_fake import install, install_raw_senders, install_senders  # noqa: E402

from harness.errors import TargetError  # noqa: E402
from harness.matrix import BrokerSettings  # noqa: E402
from harness.targets.mssql.sender import MssqlSender  # noqa: E402
from harness.targets.mssql.target import MssqlTarget  # noqa: E402

USERS, SENDS = 4, 25     # per initiator; each user SENDs 25 messages
S = "127.0.0.1:1433"


def _user(t: MssqlTarget, initiator: int, slot: int, tally: Counter, lock: threading.Lock) -> None:
    """One Locust user's life on its own OS thread: its dialog slot, a finite lifetime (1 or 3
    messages per dialog, fire and forget on even slots), SENDs counted as the client sees them."""
    s = MssqlSender(t.sender_spec(initiator))
    ok = failed = 0
    try:
        handle = s.dialog(slot)
        s.set_dialog_lifetime(1 if slot % 2 else 3, fire_and_forget=slot % 2 == 0)
        for _ in range(SENDS):
            try:
                s.send(handle, bytes(100))
                ok += 1
            except TargetError:
                failed += 1
    finally:
        s.close()
        with lock:
            tally["ok"] += ok
            tally["failed"] += failed


def test_finite_dialog_lifetimes_on_sql_server_account_for_every_send(monkeypatch, tmp_path, fault, figures):
    """Two initiators, four users each on OS threads, dialogs retired after 1 or 3 messages (the
    target ends them, or the initiator first: fire and forget), one SEND cancelled by its query
    timeout halfway: nothing lost, nothing duplicated, sent = what the clients counted = what
    committed, and every dialog begun by the SEND path ended by it."""
    fake = install(monkeypatch)
    odbc = install_raw_senders(monkeypatch, fake)
    topo = tmp_path / "single.yaml"
    topo.write_text((REPO / "topologies" / "example-single.yaml").read_text()
                    .replace("\ndriver:\n", "\ndriver:\n  query_timeout_seconds: 1\n", 1))
    t = MssqlTarget.from_file(str(topo))
    t.provision(max_initiators=2)
    t.prepare(2, "durable", BrokerSettings(max_queue_readers=2))
    for i in (1, 2):
        t.create_dialogs(i, USERS, 1)
        t.warm_up(i)
    odbc.hang_next["call_send_retiring"] = 1          # the fault: one SEND overruns its timeout
    tally, lock = Counter(), threading.Lock()
    threads = [threading.Thread(target=_user, args=(t, i, k, tally, lock))
               for i in (1, 2) for k in range(1, USERS + 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    c = t.drain(10, poll=0.01)
    stats = t.dialog_stats()
    t.close()

    log = fake.model.committed
    committed = [(e[2], e[3]) for e in log if e[0] == "send" and not e[4]]
    delivered = Counter((conv, seq) for conv, seq, warm in fake.model.delivered if not warm)
    missing = set(committed) - set(delivered)
    duplicates = sum(n - 1 for n in delivered.values() if n > 1)
    figures["messages lost"] += len(missing)
    figures["duplicates"] += duplicates
    figures["false losses"] += max(0, c.lost - len(missing))
    figures["hidden losses"] += max(0, len(missing) - c.lost)
    assert not missing and not duplicates, (len(missing), duplicates)
    assert tally["failed"] == 1 and tally["ok"] == 2 * USERS * SENDS - 1, tally
    assert c.sent == len(committed) == tally["ok"], (c.sent, len(committed), tally)   # no hidden loss
    assert c.received == sum(delivered.values()) == c.sent and c.settled
    begun, ended = sum(e[0] == "begin" for e in log), sum(e[0] == "end" for e in log)
    assert stats["dialogs_begun"] == begun and stats["dialogs_ended"] == ended, (stats, begun, ended)
    # every dialog retired is ended, on both sides: the initiator endpoints left are the dialogs
    # created before the load and each user's last one, if it had not reached its limit
    assert set(stats["endpoints"]) <= {"initiator.CO", "target.CO", "target.CD"}, stats
    assert begun - ended == stats["endpoints"]["initiator.CO"] - 2 * USERS > 0, stats
    fault()


def _send(t: MssqlTarget, initiator: int, n: int) -> None:
    s = MssqlSender(t.sender_spec(initiator))
    try:
        for _ in range(n):
            s.send(s.dialog(1), bytes(100))
    finally:
        s.close()


def test_error_rows_of_every_kind_and_doomed_rollbacks_hide_no_loss(monkeypatch, fault, figures):
    """The target's error table holds rows that are not lost data messages: Service Broker Error
    messages, messages without a valid header, rows of an error alone (a doomed transaction
    rolled back, its messages received again later; the RECEIVE that failed once the fifth
    rollback disabled the queue) and whole batches logged after a failure caught past the
    tally (their data messages received). Two data messages are really lost (discarded by the
    message type's validation) and three are poison (the drop-table insert failed). The account,
    per initiator and in total, must equal the model's own log of what happened to each."""
    fake = install(monkeypatch)
    install_senders(monkeypatch, fake)
    t = MssqlTarget.from_file(str(REPO / "topologies" / "example-single.yaml"))
    t.provision(max_initiators=2)
    t.prepare(2, "durable", BrokerSettings(max_queue_readers=2))
    for i in (1, 2):
        t.create_dialogs(i, 2, 1)
        t.warm_up(i)
    target, model = fake.db(S, "ssbench_target"), fake.model
    model.pump()

    def phase(faults, *sends):
        target.faults[:] = faults
        for i, n in sends:
            _send(t, i, n)
        model.pump()

    phase(["doomed", "doomed"], (1, 5), (2, 5))       # two rollbacks, then received
    phase(["end_fails"], (1, 4))                      # tallied, then the whole batch logged
    phase(["drop_fails"], (2, 3))                     # logged, never in the drop table: poison
    conv = next(iter(target.endpoints.values())).conv
    target.queue += [Msg(conv, "data", bad=True), Msg(conv, "error")]   # nobody's; an Error
    model.pump()
    target.message_types["//MySSB.com/Lab/M_Test"] = "XML"             # discarded: really lost
    phase([], (2, 2))
    target.message_types["//MySSB.com/Lab/M_Test"] = "NONE"
    phase(["doomed"] * 5, (1, 3))                     # the queue disabled: still queued
    c = t.drain(0.2, poll=0.01)

    assert {e.kind for e in target.errors} == {None, "data", "error"}   # every kind of row
    committed = {(e[2], e[3]) for e in model.committed if e[0] == "send" and not e[4]}
    delivered = {(conv, seq) for conv, seq, warm in model.delivered if not warm}
    poisoned = set(model.poisoned)
    queued = {(m.conv, m.seq) for m in target.queue if m.measured}
    lost = committed - delivered - poisoned - queued
    figures["false losses"] += max(0, c.lost - len(lost))    # reported lost, though the model has it
    figures["hidden losses"] += max(0, len(lost) - c.lost)   # lost in the model, not in the account
    assert len(lost) == 2 and len(poisoned) == 3 and len(queued) == 3, (lost, poisoned, queued)
    assert c.queue_disabled and c.sent == len(committed) == 22
    assert c.lost == len(lost) == 2, (c.lost, c)
    assert [(x.initiator, x.sent, x.received, x.poison, x.queued, x.lost) for x in c.initiators] == [
        (1, 12, 9, 0, 3, 0), (2, 10, 5, 3, 0, 2)], c.initiators
    assert sum(x.lost for x in c.initiators) == c.lost and c.poison == len(poisoned)
    fault()
