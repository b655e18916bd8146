"""Teardown drops only what ssbench created (issue 15, item 3), against the recording fake of
SQL Server (mssql_fake.py): ownership recorded at provision time in dbo.ssbench_owned and, for
the endpoint, in an extended property of master; existing objects left as they were."""

from __future__ import annotations

import re

from pathlib import Path

import pytest
from mssql_fake import whats

from harness.errors import TargetError
from harness.targets.mssql.target import MssqlTarget

REPO = Path(__file__).resolve().parents[3]
DIST = REPO / "topologies" / "example-distributed.yaml"
SINGLE = REPO / "topologies" / "example-single.yaml"
S = "127.0.0.1:1433"
TGT = "sqltarget.lab.example:1433"


def with_broker(tmp_path, base: Path, extra: str) -> str:
    p = tmp_path / base.name
    p.write_text(base.read_text().replace("\nbroker:", "\nbroker:\n" + extra, 1)
                 if "\nbroker:" in base.read_text() else base.read_text() + "\nbroker:\n" + extra)
    return str(p)


def test_provision_records_what_it_creates_and_teardown_drops_it(fake):
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    owned = fake.owned[(S, "ssbench_target")]
    assert {("DATABASE", "ssbench_target"), ("QUEUE", "MySSBLabTestQueue"),
            ("SERVICE", "//MySSB.com/Lab/S_Test"), ("PROCEDURE", "SRPerf_Queue_LabTest"),
            ("TABLE", "messageDrop"), ("TABLE", "receiveTally"), ("TABLE", "messageErrors"),
            ("MESSAGE TYPE", "//MySSB.com/Lab/M_Test"), ("CONTRACT", "//MySSB.com/Lab/C_Test"),
            ("MASTER KEY", "##MS_DatabaseMasterKey##")} == owned
    assert ("TABLE", "dialogs") in fake.owned[(S, "ssbench_init1")]
    t.provision()                                        # idempotent: nothing new recorded
    assert fake.owned[(S, "ssbench_target")] == owned
    fake.log.clear()
    assert t.teardown(drop_databases=True) == []
    w = whats(fake)
    for sec in ("service_drop", "queue_drop", "contract_drop", "message_type_drop",
                "procedure_drop", "owned_drop"):
        assert f"teardown.sql {sec}" in w, sec
    dropped = fake.sql(what="teardown.sql table_drop", db="ssbench_target")
    for table in ("messageDrop", "receiveTally", "messageErrors"):
        assert f"DROP TABLE IF EXISTS [dbo].[{table}];" in dropped
    assert w.count("server.sql drop_database") == 4


def test_existing_objects_are_left_as_they_were(fake, tmp_path):
    """An existing database, message type and contract are used; teardown leaves them."""
    for db in ("ssbench_target", "ssbench_init1", "ssbench_init2", "ssbench_init3"):
        fake.dbs[(S, db)] = {"guid": f"{hash(db) & 0xffffffff:08x}-0000-4000-8000-000000000000",
                             "broker": True}
        fake.preexisting[(S, db)] = {("MESSAGE TYPE", "//MySSB.com/Lab/M_Test"),
                                     ("CONTRACT", "//MySSB.com/Lab/C_Test")}
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    owned = fake.owned[(S, "ssbench_target")]
    assert ("DATABASE", "ssbench_target") not in owned
    assert ("MESSAGE TYPE", "//MySSB.com/Lab/M_Test") not in owned
    assert ("QUEUE", "MySSBLabTestQueue") in owned
    fake.log.clear()
    kept = t.teardown(drop_databases=True)
    w = whats(fake)
    assert "teardown.sql message_type_drop" not in w and "teardown.sql contract_drop" not in w
    assert "teardown.sql queue_drop" in w
    assert "server.sql drop_database" not in w
    assert sum("database kept (ssbench did not create it)" in k for k in kept) == 4


def test_a_kept_database_stays_known_as_ssbenchs(fake):
    """teardown without --drop-databases keeps the DATABASE record, so a later
    teardown --drop-databases still drops the databases ssbench created."""
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()
    t.teardown()
    assert fake.owned[(S, "ssbench_target")] == {("DATABASE", "ssbench_target")}
    fake.log.clear()
    assert t.teardown(drop_databases=True) == []
    assert whats(fake).count("server.sql drop_database") == 4


@pytest.mark.parametrize("obj", [("QUEUE", "MySSBLabTestQueue"), ("SERVICE", "//MySSB.com/Lab/S_Test"),
                                 ("PROCEDURE", "SRPerf_Queue_LabTest"), ("TABLE", "messageDrop")])
def test_foreign_objects_are_not_taken_over(fake, obj):
    fake.dbs[(S, "ssbench_target")] = {"guid": "11111111-0000-4000-8000-000000000000", "broker": True}
    fake.preexisting[(S, "ssbench_target")] = {obj}
    t = MssqlTarget.from_file(str(SINGLE))
    with pytest.raises(TargetError, match=f"{obj[0].lower()} {obj[1]} already exist.*ssbench did not create"):
        t.provision()
    # refused before anything was created in any database
    created = [w for w in whats(fake) if w.startswith(("objects.sql message_type", "objects.sql queue",
                                                       "target.sql", "initiator.sql"))]
    assert created == []


def test_older_ssbench_deployment_is_adopted(fake):
    """A database an ssbench without ownership records provisioned (dbo.ssbench_config there,
    no dbo.ssbench_owned) has its objects recorded as ssbench's, so teardown removes them."""
    paper = {("MESSAGE TYPE", "//MySSB.com/Lab/M_Test"), ("CONTRACT", "//MySSB.com/Lab/C_Test"),
             ("QUEUE", "MySSBLabTestQueue"), ("SERVICE", "//MySSB.com/Lab/S_Test"),
             ("PROCEDURE", "SRPerf_Queue_LabTest"), ("TABLE", "messageDrop"),
             ("TABLE", "receiveTally"), ("TABLE", "messageErrors"), ("TABLE", "ssbench_config")}
    for db in ("ssbench_target", "ssbench_init1", "ssbench_init2", "ssbench_init3"):
        fake.dbs[(S, db)] = {"guid": f"{hash(db) & 0xffffffff:08x}-0000-4000-8000-000000000000",
                             "broker": True}
        fake.preexisting[(S, db)] = paper if db == "ssbench_target" else \
            {("TABLE", "dialogs"), ("TABLE", "ssbench_config"), *list(paper)[:4]}
    t = MssqlTarget.from_file(str(SINGLE))
    t.provision()                              # no refusal: they are ssbench's
    assert ("QUEUE", "MySSBLabTestQueue") in fake.owned[(S, "ssbench_target")]
    fake.log.clear()
    t.teardown()
    assert "teardown.sql queue_drop" in whats(fake)


def test_foreign_endpoint_refused_without_the_option(fake):
    fake.endpoints[TGT] = [("Mirroring_or_other", 5022, "STARTED", "CERTIFICATE", "NONE", "their_cert")]
    t = MssqlTarget.from_file(str(DIST))
    with pytest.raises(TargetError, match="never alters an endpoint it did not create: set "
                                          "broker.use_existing_endpoint: true"):
        t.provision()
    assert not fake.batches(what="server.sql endpoint_alter")
    assert not fake.batches(what="server.sql create_database")   # refused before any change


def test_foreign_endpoint_used_as_it_is(fake, tmp_path):
    fake.endpoints[TGT] = [("their_broker", 4022, "STARTED", "CERTIFICATE", "NONE", "their_cert")]
    fake.certs[(TGT, "master", "their_cert")] = b"their-public-certificate"
    path = with_broker(tmp_path, DIST, "  use_existing_endpoint: true\n")
    t = MssqlTarget.from_file(path)
    t.provision()
    assert not fake.batches(what="server.sql endpoint_alter", server=TGT)
    assert not fake.batches(what="server.sql endpoint_create", server=TGT)
    assert not fake.batches(what="server.sql own_certificate", server=TGT, db="master")
    assert TGT not in fake.endpoint_owner
    grants = fake.sql(what="server.sql peer_grant_connect", server=TGT)
    assert "GRANT CONNECT ON ENDPOINT::[their_broker] TO [ssbench_peer_init1];" in grants
    # the initiators trust the endpoint's own certificate
    installed = fake.sql(what="server.sql peer_certificate", server="sqlinit1.lab.example:1433")
    assert b"their-public-certificate".hex().upper() in installed
    # ssbench's own endpoints on the initiators are created and recorded
    assert fake.endpoint_owner["sqlinit1.lab.example:1433"] == "ssbench_broker_endpoint"
    fake.log.clear()
    kept = t.teardown()
    assert [k for k in kept if "endpoint their_broker" in k]
    drops = fake.batches(what="server.sql endpoint_drop")
    assert {s for s, *_ in drops} == {f"sqlinit{i}.lab.example:1433" for i in (1, 2, 3)}
    assert fake.endpoints[TGT][0][0] == "their_broker"


@pytest.mark.parametrize("row,match", [
    (("ep", 4022, "STARTED", "WINDOWS NEGOTIATE", "AES", None), "authenticates with WINDOWS NEGOTIATE"),
    (("ep", 5022, "STARTED", "CERTIFICATE", "NONE", "c"), "set broker_port: 5022 for target"),
    (("ep", 4022, "STOPPED", "CERTIFICATE", "NONE", "c"), "endpoint \\[ep\\] is STOPPED"),
])
def test_existing_endpoint_must_fit(fake, tmp_path, row, match):
    fake.endpoints[TGT] = [row]
    t = MssqlTarget.from_file(with_broker(tmp_path, DIST, "  use_existing_endpoint: true\n"))
    with pytest.raises(TargetError, match=match):
        t.provision()


def test_own_endpoint_recorded_altered_and_dropped(fake):
    t = MssqlTarget.from_file(str(DIST))
    t.provision()
    assert fake.endpoint_owner[TGT] == "ssbench_broker_endpoint"
    fake.log.clear()
    t.provision()                                  # its own endpoint: altered, not refused
    assert fake.batches(what="server.sql endpoint_alter", server=TGT)
    t.teardown()
    assert TGT not in fake.endpoint_owner and TGT not in fake.endpoints


# --------------------------------------------------------------------------- issue 52, item 4

@pytest.mark.parametrize("desc,setting,refused", [
    ("AES", "disabled", "endpoint [their_broker] on sqltarget.lab.example:1433 has ENCRYPTION = REQUIRED"),
    ("AES", "supported", None),
    ("NONE, AES", "disabled", None),
    ("RC4", "required", "no algorithm in common"),
])
def test_an_existing_endpoints_encryption_is_checked(fake, tmp_path, monkeypatch, desc, setting, refused):
    """An existing endpoint with ENCRYPTION = REQUIRED accepts only SUPPORTED or REQUIRED peers
    (CREATE ENDPOINT), and ssbench's own are DISABLED by default: check fails and provision
    refuses before changing anything, unless broker.endpoint_encryption lets them talk."""
    from mssql_fake import install_senders

    install_senders(monkeypatch, fake)
    fake.endpoints[TGT] = [("their_broker", 4022, "STARTED", "CERTIFICATE", desc, "their_cert")]
    fake.certs[(TGT, "master", "their_cert")] = b"their-public-certificate"
    path = tmp_path / "t.yaml"
    path.write_text(DIST.read_text().replace("endpoint_encryption: disabled", f"endpoint_encryption: {setting}")
                    .replace("\nbroker:", "\nbroker:\n  use_existing_endpoint: true", 1))
    t = MssqlTarget.from_file(str(path))
    lines = [d for st, what, d in t.check() if st == "fail" and what == "endpoint encryption"]
    if refused is None:
        assert not lines
        t.provision()
        return
    assert lines and refused in lines[0], lines
    with pytest.raises(TargetError, match=re.escape(refused)):
        t.provision()
    assert not fake.batches(what="server.sql create_database")      # refused before any change
