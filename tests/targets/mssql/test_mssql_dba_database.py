"""A database ssbench did not create (issue 52, items 2 and 3): no statement ssbench sends there
ends another session's conversation or rolls back another session's transaction. Against the
recording fake (no SQL Server runs here), which models the DBA's other sessions: ENABLE_BROKER
and DISABLE_BROKER without a termination clause wait for them (ALTER DATABASE SET options:
"ENABLE_BROKER will wait until the other sessions release their locks"), ROLLBACK IMMEDIATE
rolls their transactions back."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mssql_fake import install_senders

from harness.errors import TargetError
from harness.matrix import BrokerSettings
from harness.targets.mssql.sender import MssqlSender
from harness.targets.mssql.target import MssqlTarget

REPO = Path(__file__).resolve().parents[3]
SINGLE = REPO / "topologies" / "example-single.yaml"
S = "127.0.0.1:1433"
DBS = ("ssbench_target", "ssbench_init1", "ssbench_init2", "ssbench_init3")

#: what reaches other sessions: a termination clause that rolls them back or throws them out, the
#: options that end every conversation of the database, dropping it
FORBIDDEN = re.compile(r"ROLLBACK\s+IMMEDIATE|ROLLBACK\s+AFTER|NEW_BROKER|ERROR_BROKER_CONVERSATIONS|"
                       r"SINGLE_USER|RESTRICTED_USER|\bKILL\b|DROP\s+DATABASE|SET\s+OFFLINE", re.I)


def dba_databases(fake, **options) -> None:
    for name in DBS:
        db = fake.db(S, name)
        for k, v in options.items():
            setattr(db, k, v)


def statements_reaching(fake, names) -> list[tuple[str, str]]:
    """(what, batch) of every batch sent to one of ``names``, or to master or msdb naming one."""
    low = {n.lower() for n in names}
    return [(w, q) for _, d, w, q, _ in fake.log
            if d.lower() in low or any(f"[{n}]".lower() in q.lower() for n in low)]


def ends_only_ssbench_conversations(batch: str, broker) -> bool:
    """An END CONVERSATION ends a conversation of ssbench's service: one received from its queue,
    one of its service's endpoints, or the dialog the procedure began itself."""
    if "END CONVERSATION" not in batch:
        return True
    return any(mark in batch for mark in (f"FROM [dbo].[{broker.queue}]", f"WHERE s.name = N'{broker.service}'",
                                          "EXEC [dbo].[ssbench_begin_dialog]"))


def run_everything(t: MssqlTarget) -> list[str]:
    t.check()
    t.provision()
    t.check()
    for share, n in ((0.0, 2), (0.5, 1)):
        t.prepare(n, "durable", BrokerSettings(high_priority_share=share))
        for k in range(1, n + 1):
            t.create_dialogs(k, 2, 1)
            t.warm_up(k)
            s = MssqlSender(t.sender_spec(k))
            s.send(s.dialog(1), bytes(100))
            for ff in (False, True):
                s.set_dialog_lifetime(2, ff)
                for _ in range(3):
                    s.send(s.dialog(2), bytes(100))
            s.close()
        t.drain(1, poll=0.01)
    t.close()
    return t.teardown() + t.teardown(drop_databases=True)


def test_nothing_reaches_another_session_on_a_dba_database(fake, monkeypatch):
    """Provision, check, prepare (reset), a run with every kind of SEND, teardown with and
    without --drop-databases, on the DBA's databases (message delivery off, so ENABLE_BROKER and
    DISABLE_BROKER run): every statement sent there is walked."""
    install_senders(monkeypatch, fake)
    dba_databases(fake, broker_enabled=False)
    kept = run_everything(MssqlTarget.from_file(str(SINGLE)))
    assert any("database kept (ssbench did not create it)" in k for k in kept), kept
    sent = statements_reaching(fake, DBS)
    assert {w for w, _ in sent} >= {"server.sql enable_broker_wait", "server.sql disable_broker_wait",
                                    "objects.sql call_reset", "target.sql activation_procedure"}
    broker = MssqlTarget.from_file(str(SINGLE)).topology.broker
    bad = [(w, m.group(0)) for w, q in sent for m in [FORBIDDEN.search(q)] if m]
    bad += [(w, "END CONVERSATION") for w, q in sent if not ends_only_ssbench_conversations(q, broker)]
    assert not bad, bad
    assert all(fake.db(S, n).rolled_back == 0 for n in DBS)


def test_new_broker_is_refused_on_a_dba_database(fake, tmp_path, monkeypatch):
    """broker.reset: new_broker and provision's de-duplication of broker GUIDs: one line saying
    what NEW_BROKER would do, before anything changes."""
    install_senders(monkeypatch, fake)
    dba_databases(fake)
    topo = tmp_path / "t.yaml"
    topo.write_text(SINGLE.read_text() + "\nbroker:\n  reset: new_broker\n")
    t = MssqlTarget.from_file(str(topo))
    t.provision(max_initiators=1)
    assert any("broker.reset: new_broker would run ALTER DATABASE [ssbench_init1] SET NEW_BROKER" in d
               for st, _, d in t.check(max_initiators=1) if st == "fail")
    n = len(fake.log)
    with pytest.raises(TargetError) as e:
        t.prepare(1, "durable", BrokerSettings())
    assert "ends every conversation in the database" in str(e.value) and "\n" not in str(e.value)
    assert "target.sql activation_off" not in [w for _, _, w, _, _ in fake.log[n:]]   # nothing changed
    fake.db(S, "ssbench_init1").guid = fake.db(S, "ssbench_target").guid     # a DBA's copy
    with pytest.raises(TargetError, match="sharing broker GUID .* ssbench did not create this database"):
        MssqlTarget.from_file(str(SINGLE)).provision(max_initiators=1)
    assert not statements_reaching(fake, ["NEW_BROKER"]) and not fake.batches(what="server.sql new_broker")


def test_message_delivery_waits_for_the_dbas_sessions_and_refuses(fake):
    """ENABLE_BROKER on a DBA's database another session uses: no ROLLBACK IMMEDIATE; ssbench
    waits (the driver's timeout cancels the wait) and refuses with one line. At teardown the
    DISABLE_BROKER it cannot run is a line of what stayed."""
    dba_databases(fake, broker_enabled=False, other_sessions=1)
    t = MssqlTarget.from_file(str(SINGLE))
    with pytest.raises(TargetError, match=r"needs the database to itself .* rolls back nobody's transaction"):
        t.provision(max_initiators=1)
    dba_databases(fake, other_sessions=0)
    t.provision(max_initiators=1)
    dba_databases(fake, other_sessions=1)
    kept = t.teardown()
    assert any(k.startswith("message delivery left enabled") for k in kept), kept
    assert not any("ROLLBACK IMMEDIATE" in q for _, q in statements_reaching(fake, DBS))
    assert all(fake.db(S, n).rolled_back == 0 for n in DBS)


# --------------------------------------------------------------------------- issue 52, item 17

def test_managed_instance_and_azure_sql_database_are_refused_where_they_cannot_work(fake, tmp_path, monkeypatch):
    """Azure SQL Managed Instance has no CREATE REMOTE SERVICE BINDING and links instances through
    a Server Trust Group, not ssbench's endpoint; Azure SQL Database has no Service Broker: one
    line each, before anything changes, in check and provision."""
    install_senders(monkeypatch, fake)
    dist = REPO / "topologies" / "example-distributed.yaml"
    fake.engine_edition["sqltarget.lab.example:1433"] = 8
    t = MssqlTarget.from_file(str(dist))
    fails = [d for st, _, d in t.check() if st == "fail" and "Managed Instance" in d]
    assert any("Server Trust Group" in d for d in fails) and any("REMOTE SERVICE BINDING" in d for d in fails)
    with pytest.raises(TargetError, match="Server Trust Group .* use layout: single; .*broker.dialog_encryption: false"):
        t.provision()
    assert not fake.batches(what="server.sql create_database")
    fake.engine_edition[S] = 8                                 # one Managed Instance, no dialog security
    topo = tmp_path / "mi.yaml"
    topo.write_text(SINGLE.read_text() + "\nbroker:\n  dialog_encryption: false\n")
    MssqlTarget.from_file(str(topo)).provision(max_initiators=1)
    fake.engine_edition[S] = 5
    with pytest.raises(TargetError, match="Azure SQL Database, which has no Service Broker"):
        MssqlTarget.from_file(str(topo)).provision(max_initiators=1)


def test_a_database_in_an_availability_group_keeps_its_broker_settings(fake, tmp_path):
    """ENABLE_BROKER, DISABLE_BROKER and NEW_BROKER cannot run on a database of an availability
    group: refused with one line (at teardown, a line of what stayed)."""
    dba_databases(fake, broker_enabled=False)
    fake.db(S, "ssbench_init1").in_availability_group = True
    with pytest.raises(TargetError, match="in an availability group, where SET ENABLE_BROKER cannot run"):
        MssqlTarget.from_file(str(SINGLE)).provision(max_initiators=1)
    for part in (fake.dbs, fake.owned, fake.owned_tables):       # databases ssbench creates
        part.clear()
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision(max_initiators=1)
    fake.db(S, "ssbench_init1").in_availability_group = True    # added to a group since
    topo = tmp_path / "t.yaml"
    topo.write_text(SINGLE.read_text() + "\nbroker:\n  reset: new_broker\n")
    with pytest.raises(TargetError, match="availability group, where SET NEW_BROKER"):
        MssqlTarget.from_file(str(topo)).prepare(1, "durable", BrokerSettings())
    fake.db(S, "ssbench_init1").config["original.broker_enabled"] = "0"     # delivery was off before
    kept = t.teardown()
    assert any("message delivery left enabled" in k and "availability group" in k for k in kept), kept
