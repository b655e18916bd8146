"""The SQL Server target's accounting and its transactions (issue 31, items 1, 2, 5, 7, 9),
against the recording fake and its model of Service Broker (broker_model.py: an initiator
endpoint deleted once both sides ended its dialog; a transaction left open by an attention
unless XACT_ABORT is ON, until rollback or close). No SQL Server runs here."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from mssql_fake import FakePyodbc, install_raw_senders, install_senders

from harness.errors import TargetError
from harness.matrix import BrokerSettings
from harness.targets.mssql import driver, tsql
from harness.targets.mssql.sender import MssqlSender
from harness.targets.mssql.target import MssqlTarget

REPO = Path(__file__).resolve().parents[3]
SINGLE = REPO / "topologies" / "example-single.yaml"
S = "127.0.0.1:1433"


def ready(fake, monkeypatch, share: float = 0.0, usable: int = 2, path: Path = SINGLE) -> MssqlTarget:
    t = MssqlTarget.from_file(str(path))
    t.provision()
    t.prepare(1, "durable", BrokerSettings(max_queue_readers=3, high_priority_share=share))
    t.create_dialogs(1, usable, 1)
    t.warm_up(1)
    return t


def last(fake, what: str) -> str:
    """The last batch of a template section the target sent."""
    return fake.batches(what=what)[-1][3]


def measured(fake, kind: str = "send") -> list:
    return [e for e in fake.model.committed if e[0] == kind and (kind != "send" or not e[4])]


# --------------------------------------------------------------------------- item 1

def test_sent_and_dialogs_ended_count_retired_dialogs(fake, monkeypatch):
    """Once both sides have ended a dialog, its initiator endpoint (and its send_sequence) is
    gone: sent and dialogs_ended are counted by the send path itself, inside its transaction."""
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch)
    s = MssqlSender(t.sender_spec(1))
    s.set_dialog_lifetime(2, False)          # the target ends each dialog after its 2nd message
    for _ in range(10):
        s.send(s.dialog(1), bytes(100))
    s.set_dialog_lifetime(3, True)           # fire and forget: the initiator ends after its 3rd
    for _ in range(9):
        s.send(s.dialog(2), bytes(100))
    s.close()
    c = t.drain(5, poll=0.01)
    assert len(measured(fake)) == 19
    assert c.sent == 19 and c.received == 19 and c.settled
    st = t.dialog_stats()
    assert st["dialogs_begun"] == len(measured(fake, "begin")) == 8
    assert st["dialogs_ended"] == len(measured(fake, "end")) == 8
    # what sys.conversation_endpoints still shows: no initiator endpoint of a retired dialog,
    # the target's closed ones
    assert not any(k.startswith("initiator.") and k != "initiator.CO" for k in st["endpoints"])
    assert st["endpoints"]["target.CD"] == 8
    counts = last(fake, "initiator.sql send_retiring_procedure")
    assert "UPDATE [dbo].[ssbench_counts]" in counts and "SET XACT_ABORT ON;" in counts


# --------------------------------------------------------------------------- item 2

def _legacy(fake, section: str) -> None:
    """The installed procedure as an older ssbench had it: no SET XACT_ABORT ON."""
    db = fake.db(S, "ssbench_init1")
    db.procs[section] = db.procs[section].replace("SET XACT_ABORT ON;", "")


def test_an_attention_rolls_the_send_procedures_back(fake, monkeypatch):
    """SET XACT_ABORT ON in every procedure a client calls that opens a transaction: the
    attention of a cancelled call rolls it back instead of leaving @@TRANCOUNT at 1."""
    odbc: FakePyodbc = install_raw_senders(monkeypatch, fake)
    ready(fake, monkeypatch)
    handle = fake.db(S, "ssbench_init1").dialogs[1][0]
    for sec, args in (("call_send", (handle, bytes(100))),
                      ("call_send_retiring", (None, bytes(100), 0, 0, 0))):
        raw = odbc.connect("Server=tcp:127.0.0.1,1433;Database=ssbench_init1;")
        cur = raw.cursor()
        odbc.hang_next[sec] = 1
        threading.Timer(0.2, cur.cancel).start()
        with pytest.raises(odbc.Error, match="Operation canceled"):
            cur.execute(tsql.statement("initiator", sec), *args)
        assert raw.session.trancount == 0, f"{sec}: the transaction stayed open after the attention"
    assert measured(fake) == []
    for what in ("initiator.sql send_procedure", "initiator.sql send_retiring_procedure",
                 "objects.sql end_conversations_procedure"):
        assert "SET XACT_ABORT ON;" in fake.sql(what=what), what


def test_a_cancelled_call_discards_its_connection(fake, monkeypatch, tmp_path):
    """After the driver's query timeout cancels a call, the connection is closed (the server
    rolls back what the call left open) and the next call runs on a new one: no SEND the
    client counted is rolled back later (a hidden loss). Shown with a procedure without
    XACT_ABORT, where the attention leaves the transaction open."""
    odbc = install_raw_senders(monkeypatch, fake)
    topo = tmp_path / "t.yaml"
    topo.write_text(SINGLE.read_text().replace("\ndriver:\n", "\ndriver:\n  query_timeout_seconds: 1\n", 1))
    t = ready(fake, monkeypatch, path=topo)
    _legacy(fake, "send_retiring_procedure")
    s = MssqlSender(t.sender_spec(1))
    s.set_dialog_lifetime(1000, False)
    ok = 0
    for i in range(6):
        if i == 2:
            odbc.hang_next["call_send_retiring"] = 1
            with pytest.raises(driver.QueryTimeoutError):
                s.send(s.dialog(1), bytes(100))
            continue
        s.send(s.dialog(1), bytes(100))
        ok += 1
    s.close()
    assert len(odbc.connections) == 2, "the cancelled connection was not replaced"
    t.drain(5, poll=0.01)
    assert len(measured(fake)) == ok == 5, "SENDs the client counted were rolled back"
    assert t.counts().sent == ok


# --------------------------------------------------------------------------- item 5

def test_retiring_dialogs_keep_their_slots_priority(fake, monkeypatch):
    """A priority axis with a finite messages_per_dialog: a high slot's new dialogs are begun on
    the high-priority contract too."""
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch, share=0.5)
    s = MssqlSender(t.sender_spec(1))
    s.set_dialog_lifetime(1, False)
    for slot in (1, 2):
        s.send(s.dialog(slot), bytes(100))
    s.close()
    calls = [p for _, _, w, _, p in fake.log if w == "send retiring"]
    assert [c[4] for c in calls] == [0, 1]                 # slot 2 of 2 is high at share 0.5
    proc = last(fake, "initiator.sql send_retiring_procedure")
    assert "@high bit = 0" in proc and "EXEC [dbo].[ssbench_begin_dialog] @high, @dh OUTPUT;" in proc
    assert "ON CONTRACT [ssbench_high_priority]" in last(fake, "initiator.sql begin_dialog_procedure")


# --------------------------------------------------------------------------- item 7

def test_the_initiator_reader_runs_only_for_finite_lifetimes_and_records_errors(fake, monkeypatch):
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch)
    init = fake.db(S, "ssbench_init1")
    assert not init.activation, "the initiator queue's reader is on without a finite lifetime"
    s = MssqlSender(t.sender_spec(1))
    s.set_dialog_lifetime(1, False)
    assert init.activation
    fake.db(S, "ssbench_target").message_types["//MySSB.com/Lab/M_Test"] = "XML"   # the target answers Errors
    s.send(s.dialog(1), bytes(100))
    s.close()
    t.drain(1, poll=0.01)
    st = t.dialog_stats()
    assert st["errors_received"] == 1 and st["dialogs_ended"] == 1
    proc = last(fake, "initiator.sql initiator_end_procedure")
    assert "BEGIN TRY" in proc and "BEGIN CATCH" in proc
    assert "INSERT INTO [dbo].[ssbench_dialog_errors]" in proc and "message_body" in proc
    assert "WHILE @groups < 100" in proc and proc.count("RECEIVE message_type_name") == 2
    reader = last(fake, "initiator.sql initiator_reader_procedure")
    assert "MAX_QUEUE_READERS = 3" in reader and "ssbench_initiator_end" in reader
    t.prepare(1, "durable", BrokerSettings())
    assert not init.activation                           # each permutation starts without it


# --------------------------------------------------------------------------- item 9

def test_a_reset_survives_an_endpoint_deleted_under_it(fake, monkeypatch):
    """ssbench_reset walks a static list of endpoints; one the broker deletes meanwhile makes
    its END CONVERSATION fail: skipped (TRY/CATCH), not a prepare that stops."""
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch)
    fake.db(S, "ssbench_init1").vanishing_endpoint = True
    t.prepare(1, "durable", BrokerSettings())
    proc = last(fake, "objects.sql end_conversations_procedure")
    body = proc[proc.index("BEGIN TRY"):proc.index("END CATCH")]
    assert "END CONVERSATION @dh WITH CLEANUP;" in body and "XACT_STATE()" in body
    t.create_dialogs(1, 2, 1)
    fake.db(S, "ssbench_init1").vanishing_endpoint = True
    fake.db(S, "ssbench_init1").procs["end_conversations_procedure"] = "no TRY/CATCH"
    with pytest.raises(TargetError) as e:
        t.prepare(1, "durable", BrokerSettings())
    assert "Is the topology provisioned" not in str(e.value)   # that hint is for missing objects only


# --------------------------------------------------------------------------- issue 52, item 1

def test_a_duplicate_never_stands_in_for_a_loss(fake, monkeypatch):
    """A message in the drop table twice counts once, the second is a duplicate; the drop table
    is read whole only once the queues hold none of the test's messages (the drain's last
    reading), and per initiator, so the initiators' figures are the totals' parts."""
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch)
    s = MssqlSender(t.sender_spec(1))
    for _ in range(4):
        s.send(s.dialog(1), bytes(100))
    s.close()
    target = fake.db(S, "ssbench_target")
    target.activation = False                          # queued: the drop table is not read
    n = len(fake.log)
    c = t.counts()
    assert (c.target_queue, c.received, c.lost) == (4, 0, 0)
    assert "target.sql distinct_by_initiator" not in whats_since(fake, n)
    target.activation = True
    fake.model.pump()
    target.drop[-2] = target.drop[-1]                 # one message tallied twice, another never
    c = t.drain(1, poll=0.01)
    i = c.initiators[0]
    assert (i.sent, i.received, i.duplicates, i.lost) == (4, 3, 1, 1), i
    assert (c.received, c.duplicates, c.lost) == (3, 1, 1)
    for q in ("received_by_initiator", "distinct_by_initiator", "poison_by_initiator", "queued_by_initiator"):
        assert "GROUP BY" in tsql.statement("target", q, {"queue": "q", "message_type": "m"}), q
    assert "NOT EXISTS (SELECT * FROM [dbo].[messageDrop]" in tsql.statement(
        "target", "poison_by_initiator", {"message_type": "m"})


def test_a_gap_in_a_dialog_is_a_loss_when_the_totals_match(fake, monkeypatch):
    """A message recorded under the number after its dialog's last (one sent is found nowhere,
    one held was never sent): as many distinct messages received as sent, yet the gap inside the
    dialog's received sequence is one lost and one never sent. A gap in another dialog whose
    totals do not match is the loss the totals already say, not a phantom."""
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch)
    for slot in (1, 2):
        s = MssqlSender(t.sender_spec(1))
        for _ in range(4):
            s.send(s.dialog(slot), bytes(100))
        s.close()
    fake.model.pump()
    target = fake.db(S, "ssbench_target")
    init, conv, seq, warm = target.drop[3]
    assert not warm and seq < (last := max(q for _, c, q, _ in target.drop if c == conv)), target.drop
    target.drop[3] = (init, conv, last + 1, warm)          # the gap, the totals unchanged
    c = t.drain(1, poll=0.01)
    i = c.initiators[0]
    assert (i.sent, i.received, i.duplicates, i.phantoms, i.lost) == (8, 8, 0, 1, 1), i
    other = [k for k, (_, c2, _, w) in enumerate(target.drop) if c2 != conv and not w]
    del target.drop[other[1]]                               # a plain loss, inside the other dialog
    i = t.drain(1, poll=0.01).initiators[0]
    assert (i.received, i.phantoms, i.lost) == (7, 1, 2), i
    assert "GROUP BY g.initiator" in tsql.statement("target", "gaps_by_initiator", {})


def whats_since(fake, n: int) -> list[str]:
    return [w for _, _, w, _, _ in fake.log[n:]]


# --------------------------------------------------------------------------- issue 52, item 13

def test_the_initiator_readers_catch_counts_the_dialogs_it_commits(fake, monkeypatch):
    """An END CONVERSATION that fails in ssbench_initiator_end: its CATCH commits the dialogs it
    had ended before the failure, and counts them (dialogs_ended equals what committed)."""
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch)
    init = fake.db(S, "ssbench_init1")
    s = MssqlSender(t.sender_spec(1))
    s.set_dialog_lifetime(1, False)                  # the target ends every dialog
    for slot in (1, 2):
        s.send(s.dialog(slot), bytes(100))
    init.faults = ["end_fails"]                      # the next RECEIVE: two EndDialogs, one fails
    t.drain(1, poll=0.01)
    s.close()
    ended = len(measured(fake, "end"))
    assert ended == 1 and t.dialog_stats()["dialogs_ended"] == ended
    catch = last(fake, "initiator.sql initiator_end_procedure").split("BEGIN CATCH", 1)[1]
    assert catch.index("SET ended = ended + @ended") < catch.index("IF XACT_STATE() = 1 COMMIT")


# --------------------------------------------------------------------------- issue 52, item 12

def test_a_partial_reset_says_so(fake, monkeypatch, caplog):
    """ssbench_reset returns the conversations it ended, left and failed to end: a reset that
    leaves some says so at prepare (a warning) and at teardown (a line of what stayed)."""
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch)
    fake.db(S, "ssbench_init1").stuck_endpoints = 2
    with caplog.at_level("WARNING"):
        t.prepare(1, "durable", BrokerSettings())
    assert any("left 2 conversation(s)" in r.getMessage() and "ssbench_init1" in r.getMessage()
               for r in caplog.records), caplog.text
    kept = t.teardown()
    assert any("left 2 conversation(s)" in k for k in kept), kept
    assert "conversations_left" in last(fake, "objects.sql end_conversations_procedure")


# --------------------------------------------------------------------------- issue 52, item 11

def test_a_retiring_sender_begins_a_new_dialog_after_a_failed_send(fake, monkeypatch):
    """The target answers the slot's dialog with an Error (its message type validates XML) and
    the initiator's reader ends it: the next SEND on that dialog fails, and the one after it
    begins a new dialog instead of failing for ever."""
    install_senders(monkeypatch, fake)
    t = ready(fake, monkeypatch)
    target = fake.db(S, "ssbench_target")
    s = MssqlSender(t.sender_spec(1))
    s.set_dialog_lifetime(5, False)
    target.message_types["//MySSB.com/Lab/M_Test"] = "XML"
    s.send(s.dialog(1), bytes(100))                  # begins a dialog; the target errors it
    fake.model.pump()                                # the initiator's reader ends its side
    target.message_types["//MySSB.com/Lab/M_Test"] = "NONE"
    with pytest.raises(TargetError):
        s.send(s.dialog(1), bytes(100))
    for _ in range(3):
        s.send(s.dialog(1), bytes(100))
    s.close()
    assert s.dialogs_begun == 2 and len(measured(fake)) == 4
