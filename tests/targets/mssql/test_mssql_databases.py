"""A DBA's databases come back as they were, and provisioning refuses what it cannot use
(issue 31, items 3, 4, 8, 10, 12), against the recording fake and its model of the database
options, master keys, bindings and message types (broker_model.py). No SQL Server runs here."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mssql_fake import whats

from harness.errors import TargetError
from harness.matrix import BrokerSettings
from harness.targets.mssql.target import MssqlTarget

REPO = Path(__file__).resolve().parents[3]
DIST = REPO / "topologies" / "example-distributed.yaml"
SINGLE = REPO / "topologies" / "example-single.yaml"
S = "127.0.0.1:1433"
DBS = ("ssbench_target", "ssbench_init1", "ssbench_init2", "ssbench_init3")


def dba_databases(fake, **options) -> None:
    """The four databases exist already: a DBA's, with their own settings."""
    for name in DBS:
        db = fake.db(S, name)
        for k, v in options.items():
            setattr(db, k, v)


# --------------------------------------------------------------------------- item 3

def test_database_options_come_back_after_a_run_and_at_teardown(fake):
    dba_databases(fake, delayed_durability="ALLOWED", honor=1, broker_enabled=False)
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    assert all(fake.db(S, n).broker_enabled for n in DBS)
    t.prepare(2, "delayed", BrokerSettings())                 # FORCED, and priority off
    assert fake.db(S, "ssbench_init1").delayed_durability == "FORCED"
    assert fake.db(S, "ssbench_target").honor == 0
    t.close()                                                  # the end of a run
    for name in DBS:
        db = fake.db(S, name)
        assert (db.delayed_durability, db.honor) == ("ALLOWED", 1), name
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()                                              # records nothing new: still ALLOWED
    t.prepare(1, "delayed", BrokerSettings(high_priority_share=0.5))
    t.teardown()
    for name in DBS:
        db = fake.db(S, name)
        assert (db.delayed_durability, db.honor, db.broker_enabled) == ("ALLOWED", 1, False), name
    assert "ALTER DATABASE [ssbench_target] SET HONOR_BROKER_PRIORITY OFF" not in fake.sql(
        what="teardown.sql priority_drop")


def test_a_changed_broker_guid_is_reported_at_teardown(fake):
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision(max_initiators=1)
    fake.db(S, "ssbench_init1").guid = fake.db(S, "ssbench_target").guid     # a copy: NEW_BROKER
    t.provision(max_initiators=1)
    kept = t.teardown()
    assert any("ssbench_init1" in k and "NEW_BROKER" in k for k in kept), kept


# --------------------------------------------------------------------------- item 4

def test_dialog_encryption_off_creates_no_binding(fake, tmp_path):
    """BEGIN DIALOG ... ENCRYPTION = OFF still encrypts when a remote service binding exists:
    without one, public may SEND on both services, and the label says no dialog security."""
    off = tmp_path / "off.yaml"
    off.write_text(DIST.read_text().replace("dialog_encryption: true", "dialog_encryption: false"))
    t = MssqlTarget.from_file(str(off))
    t.provision()
    init, tgt = fake.db("sqlinit1.lab.example:1433", "SSBSender"), fake.db("sqltarget.lab.example:1433", "SSBReceiver")
    assert not init.bindings and init.public_send and tgt.public_send
    t.prepare(1, "durable", BrokerSettings())
    assert t.label.endswith("dialog security: none (ENCRYPTION = OFF, no remote service binding)")
    assert any("no dialog security" in n for n in t.describe()["notes"])
    assert "WITH ENCRYPTION = OFF;" in fake.sql(what="initiator.sql begin_dialog_procedure")
    t = MssqlTarget.from_file(str(DIST))                      # and back on: the binding, no public
    t.provision()
    assert init.bindings == {"ssbench_rsb_target"} and not init.public_send and not tgt.public_send


# --------------------------------------------------------------------------- item 8

def test_a_restored_database_gets_ssbenchs_master_key_again(fake, caplog, monkeypatch):
    monkeypatch.setattr("harness.targets.mssql.driver.pyodbc_module", lambda: None)
    monkeypatch.setattr("harness.targets.mssql.driver.drivers", lambda: ["ODBC Driver 18 for SQL Server"])
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    tgt = fake.db("sqltarget.lab.example:1433", "SSBReceiver")
    tgt.key_by_server = 0                  # restored on another instance: nobody can open its key
    [warn] = [d for s, w, d in t.check() if s == "warn"]
    assert "is_master_key_encrypted_by_server = 0" in warn and "provision creates ssbench's again" in warn
    before = fake.certs[("sqltarget.lab.example:1433", "ssbreceiver", "ssbench_dialog_target")]
    fake.log.clear()
    with caplog.at_level(logging.WARNING):
        t.provision()
    assert "server.sql master_key_drop" in whats(fake) and tgt.key_by_server == 1
    after = fake.certs[("sqltarget.lab.example:1433", "ssbreceiver", "ssbench_dialog_target")]
    assert after != before
    installed = fake.sql(what="server.sql peer_certificate", server="sqlinit2.lab.example:1433")
    assert f"FROM BINARY = 0x{after.hex().upper()};" in installed       # exchanged again
    assert "restored or attached" in caplog.text


def test_a_foreign_master_key_that_cannot_be_opened_is_refused(fake):
    dba_databases(fake, master_key=1, key_by_server=0)
    with pytest.raises(TargetError, match="is_master_key_encrypted_by_server = 0.*ssbench did not "
                                          "create it.*ALTER MASTER KEY ADD ENCRYPTION BY SERVICE MASTER KEY"):
        MssqlTarget.from_file(str(SINGLE)).provision()
    assert "server.sql master_key_drop" not in whats(fake)


# --------------------------------------------------------------------------- item 10

@pytest.mark.parametrize("problem", ["xml", "contract"])
def test_an_unusable_message_type_or_contract_is_refused(fake, problem):
    dba_databases(fake)
    db = fake.db(S, "ssbench_init2")
    if problem == "xml":
        db.message_types["//MySSB.com/Lab/M_Test"] = "XML"
    else:
        db.message_types["//MySSB.com/Lab/M_Test"] = "NONE"
        db.contracts["//MySSB.com/Lab/C_Test"] = {"//MySSB.com/Lab/M_Test": (1, 0)}
    with pytest.raises(TargetError) as e:
        MssqlTarget.from_file(str(SINGLE)).provision()
    msg = str(e.value)
    assert "init2" in msg and "\n" not in msg
    assert ("VALIDATION = XML" in msg) if problem == "xml" else ("does not carry //MySSB.com/Lab/M_Test SENT BY ANY" in msg)
    assert "objects.sql queue" not in whats(fake)            # refused before creating anything


# --------------------------------------------------------------------------- item 12

def test_check_tries_the_owners_impersonation(fake, monkeypatch):
    monkeypatch.setattr("harness.targets.mssql.driver.pyodbc_module", lambda: None)
    monkeypatch.setattr("harness.targets.mssql.driver.drivers", lambda: ["ODBC Driver 18 for SQL Server"])
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    fake.db(S, "ssbench_target").impersonation_error = (
        "error 15517: Cannot execute as the database principal because the principal \"dbo\" does not "
        "exist, this type of principal cannot be impersonated, or you do not have permission.")
    fails = [(w, d) for s, w, d in t.check() if s == "fail"]
    assert len(fails) == 1 and "ssbench_target" in fails[0][0]
    assert "EXECUTE AS USER = 'dbo' fails here (error 15517" in fails[0][1] and "ERRORLOG" in fails[0][1]


def test_new_broker_only_for_a_duplicate_broker_id(fake, caplog):
    fake.created_broker_enabled = False              # databases ssbench creates: ENABLE_BROKER
    fake.enable_broker_error[(S, "ssbench_init1")] = 9772
    with caplog.at_level(logging.WARNING):
        MssqlTarget.from_file(str(SINGLE)).provision(max_initiators=1)
    assert len(fake.batches(what="server.sql new_broker")) == 1 and "9772" in caplog.text
    for part in (fake.dbs, fake.owned, fake.owned_tables, fake.log):
        part.clear()
    dba_databases(fake, broker_enabled=False)        # a DBA's database: NEW_BROKER is refused
    fake.enable_broker_error[(S, "ssbench_init1")] = 9772
    with pytest.raises(TargetError, match="ssbench did not create this database"):
        MssqlTarget.from_file(str(SINGLE)).provision(max_initiators=1)
    assert not fake.batches(what="server.sql new_broker")
    fake.db(S, "ssbench_init1").broker_enabled = False
    fake.enable_broker_error[(S, "ssbench_init1")] = 5070     # another session uses the database
    with pytest.raises(TargetError, match="error 5070"):
        MssqlTarget.from_file(str(SINGLE)).provision(max_initiators=1)
    assert not fake.batches(what="server.sql new_broker")


# --------------------------------------------------------------------------- issue 52, item 5

def test_a_dbo_certificate_service_broker_would_pick_is_refused(fake, monkeypatch):
    """Service Broker signs a dialog with its service owner's valid, active certificate that
    expires last ("Certificates for Dialog Security"): a DBA's certificate owned by dbo that
    expires after ssbench's would be used, and the peers do not have it. check fails and
    provision refuses before creating anything; one that expires earlier is no matter."""
    import datetime as dt

    from mssql_fake import install_senders

    install_senders(monkeypatch, fake)
    dba_databases(fake)
    fake.foreign_certs[(S, "ssbench_init1")] = [("dba_signing", dt.date(2200, 1, 1))]
    t = MssqlTarget.from_file(str(SINGLE))
    fails = [d for st, _, d in t.check() if st == "fail" and "dba_signing" in d]
    assert fails and "ACTIVE FOR BEGIN_DIALOG = OFF" in fails[0]
    with pytest.raises(TargetError, match=r"certificate \[dba_signing\] owned by dbo expires 2200-01-01"):
        t.provision()
    assert not fake.batches(what="server.sql own_certificate")
    fake.foreign_certs[(S, "ssbench_init1")] = [("dba_signing", dt.date(2027, 1, 1))]
    t.provision()
    q = fake.sql(what="objects.sql dialog_certificates")
    assert "is_active_for_begin_dialog = 1" in q and "pvt_key_encryption_type = 'MK'" in q


# --------------------------------------------------------------------------- issue 52, item 14

def test_the_sender_login_is_granted_what_it_needs_and_check_connects_as_it(fake, tmp_path, monkeypatch):
    """A sender_auth login of its own gets a user in each initiator database (recorded, dropped
    at teardown) and what its calls need; check connects as it and runs a SEND in a transaction
    rolled back, so a missing grant shows before a run, not mid-run. A login that does not exist
    is refused with one line."""
    from mssql_fake import install_senders

    install_senders(monkeypatch, fake)
    topo = tmp_path / "t.yaml"
    topo.write_text(SINGLE.read_text() + "\nsender_auth: {kind: sql, user: ssbench_sender, "
                                         "password_env: SSBENCH_SENDER_PASSWORD}\n")
    t = MssqlTarget.from_file(str(topo))
    t.provision(max_initiators=1)
    assert fake.grants[(S, "ssbench_init1")] == {"ssbench_sender"}
    assert ("USER", "ssbench_sender") in fake.owned[(S, "ssbench_init1")]
    grants = fake.sql(what="initiator.sql sender_grants")
    for g in ("GRANT EXECUTE ON OBJECT::[dbo].[ssbench_send] TO [ssbench_sender];",
              "GRANT SELECT ON OBJECT::[dbo].[dialogs] TO [ssbench_sender];",
              "GRANT RECEIVE ON OBJECT::[dbo].[MySSBLabTestQueue] TO [ssbench_sender];"):
        assert g in grants, g
    sender = [r for r in t.check(max_initiators=1) if "the sender (" in r[2]]
    assert [r[0] for r in sender] == ["ok"] and "SQL login ssbench_sender" in sender[0][2], sender
    assert "ROLLBACK TRANSACTION" in fake.sql(what="check as the sender")
    fake.grants[(S, "ssbench_init1")].clear()                  # a DBA revoked them
    sender = [r for r in t.check(max_initiators=1) if "the sender (" in r[2]]
    assert sender[0][0] == "fail" and "error 229" in sender[0][2], sender
    t.teardown()
    assert "ssbench_sender" not in fake.db_users.get((S, "ssbench_init1"), {}).values()
    fake.missing_logins.add("ssbench_sender")
    with pytest.raises(TargetError, match="the sender login ssbench_sender .* does not exist"):
        MssqlTarget.from_file(str(topo)).provision(max_initiators=1)


# --------------------------------------------------------------------------- issue 52, item 16

def test_logs_sized_recovery_model_recorded_and_log_events_warned(fake, monkeypatch, caplog):
    """A database ssbench creates takes model's log: it is sized (broker.log_size_mb, a quarter
    of it per growth) so autogrowth does not land in the first permutation; run.json records each
    database's recovery model and log size; a log that grew or a backup that ran inside the
    window is a warning and a line of the summary's log_events."""
    import threading

    from harness.collectors.base import Sample, SampleContext, WindowView
    from harness.collectors.storage import StorageCollector

    t = MssqlTarget.from_file(str(SINGLE))
    t.provision(max_initiators=1)
    assert fake.db(S, "ssbench_target").log_mb == 1024
    assert "SIZE = 1024MB, FILEGROWTH = 256MB" in fake.sql(what="server.sql log_size")
    t.prepare(1, "durable", BrokerSettings())
    dbs = t.describe()["databases"]
    assert dbs["target"] == {"recovery_model": "FULL", "log_mb": 1024, "created_by_ssbench": True}
    ctx = SampleContext(target=t, lock=threading.Lock())
    col, samples = StorageCollector(), []
    for k in range(4):
        if k == 2:
            fake.db(S, "ssbench_init1").log_mb = 1280               # autogrowth under the load
        samples += [Sample(float(k), "storage", m, key, v) for m, key, v in col.sample(ctx, float(k))]
    fake.db(S, "ssbench_target").backups = [("L", "2026-01-01 10:00:01", "2026-01-01 10:00:03")]
    with caplog.at_level("WARNING"):
        fields = col.summary_fields(ctx, WindowView(0.0, 4.0, tuple(samples)))
    events = fields["log_events"]
    assert any(e.startswith("init1: its log grew from 1,024 MB to 1,280 MB") for e in events), events
    assert any("a log backup ran from 2026-01-01 10:00:01" in e for e in events), events
    assert all(e in caplog.text for e in events)
    assert "msdb.dbo.backupset" in fake.sql(what="collectors.sql backups_between")
